package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kbindv1alpha1 "github.com/kbind/kbind/api/core/v1alpha1"
	"github.com/kbind/kbind/cli/access"
)

// confinedProbes is how many probes in a row the admission policy must
// refuse: with several API server replicas behind one address, each
// caches policies on its own, and consecutive requests may reach
// different ones.
const confinedProbes = 5

// confined waits until the admission policy of a Prefixed or None grant
// refuses, to the consumer's own token, a dry-run write it exists to
// refuse — confinedProbes times in a row — so that no token is handed out
// while its ClusterRole is in force and its policy is not yet (the API
// server loads policies asynchronously). The probe is a dry run: nothing
// is written. It fails after timeout, saying what the API server last
// answered.
func confined(ctx context.Context, cfg *rest.Config, token string, req access.Request, timeout time.Duration) error {
	probeCfg := rest.AnonymousClientConfig(cfg)
	probeCfg.BearerToken = token
	probeCfg.UserAgent = "kubectl-kbind"
	cs, err := kubernetes.NewForConfig(probeCfg)
	if err != nil {
		return err
	}
	ns := probeNamespace(req)
	policy := fmt.Sprintf("ValidatingAdmissionPolicy '%s'", access.Name(req.Consumer))
	last, err := inARow(ctx, timeout, func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil:
			return false, "the dry-run write was allowed", nil
		case strings.Contains(err.Error(), policy):
			return true, "", nil
		}
		return false, err.Error(), nil
	})
	if errors.Is(err, errNotInARow) {
		return fmt.Errorf("the admission policy %s is not in force after %s: a dry-run write it must refuse, made with the new token, got: %s "+
			"(does this provider serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies?)", access.Name(req.Consumer), timeout, last)
	}
	return err
}

// errNotInARow is inARow's timeout.
var errNotInARow = errors.New("not confirmed in a row before the timeout")

// inARow polls probe until it confirms confinedProbes times in a row (each
// API server replica caches policies and RBAC on its own, and consecutive
// requests may reach different ones), or timeout passes: then it returns
// errNotInARow and what the last unconfirmed probe said. A probe error
// ends the wait.
func inARow(ctx context.Context, timeout time.Duration, probe func(context.Context) (confirmed bool, why string, err error)) (string, error) {
	confirmations := 0
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		confirmed, why, err := probe(ctx)
		if err != nil || !confirmed {
			confirmations, last = 0, why
			return false, err
		}
		confirmations++
		return confirmations >= confinedProbes, nil
	})
	if errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err) {
		return last, errNotInARow
	}
	return last, err
}

// probeNamespace is a namespace the policy refuses to let the consumer
// create: under Prefixed one outside its prefix (no prefix may cover
// "kbind-"), under None one labelled for a Prefixed consumer.
func probeNamespace(req access.Request) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kbind-grant-probe"}}
	if req.Isolation.Mode == kbindv1alpha1.IsolationNone {
		ns.Labels = map[string]string{kbindv1alpha1.PrefixLabel: "kbind-grant-probe"}
	}
	return ns
}
