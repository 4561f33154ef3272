#!/usr/bin/env bash
# Runs the JUnit tests of the Spark job's JVM code (spark/java) in seconds, no cluster: compiles
# spark/java and spark/java-tests together against the jars the job runs with (pyspark's own, the
# kafka-clients jar of Spark's Kafka connector) plus MM2's connect-mirror jars (the tests compare
# the offset-sync rule and record layout with MM2's own classes), then runs them with the JUnit
# Platform console launcher. Everything comes from scripts/setup (install-spark.sh, install-kafka.sh).
# Ends with "spark-java: N passed, N failed"; exits non-zero when a test fails or none ran.
# Extra arguments go to the launcher, e.g.: spark/java-tests/run.sh --select-class=mm2spec.spark.SyncEmitterTest
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=../../scripts/versions.env
. "$root/scripts/versions.env"
cache="${MM2SPEC_CACHE:-$HOME/.cache/mm2spec}"
python="${PYTHON:-$root/.venv/bin/python}"

need() { [ -e "$1" ] || { echo "spark-java: $1 is missing: $2" >&2; exit 1; }; }
command -v javac >/dev/null || { echo "spark-java: javac (a JDK 17+) is required" >&2; exit 1; }
spark_jars="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))' 2>/dev/null)" \
  || { echo "spark-java: pyspark is not installed in $python: run scripts/setup" >&2; exit 1; }
connector="$cache/spark-kafka-$SPARK_VERSION/jars"
kafka_libs="$cache/kafka-$KAFKA_VERSION/libs"
junit="$cache/junit-$JUNIT_CONSOLE_VERSION/junit-platform-console-standalone-$JUNIT_CONSOLE_VERSION.jar"
need "$junit" "run scripts/install-spark.sh"
need "$connector/spark-sql-kafka-0-10_2.13-$SPARK_VERSION.jar" "run scripts/install-spark.sh"
need "$kafka_libs/connect-mirror-$KAFKA_VERSION.jar" "run scripts/install-kafka.sh"

# The connector's jars but the installed writer jar: the classes under test are compiled here, from source.
classpath="$spark_jars/*"
for jar in "$connector"/*.jar; do
  [ "$(basename "$jar")" = mm2spec-spark-writer.jar ] || classpath="$classpath:$jar"
done
classpath="$classpath:$kafka_libs/connect-mirror-$KAFKA_VERSION.jar:$kafka_libs/connect-mirror-client-$KAFKA_VERSION.jar"

classes="$(mktemp -d)"
trap 'rm -rf "$classes"' EXIT
# shellcheck disable=SC2046  # one argument per source file (no spaces in these paths)
javac -nowarn --release 17 -encoding UTF-8 -cp "$classpath:$junit" -d "$classes" \
  $(find "$root/spark/java" "$here" -name '*.java' | sort)

out="$classes/launcher.out"
rc=0
# The launcher refuses a class-path scan together with explicit selectors (--select-class=...).
scan=(--scan-class-path="$classes")
for arg in "$@"; do
  case "$arg" in --select*) scan=() ;; esac
done
java -cp "$classes:$classpath:$junit" org.junit.platform.console.ConsoleLauncher execute \
  --disable-banner --details=summary --fail-if-no-tests "${scan[@]}" "$@" >"$out" 2>&1 || rc=$?
cat "$out"
count() { sed -n "s/^\[ *\([0-9][0-9]*\) tests $1 *\]\$/\1/p" "$out" | tail -1; }
passed="$(count successful)"; failed="$(count failed)"; skipped="$(count skipped)"
echo "spark-java: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
[ "$rc" = 0 ] || { echo "spark-java: the JUnit launcher exited $rc" >&2; exit "$rc"; }
