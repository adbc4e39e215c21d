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

package session_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kbind/kbind/engine/session"
)

// countingDialer counts the connections it opened that are not closed.
type countingDialer struct {
	open atomic.Int32
}

func (d *countingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.open.Add(1)
	return &countedConn{Conn: c, d: d}, nil
}

type countedConn struct {
	net.Conn
	d    *countingDialer
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.d.open.Add(-1) })
	return c.Conn.Close()
}

// A stopped session closes its provider connections — those of its watches
// and of its one-shot requests — at once, rather than leaving them to
// their idle timeout: a Connection deleted, or rotated to new credentials,
// keeps nothing open on the provider.
func TestStoppedSessionClosesItsConnections(t *testing.T) {
	t.Parallel()
	cluster := session.SharedProvider.Get(t)
	d := &countingDialer{}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Dial = d.DialContext
	ctx := context.Background()
	m := session.NewManager(ctx, session.Options{Scheme: clientgoscheme.Scheme, QPS: 50, Burst: 100, Timeout: 10 * time.Second})
	s := session.RunningSession(ctx, t, m, cfg)
	err := s.Client.List(ctx, &corev1.ConfigMapList{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Discovery.ServerVersion(); err != nil {
		t.Fatal(err)
	}
	if d.open.Load() == 0 {
		t.Fatal("the session opened no connection")
	}
	t.Logf("%d connections open while the session runs", d.open.Load())

	m.Stop("p")
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return d.open.Load() == 0, nil
	})
	if err != nil {
		t.Errorf("%d connections still open after the session stopped", d.open.Load())
	}
}
