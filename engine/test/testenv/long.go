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
	"os"
	"testing"
)

// LongEnv is the environment variable `make test-long` sets: the tests
// that take minutes to prove one property (ten thousand namespaces, say)
// run only then, so `make test` stays fast and CI still runs them.
const LongEnv = "KBIND_TEST_LONG"

// Long skips a long test unless `make test-long` runs it.
func Long(tb testing.TB) {
	tb.Helper()
	if os.Getenv(LongEnv) == "" {
		tb.Skipf("a long test: `make test-long` runs it (%s=1)", LongEnv)
	}
}
