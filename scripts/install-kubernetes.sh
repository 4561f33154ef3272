#!/usr/bin/env bash
# Installs what the Kubernetes tests run, idempotently:
#   kube-apiserver, kubectl   built from Go modules (tools/kubernetes) -> $MM2SPEC_CACHE/kubernetes-<v>/bin/
#   etcd                      Debian's etcd-server package (apt-get, as root), when not on PATH
# The version comes from tools/kubernetes/go.mod, which must agree with KUBERNETES_VERSION in
# scripts/versions.env. kubectl is built at the API server's version rather than taken from
# Debian: Debian's kubernetes-client is 1.20, far outside kubectl's one-minor-version skew.
# A cold build takes 30-40 minutes on a busy 2-core machine (~1 GB of Go modules); with a warm Go
# build cache it only relinks. Usage: scripts/install-kubernetes.sh [--force]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"
export MM2SPEC_CACHE="${MM2SPEC_CACHE:-$HOME/.cache/mm2spec}"

step() { printf '==> %s\n' "$*" >&2; }
die() { printf 'install-kubernetes.sh: %s\n' "$*" >&2; exit 1; }

bin="$MM2SPEC_CACHE/kubernetes-$KUBERNETES_VERSION/bin"
want="v$KUBERNETES_VERSION"
force=0
[ "${1:-}" = "--force" ] && force=1

install_etcd() {
  if command -v etcd >/dev/null 2>&1; then
    step "etcd already installed: $(command -v etcd)"
    return
  fi
  [ "$(id -u)" = 0 ] || die "etcd is missing: install Debian's etcd-server package (sudo apt-get install etcd-server) and rerun"
  step "installing etcd (Debian package etcd-server)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server >/dev/null; }
  # The package starts a system etcd on the default ports; the tests start their own on free ports.
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now etcd >/dev/null 2>&1 || true; fi
  command -v etcd >/dev/null 2>&1 || die "apt-get installed etcd-server but etcd is not on PATH"
}

installed_ok() {
  [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kubectl" ] &&
    "$bin/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $want"
}

install_etcd
if [ "$force" = 0 ] && installed_ok; then
  step "kube-apiserver and kubectl $want already installed in $bin"
  exit 0
fi
command -v go >/dev/null 2>&1 ||
  die "Go is not installed (or not on PATH); kube-apiserver is built from Go modules. Install Go 1.26 or newer and rerun scripts/setup."

cd "$root/tools/kubernetes"
pinned="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
[ "$pinned" = "$want" ] ||
  die "tools/kubernetes/go.mod builds k8s.io/kubernetes ${pinned:-?}, but scripts/versions.env says KUBERNETES_VERSION=$KUBERNETES_VERSION; make them agree (the require, the replace block's v0 versions, then go mod tidy)."

# Two cores: one package compiled at a time keeps memory and load reasonable; override with GO_BUILD_P.
jobs="${GO_BUILD_P:-$(( $(nproc 2>/dev/null || echo 2) > 2 ? 2 : 1 ))}"
export GOFLAGS="${GOFLAGS:-$(go env GOFLAGS)} -buildvcs=false"
# Kubernetes reads its version from these variables (hack/lib/version.sh sets them in its own build).
ldflags="-X k8s.io/component-base/version.gitVersion=$want -X k8s.io/client-go/pkg/version.gitVersion=$want"
mkdir -p "$MM2SPEC_CACHE"
tmp="$(mktemp -d "$MM2SPEC_CACHE/kubernetes-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
for cmd in kube-apiserver kubectl; do
  step "building $cmd $want (SLOW the first time: 30+ minutes on a busy 2-core machine; a warm Go build cache only relinks)"
  go build -p "$jobs" -trimpath -ldflags "$ldflags" -o "$tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd"
done
step "built in $((SECONDS - start))s"
rm -rf "$bin"
mkdir -p "$(dirname "$bin")"
mv "$tmp" "$bin"
trap - EXIT
chmod 0755 "$bin" "$bin"/*
installed_ok || die "the freshly built $bin/kube-apiserver does not report version $want"
step "kube-apiserver and kubectl $want installed in $bin"
