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
# shellcheck source=install-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/install-common.sh"

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
# The replace block's v0.x.y versions of the staging modules move with the require (tools/kubernetes/README.md).
enter_go_module "$root/tools/kubernetes" k8s.io/kubernetes "$want" KUBERNETES_VERSION

go_build_settings
# Kubernetes reads its version from these variables (hack/lib/version.sh sets them in its own build).
ldflags="-X k8s.io/component-base/version.gitVersion=$want -X k8s.io/client-go/pkg/version.gitVersion=$want"
tmp="$(mktemp -d "$MM2SPEC_CACHE/kubernetes-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
for cmd in kube-apiserver kubectl; do
  step "building $cmd $want (SLOW the first time: 30+ minutes on a busy 2-core machine; a warm Go build cache only relinks)"
  go build -p "$go_jobs" -trimpath -ldflags "$ldflags" -o "$tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd"
done
step "built in $((SECONDS - start))s"
rm -rf "$bin"
mkdir -p "$(dirname "$bin")"
mv "$tmp" "$bin"
trap - EXIT
chmod 0755 "$bin" "$bin"/*
installed_ok || die "the freshly built $bin/kube-apiserver does not report version $want"
step "kube-apiserver and kubectl $want installed in $bin"
