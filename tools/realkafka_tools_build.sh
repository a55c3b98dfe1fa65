#!/usr/bin/env bash
# Build Apache Kafka 4.1.2's `tools` module (TopicCommand, ConsumerGroupCommand, GetOffsetShell,
# DeleteRecordsCommand, TransactionsCommand, LogDirsCommand, LeaderElectionCommand, the perf tests,
# ConsoleProducer/ConsoleConsumer, ...) with plain javac against the jars of a realkafka build
# (../shared/realkafka/build.sh), so kompakt's `kafka-*` commands can be compared with the
# output of Kafka's own tools. No Gradle, no Maven Central: every input is a git dir.
#
# Usage: tools/realkafka_tools_build.sh [OUT_DIR]        (default /work/rk/tools)
#
# Environment:
#   KAFKA_BUILD     the realkafka build (default /work/rk/build): its lib/ and classpath are used
#   KAFKA_GIT       git dir of confluentinc/kafka (default /work/.mirror/confluentinc+kafka/repo)
#   KAFKA_REF       default c82fd9b934b4c1e6fa799e3f1dcc8f08d997740c (4.1.2, the build's commit)
#   JACKSON_TEXT_GIT  git dir of FasterXML/jackson-dataformats-text: its csv module (tag 2.18.2,
#                   the jackson version of the build) is compiled from source because the
#                   machine has no jackson-dataformat-csv jar; ConsumerGroupCommand's
#                   --reset-offsets --export/--from-file paths need it.
#
# Output: OUT_DIR/lib/kafka-tools-4.1.2.jar, OUT_DIR/lib/jackson-dataformat-csv-2.18.2.jar,
#         OUT_DIR/classpath, OUT_DIR/bin/kafka-run-class (CLASS ARGS...), OUT_DIR/bin/kafka-*.sh
#         (one launcher per tool, named as in Kafka's bin/), OUT_DIR/DONE when everything worked.
# Left out: ConnectPluginPath and ManifestWorkspace (they need connect-runtime, which the
# realkafka build does not have; only bin/connect-plugin-path.sh uses them).
set -euo pipefail

OUT=${1:-/work/rk/tools}
KAFKA_BUILD=${KAFKA_BUILD:-/work/rk/build}
KAFKA_GIT=${KAFKA_GIT:-/work/.mirror/confluentinc+kafka/repo}
KAFKA_REF=${KAFKA_REF:-c82fd9b934b4c1e6fa799e3f1dcc8f08d997740c}
JACKSON_TEXT_GIT=${JACKSON_TEXT_GIT:-/work/.mirror/FasterXML+jackson-dataformats-text/repo}
JACKSON_REF=${JACKSON_REF:-jackson-dataformats-text-2.18.2}
JAVAC_MEM=${JAVAC_MEM:-2g}

die() { echo "ERROR: $*" >&2; exit 1; }
T0=$(date +%s)
step() { echo "[$(( $(date +%s) - T0 ))s] $*"; }

[ -f "$KAFKA_BUILD/classpath" ] || die "no realkafka build at $KAFKA_BUILD (run ../shared/realkafka/build.sh)"
[ -d "$KAFKA_GIT" ] || die "KAFKA_GIT=$KAFKA_GIT is not a git dir"
[ -d "$JACKSON_TEXT_GIT" ] || die "JACKSON_TEXT_GIT=$JACKSON_TEXT_GIT is not a git dir (fetch FasterXML/jackson-dataformats-text)"
command -v javac >/dev/null || die "javac (JDK 17+) required"

rm -f "$OUT/DONE"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SRC=$OUT/src; CLS=$OUT/classes; LIB=$OUT/lib; BIN=$OUT/bin; LOG=$OUT/logs
rm -rf "$SRC" "$CLS"
mkdir -p "$SRC" "$CLS" "$LIB" "$BIN" "$LOG"
BUILD_CP=$(cat "$KAFKA_BUILD/classpath")

jcompile() { # UNIT OUTJAR CLASSPATH FILELIST
  local unit=$1 jar=$2 cp=$3 list=$4
  local d=$CLS/$unit; rm -rf "$d"; mkdir -p "$d"
  step "javac $unit ($(wc -l <"$list") files)"
  javac -J-Xmx"$JAVAC_MEM" -nowarn -encoding UTF-8 --release 17 -parameters -proc:none \
    -d "$d" -cp "$cp" @"$list" >"$LOG/javac-$unit.log" 2>&1 \
    || { tail -40 "$LOG/javac-$unit.log"; die "javac $unit failed (see $LOG/javac-$unit.log)"; }
  jar cf "$jar" -C "$d" .
}

