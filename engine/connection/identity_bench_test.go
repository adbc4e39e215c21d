//go:build kbindbench

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
