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

package engine

import (
	"context"

	"github.com/kbind/kbind/engine/metrics"
	"github.com/kbind/kbind/engine/syncer"
)

// metricSources serves the syncers' results as kbind_conflicts and
// kbind_objects while the manager runs. It is a manager.Runnable that
// needs no leader election: every replica serves its metrics (a replica
// that is not elected has no results, hence no series), and a stopped
// engine — engines run one after another in one test process — stops
// reporting its last results.
type metricSources struct {
	results *syncer.Results
}

// Start registers the sources, and removes them once ctx ends.
func (m metricSources) Start(ctx context.Context) error {
	removeConflicts := metrics.AddConflictSource(m.results)
	defer removeConflicts()
	removeObjects := metrics.AddObjectSource(m.results)
	defer removeObjects()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: see metricSources.
func (metricSources) NeedLeaderElection() bool { return false }
