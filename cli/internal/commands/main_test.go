package commands

import (
	"testing"

	"github.com/kbind/kbind/engine/test/testenv"
)

// sharedProvider is the API server of the package's tests that need one
// (today only TestTokenSweepOnAPIServer), started by the first that asks:
// the pure tests never wait for it.
var sharedProvider = testenv.SharedCluster("provider", testenv.ClusterOptions{})

func TestMain(m *testing.M) { testenv.Main(m, sharedProvider) }
