#!/usr/bin/env bash
# Installs the Apache Kafka jars mm2spec runs (broker incl. StorageTool, Connect, MirrorMaker 2,
# perf-test tools, Log4j 2 behind SLF4J) into $MM2SPEC_CACHE/kafka-<version>/libs/, resolved by
# Maven from tools/maven/kafka/pom.xml at the versions pinned in scripts/versions.env.
# Idempotent: a marker file records what was installed; a second run does no work.
# Maven's own cache (~/.m2) makes a reinstall after a version bump cheap too.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache="${MM2SPEC_CACHE:-$HOME/.cache/mm2spec}"
home="$cache/kafka-$KAFKA_VERSION"
libs="$home/libs"
pom="$root/tools/maven/kafka/pom.xml"
marker="$home/.installed"

die() { printf 'install-kafka: %s\n' "$*" >&2; exit 1; }

# The marker holds everything that decides the jar set, so editing the pom or a version reinstalls.
want="kafka=$KAFKA_VERSION slf4j=$SLF4J_VERSION log4j=$LOG4J_VERSION pom=$(cksum <"$pom" | cut -d' ' -f1)"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$want" ] && compgen -G "$libs/kafka_2.13-*.jar" >/dev/null; then
  printf '==> Kafka %s jars already installed in %s\n' "$KAFKA_VERSION" "$libs" >&2
  exit 0
fi

if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then :
elif ! command -v java >/dev/null 2>&1; then
  die "no Java runtime found: install Java 17 or newer (e.g. apt-get install openjdk-17-jdk-headless) or set JAVA_HOME"
fi
command -v mvn >/dev/null 2>&1 || die "Maven (mvn) not found: install it (e.g. apt-get install maven)"

printf '==> resolving Kafka %s jars with Maven into %s\n' "$KAFKA_VERSION" "$libs" >&2
mkdir -p "$home"
# Resolve into a temporary folder and swap it in, so an interrupted run never leaves half a libs/.
staging="$(mktemp -d "$home/libs.XXXXXX")"
log="$home/maven.log"
trap 'rm -rf "$staging"' EXIT
if ! mvn -B -q -f "$pom" dependency:copy-dependencies \
      -Dkafka.version="$KAFKA_VERSION" -Dslf4j.version="$SLF4J_VERSION" -Dlog4j.version="$LOG4J_VERSION" \
      -DincludeScope=runtime -DoutputDirectory="$staging" >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  die "Maven could not resolve the Kafka $KAFKA_VERSION jars (full log: $log)"
fi
compgen -G "$staging/kafka_2.13-*.jar" >/dev/null || die "Maven finished but no kafka_2.13 jar arrived (log: $log)"
rm -rf "$libs"
mv "$staging" "$libs"
chmod 755 "$libs"
printf '%s\n' "$want" >"$marker"
