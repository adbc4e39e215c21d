// Command kubectl-kbind is kbind's kubectl plugin (docs/cli.md): on the
// provider, `export` marks CRDs as exported, `grant` onboards a consumer
// (ServiceAccount, least-privilege RBAC, a token and the consumer bundle)
// and `revoke` removes that access again.
package main

import (
	"os"

	"github.com/kbind/kbind/cli/internal/commands"
)

func main() {
	os.Exit(commands.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
