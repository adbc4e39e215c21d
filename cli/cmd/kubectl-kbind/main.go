// Command kubectl-kbind is kbind's kubectl plugin (docs/cli.md): on the
// provider, `export` marks CRDs as exported, `grant` onboards a consumer
// (ServiceAccount, least-privilege RBAC, a token and the consumer bundle)
// and `revoke` removes that access again, `consumers` lists every
// consumer (mode, heartbeat, konnector version, objects, token expiry); on
// the consumer, `status` shows every Connection and binding on one screen
// and `doctor` runs the troubleshooting guide as code.
package main

import (
	"os"

	"github.com/kbind/kbind/cli/internal/commands"
)

func main() {
	os.Exit(commands.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
