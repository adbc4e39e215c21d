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
