//go:build tools

// Package tools pins the Pulumi CLI's main package so that `go build` inside this module builds it
// at the version required in go.mod (see scripts/install-pulumi.sh).
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
