#!/usr/bin/env bash
# jobserver.sh fetches, starts and stops Beam's Flink job server for the e2e tests in this
# directory. With --flink-master [local] the job server runs a local Flink cluster in its
# own JVM.
#
#   testing/flink/jobserver.sh fetch   # resolve the job server into Maven's local
#                                      # repository (~/.m2); the first time takes ~2 min
#   testing/flink/jobserver.sh start   # start it on free loopback ports, wait until its job
#                                      # endpoint answers, and print
#                                      # BEAMKINESIS_FLINK_ENDPOINT=127.0.0.1:<port> and
#                                      # BEAMKINESIS_FLINK_BEAM_VERSION=<Beam version>
#   testing/flink/jobserver.sh stop    # stop it (its whole process group)
#   testing/flink/jobserver.sh classpath  # fetch, then print the job server's Java classpath
#                                      # (Beam Java's SDK, runners and model), for tests
#                                      # that run Beam Java's own coders
#
# Environment:
#   BEAMKINESIS_FLINK_VERSION        the pair of versions.sh: 1.19 (default, Beam 2.62.0's
#                                    runner) or 1.16 (Beam 2.56.0's)
#   BEAMKINESIS_FLINK_JOBSERVER_JAR  run this shaded job server jar (java -jar) instead of
#                                    the runner resolved from Maven
#   BEAMKINESIS_FLINK_MASTER         --flink-master (default [local]: an in-JVM cluster;
#                                    host:port submits to a running Flink cluster's REST port)
#   BEAMKINESIS_FLINK_STATE          where the pid, endpoint, log and staged artifacts live
#                                    (default ${TMPDIR:-/tmp}/beamkinesis-flink)
#   BEAMKINESIS_FLINK_CACHE          where the resolved classpath is kept
#                                    (default ${XDG_CACHE_HOME:-~/.cache}/beamkinesis-flink)
#   BEAMKINESIS_FLINK_START_TIMEOUT  seconds to wait for the job endpoint (default 180)
#   BEAMKINESIS_FLINK_JAVA_OPTS      JVM heap and other options (default -Xmx1g)
set -euo pipefail

# Beam publishes the job server as a shaded jar, org.apache.beam:beam-runners-flink-<minor>-job-server,
# whose main class is FlinkJobServerDriver of the runner org.apache.beam:beam-runners-flink-<minor>.
# The Maven registry this project's machines reach serves none of the shaded jars tried
# (Beam 2.25.0 to 2.77.0, Flink 1.10 to 2.0), but it serves the runner and its dependencies
# for the pairs of versions.sh: Beam 2.62.0 for Flink 1.19 (the default) and Beam 2.56.0
# for Flink 1.16 (BEAMKINESIS_FLINK_VERSION=1.16). So by default this script resolves the
# runner's classpath with Maven and runs the driver from it, which is what the shaded jar
# packs. BEAMKINESIS_FLINK_JOBSERVER_JAR runs a shaded jar instead.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.sh
. "$here/versions.sh"

main_class=org.apache.beam.runners.flink.FlinkJobServerDriver
state=${BEAMKINESIS_FLINK_STATE:-${TMPDIR:-/tmp}/beamkinesis-flink}
cache=${BEAMKINESIS_FLINK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/beamkinesis-flink}/beam-$BEAM_VERSION-flink-$FLINK_MINOR

die() { echo "jobserver.sh: $*" >&2; exit 1; }

# classpath_present reports whether every jar of the classpath file $1 exists (Maven's
# local repository may have been cleaned since it was written).
classpath_present() {
  local jar
  while IFS= read -r -d : jar || [ -n "$jar" ]; do
    [ -f "$jar" ] || return 1
  done <"$1"
}

# fetch resolves the Flink runner and its dependencies into Maven's local repository
# (~/.m2) and writes their classpath to $cache/classpath, unless that was done already.
fetch() {
  if [ -n "${BEAMKINESIS_FLINK_JOBSERVER_JAR:-}" ]; then
    [ -f "$BEAMKINESIS_FLINK_JOBSERVER_JAR" ] || die "BEAMKINESIS_FLINK_JOBSERVER_JAR=$BEAMKINESIS_FLINK_JOBSERVER_JAR does not exist"
    echo "jobserver.sh: using $BEAMKINESIS_FLINK_JOBSERVER_JAR"
    return 0
  fi
  if [ -s "$cache/classpath" ] && classpath_present "$cache/classpath"; then
    echo "jobserver.sh: using the classpath of Beam $BEAM_VERSION's Flink $FLINK_MINOR runner in $cache"
    return 0
  fi
  command -v mvn >/dev/null || die "mvn is not installed; it fetches Beam's Flink runner"
  mkdir -p "$cache"
  # A POM whose dependencies are the job server's runtime: the runner (with the job
  # service, the expansion service and Flink) and a logging back end.
  cat >"$cache/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>beamkinesis.testing</groupId>
  <artifactId>flink-job-server</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.beam</groupId>
      <artifactId>beam-runners-flink-$FLINK_MINOR</artifactId>
      <version>$BEAM_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-simple</artifactId>
      <version>1.7.30</version>
    </dependency>
  </dependencies>
</project>
POM
  local started=$SECONDS log
  log=$(mktemp)
  echo "jobserver.sh: resolving org.apache.beam:beam-runners-flink-$FLINK_MINOR:$BEAM_VERSION and its dependencies into ~/.m2"
  if ! mvn -B -f "$cache/pom.xml" dependency:build-classpath -Dmdep.outputFile="$cache/classpath.new" >"$log" 2>&1 \
      || [ ! -s "$cache/classpath.new" ]; then
    grep -E 'ERROR' "$log" | head -5 >&2 || true
    rm -f "$log" "$cache/classpath.new"
    die "could not resolve Beam $BEAM_VERSION's Flink $FLINK_MINOR runner from Maven Central"
  fi
  rm -f "$log"
  mv "$cache/classpath.new" "$cache/classpath"
  echo "jobserver.sh: resolved $(tr ':' '\n' <"$cache/classpath" | wc -l) jars in $((SECONDS - started))s"
}

