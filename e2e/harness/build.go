package harness

import (
	"context"
	"fmt"
	"os/exec"

	"k8s.io/client-go/tools/clientcmd"
)

// Build compiles the Go package pkg (an import path, e.g.
// github.com/kbind/kbind/konnector/cmd/konnector) into bin.
func Build(ctx context.Context, bin, pkg string) error {
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return fmt.Errorf("building %s: %v\n%s", pkg, err, out)
	}
	return nil
}

// WriteImpersonating writes a copy of the kubeconfig src to dst in which
// every user impersonates user (e.g. a chart's ServiceAccount,
// system:serviceaccount:<namespace>:<name>), so a process run with it gets
// exactly that identity's RBAC.
func WriteImpersonating(src, dst, user string) error {
	kc, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return err
	}
	for _, u := range kc.AuthInfos {
		u.Impersonate = user
	}
	return clientcmd.WriteToFile(*kc, dst)
}
