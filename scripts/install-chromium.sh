#!/usr/bin/env bash
# Installs what the drill report's browser test runs, idempotently:
#   chromium   Debian's chromium package (apt-get, as root), when not on PATH
# tests/integration/test_drill.py opens report.html in it headless and checks that every plot
# renders; with CI set, a missing browser fails that test.
# Usage: scripts/install-chromium.sh
set -euo pipefail
# shellcheck source=install-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/install-common.sh"

if command -v chromium >/dev/null 2>&1; then
  step "chromium already installed: $(command -v chromium)"
  exit 0
fi
[ "$(id -u)" = 0 ] || die "chromium is missing: install Debian's chromium package (sudo apt-get install chromium) and rerun"
step "installing chromium (Debian package chromium)"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null ||
  { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }
command -v chromium >/dev/null 2>&1 || die "apt-get installed chromium but it is not on PATH"
