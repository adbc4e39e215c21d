//go:build kbindbench

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

package connection

import "testing"

func TestPerConnectionIdentity(t *testing.T) {
	a, b := perConnectionIdentity("uid", "a"), perConnectionIdentity("uid", "b")
	if a == b || a == "uid" || len(a) != 36 {
		t.Fatalf("identities %q and %q: want two distinct UUID-shaped ones", a, b)
	}
	if again := perConnectionIdentity("uid", "a"); again != a {
		t.Fatalf("identity changed across calls: %q then %q", a, again)
	}
	if got := perConnectionIdentity("", "a"); got != "" {
		t.Fatalf("unknown cluster identity gave %q, want \"\"", got)
	}
}
