// Command etcd is the etcd server built from the Go module proxy for kbind's
// local test control planes. It exists so tests need neither Docker nor a
// binary download: see tools/controlplane/build.sh.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
