#!/usr/bin/env bash
# Builds the Pulumi CLI from Go modules into $MM2SPEC_CACHE/pulumi-$PULUMI_VERSION/bin/, idempotently:
#   pulumi                          the CLI (github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
#   pulumi-language-python          mm2spec's own Python language host (tools/pulumi/cmd/...)
#   pulumi-language-python-exec     } scripts shipped in github.com/pulumi/pulumi/sdk/v3
#   pulumi-resource-pulumi-python   } (the program launcher and the dynamic-provider plugin)
#   pulumi-language-nodejs          } mm2spec's own SDK-generation host (tools/pulumi/cmd/pulumi-language-sdkgen),
#   pulumi-language-go              } one binary under two names: `pulumi package gen-sdk --language nodejs|go`
# The version comes from tools/pulumi/go.mod, which must agree with PULUMI_VERSION in
# scripts/versions.env. Needs Go; the Go module and build caches stay at their defaults, so a
# rebuild after a wipe of $MM2SPEC_CACHE only relinks (~30 s). A cold build takes 8-30 minutes.
# Usage: scripts/install-pulumi.sh [--force]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"
export MM2SPEC_CACHE="${MM2SPEC_CACHE:-$HOME/.cache/mm2spec}"

step() { printf '==> %s\n' "$*" >&2; }
die() { printf 'install-pulumi.sh: %s\n' "$*" >&2; exit 1; }

module="$root/tools/pulumi"
dest="$MM2SPEC_CACHE/pulumi-$PULUMI_VERSION"
bin="$dest/bin"
want="v$PULUMI_VERSION"

force=0
[ "${1:-}" = "--force" ] && force=1

installed_ok() {
  [ -x "$bin/pulumi" ] && [ -x "$bin/pulumi-language-python" ] &&
    [ -x "$bin/pulumi-language-python-exec" ] && [ -x "$bin/pulumi-resource-pulumi-python" ] &&
    [ -x "$bin/pulumi-language-nodejs" ] && [ -x "$bin/pulumi-language-go" ] &&
    [ "$(PULUMI_SKIP_UPDATE_CHECK=1 PULUMI_HOME="$dest/home" "$bin/pulumi" version 2>/dev/null)" = "$want" ]
}

if [ "$force" = 0 ] && installed_ok; then
  step "Pulumi CLI $want already installed in $bin"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  die "Go is not installed (or not on PATH); the Pulumi CLI is built from Go modules. Install Go 1.25 or newer and rerun scripts/setup."

# The version built is the one tools/pulumi/go.mod requires; refuse to label it with another.
cd "$module"
pinned="$(go list -m -f '{{.Version}}' github.com/pulumi/pulumi/pkg/v3)"
sdk="$(go list -m -f '{{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}' github.com/pulumi/pulumi/sdk/v3)"
[ "$pinned" = "$want" ] && [ "$sdk" = "$want" ] ||
  die "tools/pulumi/go.mod builds pkg/v3 ${pinned:-?} with sdk/v3 ${sdk:-?}, but scripts/versions.env says PULUMI_VERSION=$PULUMI_VERSION; make them agree (go.mod's require and the sdk/v3 replace line, then: cd tools/pulumi && go mod tidy)."

# Two cores: one package compiled at a time keeps memory and load reasonable; override with GO_BUILD_P.
jobs="${GO_BUILD_P:-$(( $(nproc 2>/dev/null || echo 2) > 2 ? 2 : 1 ))}"
# go.mod and go.sum are complete (go mod tidy), so the default -mod=readonly builds them as they are.
# No VCS stamping: it needs a working `git` on the clone and adds nothing to `pulumi version`.
export GOFLAGS="${GOFLAGS:-$(go env GOFLAGS)} -buildvcs=false"
mkdir -p "$MM2SPEC_CACHE"
tmp="$(mktemp -d "$MM2SPEC_CACHE/pulumi-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

ldflags="-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$want"
start=$SECONDS
step "building pulumi $want: SLOW the first time: ~1.5 GB of Go modules, then ~8 minutes of compiling on an idle 2-core machine, 30 on a busy one; with a warm Go build cache it only relinks (~30 s)"
go build -p "$jobs" -trimpath -ldflags "$ldflags" -o "$tmp/bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
step "building pulumi-language-python"
go build -p "$jobs" -trimpath -ldflags "-X main.version=$want" -o "$tmp/bin/pulumi-language-python" ./cmd/pulumi-language-python
# Pulumi's own Node.js and Go hosts are Go modules the proxy does not serve; gen-sdk only needs their
# GeneratePackage, i.e. pkg/v3's code generators (~15 s more to compile and link, once).
step "building pulumi-language-nodejs and pulumi-language-go (SDK generation only)"
go build -p "$jobs" -trimpath -ldflags "-X main.version=$want" -o "$tmp/bin/pulumi-language-nodejs" ./cmd/pulumi-language-sdkgen
cp "$tmp/bin/pulumi-language-nodejs" "$tmp/bin/pulumi-language-go"

sdkdir="$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)"
[ -n "$sdkdir" ] && [ -d "$sdkdir/python" ] || die "could not find the github.com/pulumi/pulumi/sdk/v3 module in the Go module cache"
for script in python/cmd/pulumi-language-python-exec python/dist/pulumi-resource-pulumi-python; do
  [ -f "$sdkdir/$script" ] || die "$script is missing from $sdkdir"
  cp "$sdkdir/$script" "$tmp/bin/"
done
chmod 0755 "$tmp/bin/"*
step "built in $((SECONDS - start))s"

rm -rf "$bin"
mkdir -p "$dest"
mv "$tmp/bin" "$bin"
installed_ok || die "the freshly built $bin/pulumi does not report version $want"
step "Pulumi CLI $want installed in $bin"
