#!/usr/bin/env bash
# Installs the Prometheus JMX exporter java agent (Maven Central
# io.prometheus.jmx:jmx_prometheus_javaagent, one self-contained jar) as
# $MM2SPEC_CACHE/jmx-exporter/jmx_prometheus_javaagent.jar, resolved with Maven.
# Engine connect's workers load it (-javaagent:<jar>=<port>:jmx-exporter.yml, the rules
# `mm2spec render` writes): `mm2spec dev`'s worker and tests/integration/test_monitoring_scrape.py
# find it through mm2spec/components.py (jmx_exporter_agent).
# Idempotent: a marker holds the version installed; a second run does no work.
# Usage: scripts/install-jmx-exporter.sh
set -euo pipefail
# shellcheck source=install-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/install-common.sh"

# 1.0.1 is the newest 1.x Maven Central serves here (1.1.0 to 1.5.0 are not found). A
# JMX_EXPORTER_VERSION line in versions.env wins over this pin.
version="${JMX_EXPORTER_VERSION:-1.0.1}"
artifact="io.prometheus.jmx:jmx_prometheus_javaagent:$version"
home="$MM2SPEC_CACHE/jmx-exporter"
jar="$home/jmx_prometheus_javaagent.jar"
marker="$home/.installed"

if [ -f "$marker" ] && [ "$(cat "$marker")" = "$artifact" ] && [ -s "$jar" ]; then
  step "JMX exporter agent $version already installed: $jar"
  exit 0
fi
command -v mvn >/dev/null 2>&1 || die "Maven (mvn) not found: install it (e.g. apt-get install maven)"

step "resolving $artifact with Maven into $home"
mkdir -p "$home"
staging="$(mktemp -d "$home/staging.XXXXXX")"
log="$home/maven.log"
trap 'rm -rf "$staging"' EXIT
if ! mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy -Dartifact="$artifact" \
      -DoutputDirectory="$staging" -Dmdep.stripVersion=true >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  die "Maven could not resolve $artifact (full log: $log)"
fi
[ -s "$staging/jmx_prometheus_javaagent.jar" ] || die "Maven finished but no jmx_prometheus_javaagent jar arrived (log: $log)"
# The agent's own manifest names its entry point: a truncated download fails here, not at a worker's start.
# Read whole before grep: with pipefail, `grep -q` closing the pipe at its first match could fail the
# writer (SIGPIPE) and so the check, at random.
manifest="$(python3 -c 'import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read("META-INF/MANIFEST.MF").decode())' \
    "$staging/jmx_prometheus_javaagent.jar" 2>/dev/null || true)"
grep -q '^Premain-Class:' <<<"$manifest" ||
  die "$artifact has no Premain-Class in its manifest: not a java agent (log: $log)"
mv -f "$staging/jmx_prometheus_javaagent.jar" "$jar"
printf '%s\n' "$artifact" >"$marker"
step "JMX exporter agent $version installed: $jar"
