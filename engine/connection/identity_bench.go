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

import (
	"crypto/sha256"
	"fmt"
)

// The provider-scale bench (make bench --consumers, docs/bench.md) runs
// many consumers against one provider from a few consumer clusters: a
// konnector built with the kbindbench tag gives each Connection an identity
// of its own, derived from the cluster's and the Connection's name, so
// that the provider sees as many distinct consumers (Leases, consumer
// labels, the backend's reaping) as there are Connections.
func init() { consumerIdentity = perConnectionIdentity }

// perConnectionIdentity is UUID-shaped, stable across restarts, and
// distinct per (cluster, Connection); "" while the cluster's is unknown.
func perConnectionIdentity(clusterUID, connection string) string {
	if clusterUID == "" {
		return ""
	}
	s := sha256.Sum256([]byte(clusterUID + "/" + connection))
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}
