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

package syncer

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// deletions remembers, per consumer object, the provider copy (by UID)
// whose deletion release waits for, and whether the provider informer has
// reported that very copy deleted. A deleting object whose copy the cache
// no longer holds needs no confirming GET from the provider (SYNC-D) when
// the informer reported the deletion of the copy kbind deleted: no other
// copy can have appeared at that key since, for the Syncer applies nothing
// for a deleting object and forgets the entry whenever it applies. Without
// this, every deletion cost two provider requests (the DELETE and a GET
// answering 404), and a bulk delete ran at half the provider's rate limit.
type deletions struct {
	m sync.Map // types.NamespacedName → deletion
}

// deletion is the copy (uid) a release waits for, and whether the provider
// informer reported it deleted.
type deletion struct {
	uid  types.UID
	seen bool
}

// expect records that release is waiting for the copy uid of key to go.
// It is called before the DELETE is sent, so that the informer's report
// cannot come first.
func (d *deletions) expect(key types.NamespacedName, uid types.UID) {
	if v, ok := d.m.Load(key); ok && v.(deletion).uid == uid {
		return // already expected, maybe seen
	}
	d.m.Store(key, deletion{uid: uid})
}

// observed records the provider informer's report that the copy uid of key
// was deleted; a copy release does not wait for is ignored.
func (d *deletions) observed(key types.NamespacedName, uid types.UID) {
	d.m.CompareAndSwap(key, deletion{uid: uid}, deletion{uid: uid, seen: true})
}

// seen reports whether the copy release waits for was reported deleted.
func (d *deletions) seen(key types.NamespacedName) bool {
	v, ok := d.m.Load(key)
	return ok && v.(deletion).seen
}

// forget drops key: its finalizer is released, the object is gone, or the
// Syncer applies a copy of it again.
func (d *deletions) forget(key types.NamespacedName) { d.m.Delete(key) }
