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
