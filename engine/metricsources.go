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
