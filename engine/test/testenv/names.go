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

package testenv

import (
	"fmt"
	"sync/atomic"
)

var nameSeq atomic.Int64

// UniqueName is base with a number no other name of this test process
// has: the namespace, Connection, binding, user or API group of one test
// on a shared environment, and of one run of it under -count=N.
func UniqueName(base string) string {
	return fmt.Sprintf("%s-%d", base, nameSeq.Add(1))
}
