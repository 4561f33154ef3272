#!/usr/bin/env bash
# Builds actionlint (the GitHub Actions workflow linter: the tests check the CI workflow that
# `mm2spec init` writes, and .github/workflows/dr-spec.yml, with it) from Go modules into
# $MM2SPEC_CACHE/actionlint-$ACTIONLINT_VERSION/bin/, idempotently, at the version pinned in
# scripts/versions.env. `go install MODULE@VERSION` builds against actionlint's own go.mod and
# go.sum, so the build is the same on every machine. Needs Go; a cold build (empty Go caches)
# downloads a few MB of modules: about a minute on two cores, much less with the modules cached.
# Usage: scripts/install-actionlint.sh [--force]
set -euo pipefail
# shellcheck source=install-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/install-common.sh"

bin="$MM2SPEC_CACHE/actionlint-$ACTIONLINT_VERSION/bin"
want="v$ACTIONLINT_VERSION"

installed_ok() {
  [ -x "$bin/actionlint" ] && [ "$("$bin/actionlint" -version 2>/dev/null | head -n 1)" = "$want" ]
}

if [ "${1:-}" != "--force" ] && installed_ok; then
  step "actionlint $want already installed in $bin"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  die "Go is not installed (or not on PATH); actionlint is built from Go modules. Install Go and rerun scripts/test."
go_build_settings
tmp="$(mktemp -d "$MM2SPEC_CACHE/actionlint-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
step "building actionlint $want"
# Outside any module: `go install ...@version` must not pick up a go.mod of the folder it runs in.
(cd "$tmp" && GOBIN="$tmp/bin" go install -p "$go_jobs" -trimpath "github.com/rhysd/actionlint/cmd/actionlint@$want")
rm -rf "$bin"
mkdir -p "$(dirname "$bin")"
mv "$tmp/bin" "$bin"
installed_ok || die "the freshly built $bin/actionlint does not report version $want"
step "actionlint $want installed in $bin"
