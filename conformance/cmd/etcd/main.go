// Command etcd is etcd's own server entry point, built from the go.etcd.io/etcd/server/v3 module
// (the etcd repository's root module, which holds its main package, is not needed for that).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
