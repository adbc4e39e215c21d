package syncer

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kbind/kbind/engine/ownership"
	"github.com/kbind/kbind/engine/providerevents"
)

// runningForwarder is a running provider Events forwarder.
type runningForwarder struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// runForwarder starts the Syncer's provider Events forwarder when want
// and it does not run, or stops it when it runs and !want: it runs only
// while a binding of the scope forwards Events, so credentials that may
// not watch Events cost nothing once the bindings say Ignore.
func (s *Syncer) runForwarder(want bool) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	switch {
	case want && s.forwarder == nil && s.ctx.Err() == nil:
		f, err := providerevents.New(providerevents.Options{
			Connection: s.target.Connection, GroupKind: s.target.GVK.GroupKind(),
			Provider: s.session.Config, ProviderHTTPClient: s.session.HTTPClient, Namespace: s.session.ConfinedTo,
			Consumer: s.consumer, ConsumerCache: s.ccache,
			Resolve: s.resolveEvent, Limiter: s.limiter,
			Refused: func(refusal string) { s.results.setRefusal(s.target, refusal) },
		})
		if err != nil {
			log.FromContext(s.ctx).Error(err, "Provider Events are not forwarded")
			return
		}
		ctx, cancel := context.WithCancel(s.ctx)
		running := &runningForwarder{cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(running.done)
			f.Run(ctx)
		}()
		s.forwarder = running
	case !want && s.forwarder != nil:
		s.forwarder.cancel()
		<-s.forwarder.done
		s.forwarder = nil
		s.results.setRefusal(s.target, "")
	}
}

// resolveEvent maps a provider Event to the consumer object whose copy it
// is about: the copy must be in the provider cache with this consumer's
// ownership markers (and, when the Event names one, the same UID), its
// consumer object in the consumer cache, and a binding that forwards
// Events must cover it.
func (s *Syncer) resolveEvent(ctx context.Context, e *corev1.Event) (corev1.ObjectReference, providerevents.Verdict) {
	pkey := types.NamespacedName{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name}
	if !s.target.Namespaced {
		pkey.Namespace = ""
	}
	pobj, exists, err := s.providerGet(ctx, pkey)
	switch {
	case err != nil || !exists:
		// Not in the cache yet, or gone (then the retries run out).
		return corev1.ObjectReference{}, providerevents.Retry
	case e.InvolvedObject.UID != "" && e.InvolvedObject.UID != pobj.GetUID():
		return corev1.ObjectReference{}, providerevents.Skip // about an earlier object of that name
	}
	key, ok := s.consumerKey(pobj)
	if !ok {
		return corev1.ObjectReference{}, providerevents.Skip
	}
	if policy, covered := s.currentScope().covers(key.Namespace); !covered || !policy.ForwardEvents {
		return corev1.ObjectReference{}, providerevents.Skip
	}
	cobj := s.newObject()
	if err := s.ccache.Get(ctx, key, cobj); err != nil {
		if apierrors.IsNotFound(err) {
			return corev1.ObjectReference{}, providerevents.Skip
		}
		return corev1.ObjectReference{}, providerevents.Retry
	}
	if ownership.Classify(true, pobj.GetAnnotations(), s.target.ClusterUID, string(cobj.GetUID())) != ownership.Ours {
		return corev1.ObjectReference{}, providerevents.Skip
	}
	return corev1.ObjectReference{
		APIVersion: s.target.GVK.GroupVersion().String(), Kind: s.target.GVK.Kind,
		Namespace: key.Namespace, Name: key.Name, UID: cobj.GetUID(),
	}, providerevents.Forward
}
