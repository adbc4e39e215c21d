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

package related

// The watch budget of a consumer namespace (Options.WatchesPerNamespace):
// the bookkeeping behind Copier.use, which admits entries with admit
// (decide.go). Guarded by Copier.mu.

// admission is what use decided about a binding's entries: the ones over
// its namespace's watch budget (by index: how many watches each would
// add), and how many the namespace holds.
type admission struct {
	over map[int]int
	used int
}

// countSourcesLocked records that binding uid (of namespace ns) now holds
// sources against the budget, and says whether that freed any watch of
// the namespace.
func (c *Copier) countSourcesLocked(uid, ns string, sources map[ref]bool) (freed bool) {
	counts := c.namespaces[ns]
	if counts == nil {
		counts = map[ref]int{}
		c.namespaces[ns] = counts
	}
	for r := range c.sources[uid] {
		if sources[r] {
			continue
		}
		if counts[r]--; counts[r] <= 0 {
			delete(counts, r)
			freed = true
		}
	}
	for r := range sources {
		if !c.sources[uid][r] {
			counts[r]++
		}
	}
	if len(counts) == 0 {
		delete(c.namespaces, ns)
	}
	if len(sources) == 0 {
		delete(c.sources, uid)
		delete(c.namespaceOf, uid)
	} else {
		c.sources[uid], c.namespaceOf[uid] = sources, ns
	}
	return freed
}

// wakeLocked lists the Connections of namespace ns's bindings waiting for
// watches when some were freed there.
func (c *Copier) wakeLocked(ns string, freed bool) []string {
	if !freed {
		return nil
	}
	var conns []string
	for _, conn := range c.waiting[ns] {
		conns = append(conns, conn)
	}
	return conns
}

func (c *Copier) trigger(conns []string) {
	if c.opts.Trigger == nil {
		return
	}
	for _, conn := range conns {
		c.opts.Trigger(conn)
	}
}

// setWaitingLocked records whether binding uid of namespace ns has
// entries over the budget.
func (c *Copier) setWaitingLocked(ns, uid, connection string, over bool) {
	if over {
		if c.waiting[ns] == nil {
			c.waiting[ns] = map[string]string{}
		}
		c.waiting[ns][uid] = connection
		return
	}
	delete(c.waiting[ns], uid)
	if len(c.waiting[ns]) == 0 {
		delete(c.waiting, ns)
	}
}
