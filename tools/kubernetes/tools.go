//go:build tools

// Package tools pins the Kubernetes API server and kubectl main packages so that `go build` inside
// this module builds them at the version required in go.mod (see scripts/install-kubernetes.sh).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
