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

package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// CloneT starts a cluster named name on a copy of c's etcd data, as a
// disaster-recovery drill or a staging clone restores an etcd snapshot of
// c into a second cluster: the same objects with the same UIDs — the
// kube-system Namespace's too, so the same cluster identity (CONN-3) —
// served by an API server of its own, with its own address and
// certificates. c's etcd is stopped for the copy (a consistent snapshot)
// and started again; c's API server and clients see a short outage. The
// clone stops when the test ends.
func (c *Cluster) CloneT(tb testing.TB, name string) *Cluster {
	tb.Helper()
	dir := tb.TempDir()
	data := filepath.Join(dir, "etcd-restored")
	if err := c.copyEtcdData(data); err != nil {
		tb.Fatalf("copying the etcd data of %s: %v", c.Name, err)
	}
	return StartClusterT(tb, name, ClusterOptions{Dir: dir, etcdDataDir: data})
}

// copyEtcdData copies c's etcd data directory to dst, with c's etcd
// stopped meanwhile.
func (c *Cluster) copyEtcdData(dst string) error {
	src := c.env.ControlPlane.Etcd.DataDir
	if src == "" {
		return errors.New("the etcd data directory is unknown")
	}
	if err := c.StopComponent(Etcd); err != nil {
		return err
	}
	copyErr := os.CopyFS(dst, os.DirFS(src))
	if copyErr == nil {
		// etcd wants its data private.
		copyErr = os.Chmod(dst, 0o700)
	}
	if err := c.StartComponent(Etcd); err != nil {
		return errors.Join(copyErr, fmt.Errorf("starting the etcd of %s again: %w", c.Name, err))
	}
	return copyErr
}
