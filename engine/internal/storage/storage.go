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
