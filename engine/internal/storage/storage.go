/*
Copyright The kbind Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package storage recognises, in API errors, the API server's storage
// limits: an object larger than the API server or its etcd accepts.
package storage

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TooLarge reports an object the API server cannot store: its 413, or
// etcd's request size limit, which the API server passes on as an internal
// error ("etcdserver: request is too large").
func TooLarge(err error) bool {
	return apierrors.IsRequestEntityTooLargeError(err) ||
		(apierrors.IsInternalError(err) && strings.Contains(err.Error(), "request is too large"))
}
