#!/usr/bin/env bash
# Installs Spark's Kafka connector (org.apache.spark:spark-sql-kafka-0-10_2.13 at SPARK_VERSION) and
# its runtime dependencies into $MM2SPEC_CACHE/spark-kafka-<v>/jars/, resolved with Maven through
# tools/maven/spark-kafka/pom.xml. The mirroring job passes these jars with spark.jars, so nothing
# is downloaded when a job starts. Idempotent: a stamp file marks a complete install.
# Spark itself comes from the pip pyspark package; its version must equal SPARK_VERSION.
# Also compiles the job's writer (spark/java) against pyspark's own jars into mm2spec-spark-writer.jar
# there, with the Spark version it was built for inside (the job refuses a jar built for another),
# and fetches the JUnit Platform console launcher (JUNIT_CONSOLE_VERSION, one jar) that
# spark/java-tests/run.sh runs the writer's tests with, into $MM2SPEC_CACHE/junit-<v>/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"
export MM2SPEC_CACHE="${MM2SPEC_CACHE:-$HOME/.cache/mm2spec}"

dest="$MM2SPEC_CACHE/spark-kafka-$SPARK_VERSION"
stamp="$dest/.installed"
pom="$root/tools/maven/spark-kafka/pom.xml"

python="${PYTHON:-$root/.venv/bin/python}"
if [ -x "$python" ]; then
  pip_version="$("$python" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null || true)"
  if [ -n "$pip_version" ] && [ "$pip_version" != "$SPARK_VERSION" ]; then
    echo "install-spark: pip pyspark is $pip_version but scripts/versions.env pins SPARK_VERSION=$SPARK_VERSION;" >&2
    echo "install-spark: the connector jars must match Spark exactly: align pyproject.toml and versions.env" >&2
    exit 1
  fi
fi

# The tests' launcher first: the installs below may end early when the connector is current.
junit_dir="$MM2SPEC_CACHE/junit-$JUNIT_CONSOLE_VERSION"
junit_jar="junit-platform-console-standalone-$JUNIT_CONSOLE_VERSION.jar"
if [ ! -f "$junit_dir/$junit_jar" ]; then
  command -v mvn >/dev/null || { echo "install-spark: Maven (mvn) is required" >&2; exit 1; }
  echo "install-spark: fetching $junit_jar with Maven" >&2
  mkdir -p "$junit_dir"
  mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
    -Dartifact="org.junit.platform:junit-platform-console-standalone:$JUNIT_CONSOLE_VERSION:jar" \
    -DoutputDirectory="$junit_dir/tmp" >"$junit_dir/maven.log" 2>&1 || { cat "$junit_dir/maven.log" >&2; exit 1; }
  mv "$junit_dir/tmp/$junit_jar" "$junit_dir/$junit_jar"  # whole, or not there
  rm -rf "$junit_dir/tmp"
fi

java_src="$root/spark/java"
writer="mm2spec-spark-writer.jar"

# Compiles spark/java against pyspark's jars and the resolved kafka-clients jar into folder $1.
build_writer() {
  command -v javac >/dev/null || { echo "install-spark: javac (a JDK 17+) is required" >&2; return 1; }
  local spark_jars
  spark_jars="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
  local classes; classes="$(mktemp -d)"
  javac -nowarn --release 17 -cp "$spark_jars/*:$(ls "$1"/kafka-clients-*.jar | head -1)" -d "$classes" \
    $(find "$java_src" -name '*.java' | sort)
  echo "spark.version=$SPARK_VERSION" > "$classes/mm2spec-spark-writer.properties"
  jar cf "$1/$writer.tmp" -C "$classes" .
  mv "$1/$writer.tmp" "$1/$writer"
  rm -f "$1/mm2spec-spark-interceptor.jar"  # the writer's predecessor
  rm -rf "$classes"
}

newest_source="$(find "$java_src" "$pom" -newer "$stamp" 2>/dev/null | head -1 || true)"
if [ -f "$stamp" ] && [ -z "$newest_source" ] && ls "$dest"/jars/spark-sql-kafka-0-10_2.13-"$SPARK_VERSION".jar "$dest/jars/$writer" >/dev/null 2>&1; then
  echo "install-spark: spark-kafka $SPARK_VERSION already installed in $dest/jars" >&2
  exit 0
fi
if [ -f "$stamp" ] && ! find "$pom" -newer "$stamp" | grep -q . && ls "$dest"/jars/spark-sql-kafka-0-10_2.13-"$SPARK_VERSION".jar >/dev/null 2>&1; then
  # Only the writer's source changed: rebuild it, keep the Maven jars.
  build_writer "$dest/jars"
  touch "$stamp"
  echo "install-spark: rebuilt $writer in $dest/jars" >&2
  exit 0
fi

command -v mvn >/dev/null || { echo "install-spark: Maven (mvn) is required" >&2; exit 1; }

tmp="$dest/jars.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
echo "install-spark: resolving spark-sql-kafka-0-10_2.13:$SPARK_VERSION with Maven" >&2
log="$dest/maven.log"
resolve() {
  mvn -B -q -f "$pom" -Dspark.version="$SPARK_VERSION" -Dtoken.provider.version="$1" -Dout="$tmp" \
    dependency:copy-dependencies >"$log" 2>&1 || { cat "$log" >&2; return 1; }
}
if ! resolve "$SPARK_VERSION" 2>/dev/null; then
  # Some Maven repositories lack spark-token-provider-kafka-0-10 at the exact patch release;
  # the connector itself stays at SPARK_VERSION.
  fallback="${SPARK_VERSION%.*}.0"
  echo "install-spark: retrying with spark-token-provider-kafka-0-10_2.13:$fallback" >&2
  rm -rf "$tmp"; mkdir -p "$tmp"
  resolve "$fallback"
fi
ls "$tmp"/spark-sql-kafka-0-10_2.13-"$SPARK_VERSION".jar >/dev/null
build_writer "$tmp"
# Swap the complete folder in at once, so an interrupted install never looks finished.
rm -rf "$dest/jars"
mv "$tmp" "$dest/jars"
touch "$stamp"
echo "install-spark: installed $(ls "$dest/jars" | wc -l) jars in $dest/jars" >&2
