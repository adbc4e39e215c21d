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

package identity_test

import (
	"testing"

	"github.com/kbind/kbind/engine/test/testenv"
)

// shared is the control plane the package's API server tests share,
// started by the first test that asks for it (testenv.Shared).
var shared = testenv.SharedCluster("provider", testenv.ClusterOptions{})

func TestMain(m *testing.M) { testenv.Main(m, shared, stoppable) }
