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
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/engine/heartbeat"
	"github.com/kbind/kbind/engine/kubeconfig"
	kbindschema "github.com/kbind/kbind/engine/schema"
	"github.com/kbind/kbind/engine/session"
)

// probe reads identities and exports into obs and returns when the next
// pass is due. The provider's identity is read once per recheck interval
// per kubeconfig, and at once after a failure or a failed or stale
// heartbeat; the exports once per discovery interval, and at once when the
// watch of the exported CRDs announces a change (for the CRD source that
// pass is served by the watch: an idle Connection costs the provider its
// heartbeat, one identity read and one list per recheck interval). What
// was learned is recorded with the session layer (RecordProbe), which
// owns it between reconciles.
func (r *Reconciler) probe(ctx context.Context, conn *kbindv1alpha1.Connection, sess *session.Session, parsed *kubeconfig.Parsed, obs *observation) time.Duration {
	localUID, err := r.localUID.read(ctx, r.LocalIdentity, conn.Name)
	if err != nil {
		obs.probed = true
		obs.identityErr = fmt.Errorf("consumer: %w", err)
		return 0
	}
	health, _ := r.Sessions.Health(conn.Name)
	now := time.Now()
	p, identityWasDue := r.probeIdentity(ctx, sess, health, now)
	verified := p.IdentityErr == nil && identityMismatch(conn, p.RemoteUID, localUID) == ""
	if verified && conn.Spec.Schema.Source != kbindv1alpha1.SchemaSourceOpenAPI {
		// Only a verified provider is watched.
		r.Sessions.WatchExports(sess, r.RecheckInterval)
	}
	if verified && (identityWasDue || discoveryDue(p, health.ExportsChangedAt, now, r.DiscoveryInterval)) {
		d := &kbindschema.Discoverer{Client: sess.CRDs, Discovery: sess.Discovery}
		p.Discovery, p.DiscoveryErr = d.Discover(ctx, conn.Spec.Schema.Source, conn.Status.ActiveSchemaSource)
		p.DiscoveredAt = now
		obs.fresh = true
	}
	r.Sessions.RecordProbe(conn.Name, p)
	return r.observeProbe(conn, p, localUID, parsed, obs, now)
}

// probeIdentity returns the identity probe this reconcile goes on with,
// and whether a read was due. A heartbeat renewal that got no answer since
// the last read is reported at once without a request (a read now would
// wait for the same silence, up to the request timeout; the next pass —
// the probe backoff — reads the identity); a due read goes to the
// provider; otherwise the last probe stands.
func (r *Reconciler) probeIdentity(ctx context.Context, sess *session.Session, h session.Health, now time.Time) (session.Probe, bool) {
	p, hb := h.Probe, h.Heartbeat
	due := identityDue(p, sess.Hash, hb.RecheckAt, now, r.RecheckInterval)
	switch {
	case p.Hash == sess.Hash && heartbeatUnanswered(hb.Err, hb.UnansweredAt, p.At):
		p.At, p.Unanswered = now, true
		p.RemoteUID, p.IdentityErr = "", fmt.Errorf("its heartbeat Lease renewal got no answer: %w", hb.Err)
	case due:
		// The last discovery stays until its own pass is due.
		rctx := ctx
		if p.IdentityErr != nil {
			var cancel context.CancelFunc
			rctx, cancel = context.WithTimeout(ctx, DisconnectedProbeTimeout)
			defer cancel()
		}
		p.Hash, p.At, p.Unanswered = sess.Hash, now, false
		p.RemoteUID, p.IdentityErr = sess.ClusterUID(rctx)
	}
	return p, due
}