# java_opens opens the JDK packages Flink reflects on (as Flink's own launch scripts do).
java_opens=$(printf -- '--add-opens=java.base/%s=ALL-UNNAMED ' java.lang java.lang.invoke java.lang.reflect \
  java.io java.net java.nio sun.nio.ch java.text java.time java.util java.util.concurrent \
  java.util.concurrent.atomic java.util.concurrent.locks)

# free_port prints a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# answers reports whether something accepts TCP connections on 127.0.0.1:$1.
answers() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
  mkdir -p "$state"
  if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
    die "a job server is already running (pid $(cat "$state/pid"), endpoint $(cat "$state/endpoint")); run stop first"
  fi
  fetch >&2
  local job_port artifact_port expansion_port pid started=$SECONDS
  local -a launch
  if [ -n "${BEAMKINESIS_FLINK_JOBSERVER_JAR:-}" ]; then
    launch=(-jar "$BEAMKINESIS_FLINK_JOBSERVER_JAR")
  else
    launch=(-cp "$(cat "$cache/classpath")" "$main_class")
  fi
  job_port=$(free_port); artifact_port=$(free_port); expansion_port=$(free_port)
  # setsid gives the JVM its own process group, which stop kills whole. The --add-opens
  # let Flink's serializers reach into the JDK's classes on Java 17.
  # shellcheck disable=SC2086 # BEAMKINESIS_FLINK_JAVA_OPTS is a list of options
  setsid java ${BEAMKINESIS_FLINK_JAVA_OPTS:--Xmx1g} $java_opens "${launch[@]}" \
    --job-host 127.0.0.1 --job-port "$job_port" \
    --artifact-port "$artifact_port" --expansion-port "$expansion_port" \
    --artifacts-dir "$state/artifacts" \
    --flink-master "${BEAMKINESIS_FLINK_MASTER:-[local]}" \
    >"$state/jobserver.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$state/pid"
  echo "127.0.0.1:$job_port" >"$state/endpoint"
  local deadline=$((SECONDS + ${BEAMKINESIS_FLINK_START_TIMEOUT:-180}))
  until answers "$job_port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -40 "$state/jobserver.log" >&2
      rm -f "$state/pid"
      die "the job server exited before its job endpoint answered; log: $state/jobserver.log"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -40 "$state/jobserver.log" >&2
      stop >&2
      die "the job endpoint 127.0.0.1:$job_port did not answer within ${BEAMKINESIS_FLINK_START_TIMEOUT:-180}s; log: $state/jobserver.log"
    fi
    sleep 0.2 # poll interval of the deadline loop above
  done
  echo "jobserver.sh: job server pid $pid answers on 127.0.0.1:$job_port after $((SECONDS - started))s; log: $state/jobserver.log" >&2
  echo "BEAMKINESIS_FLINK_ENDPOINT=127.0.0.1:$job_port"
  if [ -z "${BEAMKINESIS_FLINK_JOBSERVER_JAR:-}" ]; then
    echo "BEAMKINESIS_FLINK_BEAM_VERSION=$BEAM_VERSION"
  fi
}

stop() {
  [ -f "$state/pid" ] || { echo "jobserver.sh: no job server to stop"; return 0; }
  local pid
  pid=$(cat "$state/pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
      sleep 0.2 # poll interval of the deadline loop above
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$state/pid" "$state/endpoint" "$state/artifacts"
  echo "jobserver.sh: stopped job server pid $pid"
}

case "${1:-}" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  classpath)
    fetch >&2
    if [ -n "${BEAMKINESIS_FLINK_JOBSERVER_JAR:-}" ]; then echo "$BEAMKINESIS_FLINK_JOBSERVER_JAR"; else cat "$cache/classpath"; fi ;;
  *) die "usage: $0 fetch|start|stop|classpath" ;;
esac
