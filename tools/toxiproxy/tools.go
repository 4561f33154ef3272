//go:build tools

// Package tools pins the Toxiproxy server's main package so that `go build` inside this module
// builds it at the version required in go.mod (see scripts/install-toxiproxy.sh).
package tools

import _ "github.com/Shopify/toxiproxy/v2/cmd/server"
