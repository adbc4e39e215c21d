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

package watchjson

import (
	"context"
	"math/rand/v2"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// A reflector retries a watch whose connection is refused — its API
// server stopped or not yet listening — with its own backoff, 0.8 s
// doubling to 30 s (and up to twice that with its jitter), which an
// informer cannot configure. Through a restart that backoff grows to its
// cap, and the reflector's next failure (a restarted API server often
// closes the first watch at once, before its watch cache is ready) waits
// that long: the cache stays stale for up to a minute after the server
// came back, and every change made meanwhile waits with it. A refused
// connection asks nothing of the server, so the watch here retries it
// itself, jittered, at most refusedRetryCap apart; the reflector sees
// every other error, and its backoff stays for those.
var (
	refusedRetryFirst = 250 * time.Millisecond
	refusedRetryCap   = 4 * time.Second
)

// retryingRefused returns lw whose watch retries refused connections
// until ctx ends (see refusedRetryCap).
func retryingRefused(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	withContext := toolscache.ToListerWatcherWithContext(lw)
	return &toolscache.ListWatch{
		ListWithContextFunc:  withContext.ListWithContext,
		WatchFuncWithContext: retryRefused(withContext.WatchWithContext),
	}
}

// retryRefused calls open until its connection is not refused, waiting
// between tries from refusedRetryFirst, doubling, to refusedRetryCap, each
// wait drawn from its upper half so that informers of many clients that
// lost the same server spread out. It returns the last error when ctx
// ends.
func retryRefused(open toolscache.WatchFuncWithContext) toolscache.WatchFuncWithContext {
	return func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		delay := refusedRetryFirst
		for {
			w, err := open(ctx, opts)
			if err == nil || !utilnet.IsConnectionRefused(err) {
				return w, err
			}
			wait := time.NewTimer(delay/2 + rand.N(delay/2+1))
			select {
			case <-ctx.Done():
				wait.Stop()
				return nil, err
			case <-wait.C:
			}
			delay = min(2*delay, refusedRetryCap)
		}
	}
}
