#!/usr/bin/env bash
# Installs what the monitoring tests run, idempotently:
#   promtool   from Debian's prometheus package (apt-get, as root), when not on PATH
# tests/integration/test_monitoring_promtool.py checks the rendered scrape config and alert rules
# with it and proves the alerts fire (promtool test rules); with CI set, a missing promtool fails it.
# The package's Prometheus server is never started: the tests need only promtool, and a server
# left running would hold port 9090 and two shared cores.
# Usage: scripts/install-prometheus.sh
set -euo pipefail
# shellcheck source=install-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/install-common.sh"

if command -v promtool >/dev/null 2>&1; then
  step "promtool already installed: $(command -v promtool)"
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
step "promtool installed: $(promtool --version 2>&1 | head -n 1)"
