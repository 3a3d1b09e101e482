//go:build tools

// The programs scripts/apiserver.sh builds, named here so that `go mod tidy` keeps their
// modules in go.mod and go.sum (the `tools` build tag keeps this file out of every build).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
