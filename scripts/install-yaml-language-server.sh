#!/usr/bin/env bash
# Installs the YAML language server (npm) that the editor tests drive over LSP, idempotently, into
# $MM2SPEC_CACHE/yaml-language-server-<v>/ at YAML_LANGUAGE_SERVER_VERSION (scripts/versions.env).
# Needs Node.js and npm. Usage: scripts/install-yaml-language-server.sh
set -euo pipefail
# shellcheck source=install-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/install-common.sh"

v="$YAML_LANGUAGE_SERVER_VERSION"
dest="$MM2SPEC_CACHE/yaml-language-server-$v"
server="$dest/node_modules/.bin/yaml-language-server"
installed="$dest/node_modules/yaml-language-server/package.json"
if [ -x "$server" ] && grep -q "\"version\": \"$v\"" "$installed" 2>/dev/null; then
  step "yaml-language-server $v already installed in $dest"
  exit 0
fi
command -v npm >/dev/null 2>&1 || die "npm is not installed: install Node.js 18+ with npm and rerun scripts/setup"
tmp="$(mktemp -d "$MM2SPEC_CACHE/yaml-language-server-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
step "installing yaml-language-server $v (npm)"
npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error "yaml-language-server@$v" >/dev/null
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
[ -x "$server" ] || die "npm installed yaml-language-server but $server is missing"
step "yaml-language-server $v installed in $dest"
