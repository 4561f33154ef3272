#!/usr/bin/env bash
# Builds the Toxiproxy server (the fault-injection TCP proxy of the fault-matrix tests and
# benchmarks) from Go modules into $MM2SPEC_CACHE/toxiproxy-$TOXIPROXY_VERSION/bin/, idempotently.
# The version comes from tools/toxiproxy/go.mod, which must agree with TOXIPROXY_VERSION in
# scripts/versions.env. Needs Go; a cold build downloads ~20 MB of modules and compiles in about
# ten seconds on an idle two-core machine.
# Usage: scripts/install-toxiproxy.sh [--force]
set -euo pipefail
# shellcheck source=install-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/install-common.sh"

bin="$MM2SPEC_CACHE/toxiproxy-$TOXIPROXY_VERSION/bin"
want="v$TOXIPROXY_VERSION"

installed_ok() {
  [ -x "$bin/toxiproxy-server" ] &&
    [ "$("$bin/toxiproxy-server" -version 2>/dev/null)" = "toxiproxy-server version $want" ]
}

if [ "${1:-}" != "--force" ] && installed_ok; then
  step "Toxiproxy $want already installed in $bin"
  exit 0
fi

enter_go_module "$root/tools/toxiproxy" github.com/Shopify/toxiproxy/v2 "$want" TOXIPROXY_VERSION
go_build_settings
tmp="$(mktemp -d "$MM2SPEC_CACHE/toxiproxy-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
step "building toxiproxy-server $want"
go build -p "$go_jobs" -trimpath -ldflags "-X github.com/Shopify/toxiproxy/v2.Version=$want" \
  -o "$tmp/toxiproxy-server" github.com/Shopify/toxiproxy/v2/cmd/server
rm -rf "$bin"
mkdir -p "$bin"
mv "$tmp/toxiproxy-server" "$bin/"
installed_ok || die "the freshly built $bin/toxiproxy-server does not report version $want"
step "Toxiproxy $want installed in $bin"
