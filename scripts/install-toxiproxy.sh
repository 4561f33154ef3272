#!/usr/bin/env bash
# Builds the Toxiproxy server (the fault-injection TCP proxy of the fault-matrix tests and
# benchmarks) from Go modules into $MM2SPEC_CACHE/toxiproxy-$TOXIPROXY_VERSION/bin/, idempotently.
# The version comes from tools/toxiproxy/go.mod, which must agree with TOXIPROXY_VERSION in
# scripts/versions.env. Needs Go; a cold build downloads ~20 MB of modules and compiles in about
# a minute on two cores.
# Usage: scripts/install-toxiproxy.sh [--force]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"
export MM2SPEC_CACHE="${MM2SPEC_CACHE:-$HOME/.cache/mm2spec}"

step() { printf '==> %s\n' "$*" >&2; }
die() { printf 'install-toxiproxy.sh: %s\n' "$*" >&2; exit 1; }

module="$root/tools/toxiproxy"
dest="$MM2SPEC_CACHE/toxiproxy-$TOXIPROXY_VERSION"
bin="$dest/bin"
want="v$TOXIPROXY_VERSION"

installed_ok() {
  [ -x "$bin/toxiproxy-server" ] &&
    [ "$("$bin/toxiproxy-server" -version 2>/dev/null)" = "toxiproxy-server version $want" ]
}

if [ "${1:-}" != "--force" ] && installed_ok; then
  step "Toxiproxy $want already installed in $bin"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  die "Go is not installed (or not on PATH); Toxiproxy is built from Go modules. Install Go 1.23 or newer and rerun scripts/setup."

cd "$module"
pinned="$(go list -m -f '{{.Version}}' github.com/Shopify/toxiproxy/v2)"
[ "$pinned" = "$want" ] ||
  die "tools/toxiproxy/go.mod requires ${pinned:-?}, but scripts/versions.env says TOXIPROXY_VERSION=$TOXIPROXY_VERSION; make them agree (go.mod's require, then: cd tools/toxiproxy && go mod tidy)."

export GOFLAGS="${GOFLAGS:-$(go env GOFLAGS)} -buildvcs=false"
mkdir -p "$MM2SPEC_CACHE"
tmp="$(mktemp -d "$MM2SPEC_CACHE/toxiproxy-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
step "building toxiproxy-server $want"
go build -trimpath -ldflags "-X github.com/Shopify/toxiproxy/v2.Version=$want" \
  -o "$tmp/toxiproxy-server" github.com/Shopify/toxiproxy/v2/cmd/server
rm -rf "$bin"
mkdir -p "$bin"
mv "$tmp/toxiproxy-server" "$bin/"
installed_ok || die "the freshly built $bin/toxiproxy-server does not report version $want"
step "Toxiproxy $want installed in $bin"
