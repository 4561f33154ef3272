# Sourced by the install scripts (not run): where they are, the pinned versions, the cache, and how
# they report. Sets $here (scripts/), $root (the checkout), the *_VERSION variables of versions.env
# and $MM2SPEC_CACHE (created); defines step (progress on stderr) and die (message, exit 1).
here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"
export MM2SPEC_CACHE="${MM2SPEC_CACHE:-$HOME/.cache/mm2spec}"
mkdir -p "$MM2SPEC_CACHE"

step() { printf '==> %s\n' "$*" >&2; }
die() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# Go builds on two cores: one package compiled at a time keeps memory and load reasonable
# (override with GO_BUILD_P); no VCS stamping, which needs a working git and adds nothing here.
go_build_settings() {
  go_jobs="${GO_BUILD_P:-$(( $(nproc 2>/dev/null || echo 2) > 2 ? 2 : 1 ))}"
  export GOFLAGS="${GOFLAGS:-$(go env GOFLAGS)} -buildvcs=false"
}

# cd into the Go module folder $1 and check that it builds module $2 at version $3, or die naming
# versions.env's key $4: the version built must be the one the binaries are labelled with.
enter_go_module() {
  command -v go >/dev/null 2>&1 ||
    die "Go is not installed (or not on PATH); $2 is built from Go modules. Install Go (the version tools/*/go.mod names) and rerun scripts/setup."
  cd "$1"
  local pinned
  pinned="$(go list -m -f '{{.Version}}' "$2")"
  [ "$pinned" = "$3" ] ||
    die "$1/go.mod builds $2 ${pinned:-?}, but scripts/versions.env says $4=${3#v}; make them agree (go.mod's require, then go mod tidy)."
}
