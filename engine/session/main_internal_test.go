package session

import (
	"testing"

	"github.com/kbind/kbind/engine/test/testenv"
)

// SharedProvider is the provider control plane the package's API server
// tests share (internal and external ones alike), started by the first of
// them: the pure tests never wait for it. Each test owns what it creates
// there — its sessions, its Lease, CRDs of a group of its own — so the
// tests run in parallel and again (-count) on the same cluster.
var SharedProvider = testenv.SharedCluster("provider", testenv.ClusterOptions{})

func TestMain(m *testing.M) { testenv.Main(m, SharedProvider) }
