package identity_test

import (
	"testing"

	"github.com/kbind/kbind/engine/test/testenv"
)

// shared is the control plane the package's API server tests share,
// started by the first test that asks for it (testenv.Shared).
var shared = testenv.SharedCluster("provider", testenv.ClusterOptions{})

func TestMain(m *testing.M) { testenv.Main(m, shared) }