# ---------------------------------------------------------------- jackson-dataformat-csv (source)
CSV_JAR=$LIB/jackson-dataformat-csv-2.18.2.jar
if [ ! -f "$CSV_JAR" ]; then
  mkdir -p "$SRC/jackson-text"
  git --git-dir="$JACKSON_TEXT_GIT" archive "$JACKSON_REF" csv/src/main | tar -x -C "$SRC/jackson-text"
  csv=$SRC/jackson-text/csv/src/main
  pv=$csv/java/com/fasterxml/jackson/dataformat/csv/PackageVersion
  # the Maven replacer plugin's job: fill in the version template
  sed -e 's/@package@/com.fasterxml.jackson.dataformat.csv/' -e 's/@projectversion@/2.18.2/' \
      -e 's/@projectgroupid@/com.fasterxml.jackson.dataformat/' \
      -e 's/@projectartifactid@/jackson-dataformat-csv/' "$pv.java.in" >"$pv.java"
  find "$csv/java" -name '*.java' ! -name module-info.java >"$OUT/csv.list"
  jcompile jackson-csv "$CSV_JAR" "$BUILD_CP" "$OUT/csv.list"
  (cd "$csv/resources" && jar uf "$CSV_JAR" .)
fi

# ---------------------------------------------------------------- Kafka tools module (source)
TOOLS_JAR=$LIB/kafka-tools-4.1.2.jar
mkdir -p "$SRC/kafka"
git --git-dir="$KAFKA_GIT" archive "$KAFKA_REF" tools/src/main | tar -x -C "$SRC/kafka"
find "$SRC/kafka/tools/src/main/java" -name '*.java' \
  ! -name ConnectPluginPath.java ! -name ManifestWorkspace.java >"$OUT/tools.list"
jcompile kafka-tools "$TOOLS_JAR" "$CSV_JAR:$BUILD_CP" "$OUT/tools.list"
if [ -d "$SRC/kafka/tools/src/main/resources" ]; then
  (cd "$SRC/kafka/tools/src/main/resources" && jar uf "$TOOLS_JAR" .)
fi

# ---------------------------------------------------------------- launchers
echo "$TOOLS_JAR:$CSV_JAR:$BUILD_CP" >"$OUT/classpath"
cat >"$BIN/kafka-run-class" <<EOF
#!/usr/bin/env bash
# kafka-run-class.sh for the realkafka build + tools: CLASS ARGS...
# Kafka's bin/ scripts run tools with -Xmx256M and config/tools-log4j2.yaml (warnings to stderr).
exec java \${KAFKA_HEAP_OPTS:--Xmx256M} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \\
  -Dlog4j2.configurationFile=$KAFKA_BUILD/config/tools-log4j2.yaml \\
  -cp "$(cat "$OUT/classpath")" "\$@"
EOF
chmod +x "$BIN/kafka-run-class"
while read -r name cls; do
  printf '#!/usr/bin/env bash\nexec "%s/kafka-run-class" %s "$@"\n' "$BIN" "$cls" >"$BIN/$name.sh"
  chmod +x "$BIN/$name.sh"
done <<'EOF'
kafka-acls org.apache.kafka.tools.AclCommand
kafka-broker-api-versions org.apache.kafka.tools.BrokerApiVersionsCommand
kafka-client-metrics org.apache.kafka.tools.ClientMetricsCommand
kafka-cluster org.apache.kafka.tools.ClusterTool
kafka-configs kafka.admin.ConfigCommand
kafka-console-consumer org.apache.kafka.tools.consumer.ConsoleConsumer
kafka-console-producer org.apache.kafka.tools.ConsoleProducer
kafka-consumer-groups org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
kafka-consumer-perf-test org.apache.kafka.tools.ConsumerPerformance
kafka-delete-records org.apache.kafka.tools.DeleteRecordsCommand
kafka-dump-log kafka.tools.DumpLogSegments
kafka-e2e-latency org.apache.kafka.tools.EndToEndLatency
kafka-features org.apache.kafka.tools.FeatureCommand
kafka-get-offsets org.apache.kafka.tools.GetOffsetShell
kafka-groups org.apache.kafka.tools.GroupsCommand
kafka-leader-election org.apache.kafka.tools.LeaderElectionCommand
kafka-log-dirs org.apache.kafka.tools.LogDirsCommand
kafka-metadata-quorum org.apache.kafka.tools.MetadataQuorumCommand
kafka-producer-perf-test org.apache.kafka.tools.ProducerPerformance
kafka-reassign-partitions org.apache.kafka.tools.reassign.ReassignPartitionsCommand
kafka-storage kafka.tools.StorageTool
kafka-topics org.apache.kafka.tools.TopicCommand
kafka-transactions org.apache.kafka.tools.TransactionsCommand
kafka-verifiable-consumer org.apache.kafka.tools.VerifiableConsumer
kafka-verifiable-producer org.apache.kafka.tools.VerifiableProducer
EOF

# ---------------------------------------------------------------- smoke test
step "smoke test"
"$BIN/kafka-topics.sh" --version >"$LOG/smoke.log" 2>&1 || { cat "$LOG/smoke.log"; die "kafka-topics --version failed"; }
grep -q '4\.1\.2' "$LOG/smoke.log" || { cat "$LOG/smoke.log"; die "unexpected version"; }
"$BIN/kafka-consumer-groups.sh" --help >>"$LOG/smoke.log" 2>&1 || true
grep -q -- '--reset-offsets' "$LOG/smoke.log" || { cat "$LOG/smoke.log"; die "kafka-consumer-groups --help failed"; }
rm -rf "$CLS"
touch "$OUT/DONE"
step "done: $OUT (bin/kafka-*.sh, classpath)"
