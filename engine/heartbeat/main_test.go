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

package heartbeat_test

import (
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kbind/kbind/engine/test/testenv"
)

// provider is the one control plane the package's API server tests share,
// started by the first of them (the pure tests never wait for it). Each
// test renews its Leases in a namespace of its own (leaseNamespace), so
// the tests run in parallel and again (-count) on the same cluster.
var provider = testenv.SharedCluster("provider", testenv.ClusterOptions{})

func TestMain(m *testing.M) { testenv.Main(m, provider) }

// startProvider returns an admin client of the package's shared provider
// control plane, started on first use.
func startProvider(t *testing.T) client.WithWatch {
	t.Helper()
	admin, err := client.NewWithWatch(provider.Get(t).Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return admin
}

var namespaces atomic.Int64

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// leaseNamespace is a namespace no other test (nor an earlier run of this
// one) uses, derived from the test's name; it does not exist yet, as on a
// provider the consumer renews on for the first time.
func leaseNamespace(t *testing.T) string {
	name := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("%s-%d", name, namespaces.Add(1))
}