// observeProbe puts a probe into obs: the identity outcome, the pins
// (written on conn's status once verified) and the exports; it returns
// when the next pass is due (0 when the provider is not verified: the
// backoff decides).
func (r *Reconciler) observeProbe(conn *kbindv1alpha1.Connection, p session.Probe, localUID string, parsed *kubeconfig.Parsed, obs *observation, now time.Time) time.Duration {
	obs.probed = true
	obs.identityErr, obs.unanswered = p.IdentityErr, p.Unanswered
	if p.IdentityErr != nil {
		obs.loopbackInPod = r.loopbackHint(parsed)
		return 0
	}
	if obs.identityChanged = identityMismatch(conn, p.RemoteUID, localUID); obs.identityChanged != "" {
		return 0
	}
	conn.Status.RemoteClusterUID = p.RemoteUID
	conn.Status.LocalClusterUID = localUID
	obs.verified = true
	obs.discovery, obs.discoveryErr = p.Discovery, p.DiscoveryErr
	if p.Discovery != nil {
		// A group that could not be read keeps its last known exports:
		// only a successful read that no longer lists an API removes it.
		obs.unreadable = p.Discovery.Unreadable
		obs.exports = kbindschema.KeepUnreadable(p.Discovery.Exports, p.Discovery.Unreadable,
			conn.Status.ExportedAPIs, conn.Status.ActiveSchemaSource, p.Discovery.Source)
	}
	return nextPass(now, p.DiscoveredAt, p.At, r.DiscoveryInterval, r.RecheckInterval)
}

// identityDue reports whether the provider's identity is read again now:
// it was never read with the kubeconfig of hash, the last read failed,
// the recheck interval has passed, or the heartbeat asked for a read
// (recheckAt) since.
func identityDue(p session.Probe, hash string, recheckAt, now time.Time, recheck time.Duration) bool {
	return p.Hash != hash || p.IdentityErr != nil || now.Sub(p.At) >= recheck || recheckAt.After(p.At)
}

// discoveryDue reports whether the exports are discovered again now
// (besides after an identity read): the last pass failed, the discovery
// interval has passed, or the watch of the exported CRDs announced a
// change since.
func discoveryDue(p session.Probe, exportsChangedAt, now time.Time, interval time.Duration) bool {
	return p.DiscoveryErr != nil || now.Sub(p.DiscoveredAt) >= interval || exportsChangedAt.After(p.DiscoveredAt)
}

// identityMismatch says why the identities read differ from those the
// Connection is pinned to, "" when they match (or nothing is pinned yet).
func identityMismatch(conn *kbindv1alpha1.Connection, remoteUID, localUID string) string {
	if pinned := conn.Status.RemoteClusterUID; pinned != "" && pinned != remoteUID {
		return fmt.Sprintf("the provider cluster identity is %s, but this Connection is pinned to %s: the Secret now points at a different cluster; restore the original endpoint and credentials, or create a new Connection for a deliberate migration", remoteUID, pinned)
	}
	if pinned := conn.Status.LocalClusterUID; pinned != "" && pinned != localUID {
		return fmt.Sprintf("the consumer cluster identity is %s, but this Connection is pinned to %s", localUID, pinned)
	}
	return ""
}

// DisconnectedProbeTimeout bounds the identity read of a Connection whose
// last one failed: with MaxProbeBackoff between reads, a provider that
// answers again is noticed within their sum (15 s), even when the read in
// flight at the heal waits for an answer that never comes. A provider
// that needs longer to answer one request is not connected to meanwhile.
const DisconnectedProbeTimeout = 5 * time.Second

// heartbeatUnanswered says whether the heartbeat's last renewal got no
// answer from the provider (err, at) since the identity was last read
// (identityAt): the provider is then reported unreachable without
// another request.
func heartbeatUnanswered(err error, at, identityAt time.Time) bool {
	return heartbeat.Unanswered(err) && at.After(identityAt)
}

// nextPass is how long until the next discovery pass or identity read is
// due (at least a second).
func nextPass(now, discoveredAt, identityAt time.Time, discovery, recheck time.Duration) time.Duration {
	due := min(discoveredAt.Add(discovery).Sub(now), identityAt.Add(recheck).Sub(now))
	return max(due, time.Second)
}

// loopbackHint explains a loopback provider address seen from a Pod
// (CONN-3, beyond).
func (r *Reconciler) loopbackHint(parsed *kubeconfig.Parsed) string {
	if !r.InCluster || parsed == nil {
		return ""
	}
	u, err := url.Parse(parsed.Config.Host)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return fmt.Sprintf("; the provider address %s is a loopback address, which from inside the konnector Pod points at the Pod itself, not at your workstation or a kind node: use an address reachable from the consumer cluster's network", u.Host)
	}
	return ""
}
