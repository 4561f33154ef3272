#!/usr/bin/env bash
# Installs what the monitoring tests run, idempotently:
#   promtool and the prometheus server, both from Debian's prometheus package (apt-get, as root),
#   when either is not on PATH
# tests/integration/test_monitoring_promtool.py checks the rendered scrape config and alert rules
# with promtool and proves the alerts fire (promtool test rules);
# tests/integration/test_monitoring_scrape.py starts the server itself (a temporary folder, a free
# port) and stops it. With CI set, a missing one fails them. The package's own service is never
# started: a server left running would hold port 9090 and two shared cores.
# Usage: scripts/install-prometheus.sh
set -euo pipefail
# shellcheck source=install-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/install-common.sh"

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
  step "promtool and prometheus already installed: $(command -v promtool), $(command -v prometheus)"
  exit 0
fi
[ "$(id -u)" = 0 ] || die "promtool is missing: install Debian's prometheus package (sudo apt-get install --no-install-recommends prometheus) and rerun"
step "installing promtool (Debian package prometheus)"

# Debian starts a package's service on install unless policy-rc.d says no (exit 101); say no for
# this install only, when the machine has no policy of its own (Docker images usually have one).
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# written by mm2spec scripts/install-prometheus.sh for one apt-get run\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
install_prometheus() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null; }
install_prometheus || { apt-get update -q >/dev/null && install_prometheus; }
# A systemd machine may still have enabled the unit for the next boot: keep it off.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
command -v promtool >/dev/null 2>&1 || die "apt-get installed prometheus but promtool is not on PATH"
command -v prometheus >/dev/null 2>&1 || die "apt-get installed prometheus but the prometheus server is not on PATH"
step "promtool and prometheus installed: $(promtool --version 2>&1 | head -n 1)"
