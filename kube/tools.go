//go:build tools

// Package tools pins the three binaries the tests start: built with `go build` from this
// module, they resolve against the versions in go.mod and go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
