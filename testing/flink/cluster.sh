#!/usr/bin/env bash
# cluster.sh fetches, starts and stops a standalone Flink session cluster on loopback: one
# JobManager and two TaskManagers, each its own JVM, from the jars of PyPI's
# apache-flink-libraries. The release is one of the pairs of versions.sh: Flink 1.19.3 by
# default, 1.16.3 with BEAMKINESIS_FLINK_VERSION=1.16. The e2e tests of this directory run
# their pipelines on it through Beam's Flink job server (flink.sh starts both).
#
#   testing/flink/cluster.sh fetch        # download and unpack the Flink jars into the cache
#   testing/flink/cluster.sh start        # write a config into the state directory, start the
#                                         # JobManager and the TaskManagers, wait until the
#                                         # REST API lists both TaskManagers, and print
#                                         # BEAMKINESIS_FLINK_REST=http://127.0.0.1:<port>,
#                                         # BEAMKINESIS_FLINK_MASTER=localhost:<port>,
#                                         # BEAMKINESIS_FLINK_CLUSTER_STATE=<state directory> and
#                                         # BEAMKINESIS_FLINK_CLUSTER_VERSION=<Flink release>
#   testing/flink/cluster.sh stop         # stop the TaskManagers, then the JobManager
#   testing/flink/cluster.sh kill-tm N    # kill -9 TaskManager N (1 or 2)
#   testing/flink/cluster.sh start-tm N   # start TaskManager N again; wait until it registers
#   testing/flink/cluster.sh kill-all     # kill -9 every TaskManager and the JobManager: the
#                                         # cluster dies with its jobs (no HA)
#   testing/flink/cluster.sh start-all    # start the JobManager and the TaskManagers again on
#                                         # the config (and ports) of the last start
#   testing/flink/cluster.sh status       # the REST API's cluster overview and TaskManagers
#
# Every verb but fetch and start acts on the Flink release the state directory's cluster
# was started with, whatever BEAMKINESIS_FLINK_VERSION says now.
#
# Environment:
#   BEAMKINESIS_FLINK_VERSION        the pair of versions.sh: 1.19 (default) or 1.16
#   BEAMKINESIS_CACHE                the cache root (default ${XDG_CACHE_HOME:-~/.cache}/beamkinesis);
#                                    the jars go to <root>/flink-<release>
#   BEAMKINESIS_FLINK_SDIST          an already downloaded apache-flink-libraries-<release>.tar.gz
#                                    to unpack instead of downloading it (checked against
#                                    the pinned sha256)
#   BEAMKINESIS_FLINK_CLUSTER_STATE  the config, logs, pids, checkpoints and savepoints
#                                    (default ${TMPDIR:-/tmp}/beamkinesis-flink-cluster)
#   BEAMKINESIS_FLINK_START_TIMEOUT  seconds to wait for the JobManager and each
#                                    TaskManager (default 120)
#
# Logs stay in <state>/log after stop, so a failed CI run can show them; every failure
# prints their paths.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# Flink's Maven artifacts hold no distribution (flink-dist is not served), but PyFlink's
# sdist on PyPI carries the distribution's lib/ jars under deps/lib and the launch scripts'
# helper under deps/bin. versions.sh pins the release and the sdist's hash.
# shellcheck source=versions.sh
. "$here/versions.sh"
TASKMANAGERS=2

state=${BEAMKINESIS_FLINK_CLUSTER_STATE:-${TMPDIR:-/tmp}/beamkinesis-flink-cluster}
if [ "${1:-}" != fetch ] && [ "${1:-}" != start ] && [ -f "$state/flink-version" ]; then
  flink_pair "$(cat "$state/flink-version")"
fi
SDIST=apache-flink-libraries-$FLINK_VERSION.tar.gz
cache=${BEAMKINESIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/beamkinesis}/flink-$FLINK_VERSION
timeout=${BEAMKINESIS_FLINK_START_TIMEOUT:-120}

log() { echo "cluster.sh: $*" >&2; }
die() { echo "cluster.sh: $*" >&2; exit 1; }

# logs_hint prints where the cluster's logs are, for failures.
logs_hint() {
  local f
  for f in "$state"/log/*.log; do
    [ -f "$f" ] && echo "cluster.sh: log: $f" >&2
  done
  return 0
}

# fail prints the tail of log $1, every log's path and the message $2, and exits.
fail() {
  [ -f "$1" ] && tail -30 "$1" >&2
  logs_hint
  die "$2"
}

fetch() {
  if [ -f "$cache/.complete" ]; then
    log "using Flink $FLINK_VERSION in $cache"
    return 0
  fi
  command -v java >/dev/null || die "java is not installed (Java 11 or 17 runs Flink $FLINK_VERSION)"
  local tmp started=$SECONDS sdist
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  if [ -n "${BEAMKINESIS_FLINK_SDIST:-}" ]; then
    sdist=$BEAMKINESIS_FLINK_SDIST
    [ -f "$sdist" ] || die "BEAMKINESIS_FLINK_SDIST=$sdist does not exist"
  else
    command -v python3 >/dev/null || die "python3 is not installed; its pip downloads Flink's jars from PyPI"
    log "downloading $SDIST (~230 MB) from PyPI"
    # --require-hashes makes pip check the archive against the pinned hash.
    echo "apache-flink-libraries==$FLINK_VERSION --hash=sha256:$FLINK_SDIST_SHA256" >"$tmp/requirements.txt"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
      --require-hashes -r "$tmp/requirements.txt" -d "$tmp" >&2 \
      || die "could not download apache-flink-libraries==$FLINK_VERSION from PyPI"
    sdist=$tmp/$SDIST
  fi
  echo "$FLINK_SDIST_SHA256  $sdist" | sha256sum -c --quiet - >&2 || die "$sdist does not have the pinned sha256 $FLINK_SDIST_SHA256"
  rm -rf "$cache"
  mkdir -p "$cache"
  tar -xzf "$sdist" -C "$cache" --strip-components=2 \
    "apache-flink-libraries-$FLINK_VERSION/deps/lib" "apache-flink-libraries-$FLINK_VERSION/deps/bin"
  [ -f "$cache/lib/flink-dist-$FLINK_VERSION.jar" ] || die "$SDIST holds no deps/lib/flink-dist-$FLINK_VERSION.jar"
  touch "$cache/.complete"
  log "unpacked Flink $FLINK_VERSION's jars into $cache in $((SECONDS - started))s"
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# rest prints the body of GET <REST API>/$1, failing when the API does not answer.
rest() {
  curl -fsS --max-time 5 "http://127.0.0.1:$(cat "$state/rest-port")/$1"
}

# registered prints the ids of the TaskManagers the JobManager lists.
registered() {
  rest taskmanagers 2>/dev/null | python3 -c 'import json, sys; print("\n".join(t["id"] for t in json.load(sys.stdin)["taskmanagers"]))'
}

# java_flags are the JVM options Flink needs on Java 17: its serializers reflect into
# the JDK's classes, and NetUtils, Akka and Kerberos use JDK-internal packages.
java_flags() {
  printf -- '--add-opens=java.base/%s=ALL-UNNAMED ' java.lang java.lang.invoke java.lang.reflect \
    java.io java.net java.nio sun.nio.ch java.text java.time java.util java.util.concurrent \
    java.util.concurrent.atomic java.util.concurrent.locks
  printf -- '--add-exports=%s=ALL-UNNAMED ' java.base/sun.net.util java.rmi/sun.rmi.registry \
    java.security.jgss/sun.security.krb5
}

classpath() {
  local IFS=:
  local jars=("$cache"/lib/*.jar)
  echo "${jars[*]}"
}

# resource_params runs Flink's BashJavaUtils command $1 on the config and prints its result
# lines (JVM memory flags, then for a TaskManager its dynamic -D configuration).
resource_params() {
  local out
  out=$(java -cp "$cache/bin/bash-java-utils.jar:$(classpath)" org.apache.flink.runtime.util.bash.BashJavaUtils \
    "$1" --configDir "$state/conf" 2>&1) || { echo "$out" >&2; die "BashJavaUtils $1 failed"; }
  grep '^BASH_JAVA_UTILS_EXEC_RESULT:' <<<"$out" | sed 's/^BASH_JAVA_UTILS_EXEC_RESULT://'
}

# write_config writes the cluster's config, under the name its release reads
# (FLINK_CONFIG_FILE; Flink 1.19 would fall back to flink-conf.yaml only without config.yaml),
# with the key names of that release: Flink 1.17 renamed state.backend and restart-strategy
# to state.backend.type and restart-strategy.type.
write_config() {
  local rest_port rpc_port backend_key restart_key
  rest_port=$(free_port); rpc_port=$(free_port)
  mkdir -p "$state/conf" "$state/log" "$state/checkpoints" "$state/savepoints"
  echo "$rest_port" >"$state/rest-port"
  echo "$FLINK_VERSION" >"$state/flink-version"
  rm -f "$state/conf/config.yaml" "$state/conf/flink-conf.yaml"
  if [ "$FLINK_MINOR" = 1.16 ]; then
    backend_key=state.backend restart_key=restart-strategy
  else
    backend_key=state.backend.type restart_key=restart-strategy.type
  fi
  cat >"$state/conf/$FLINK_CONFIG_FILE" <<CONF
jobmanager.rpc.address: localhost
jobmanager.rpc.port: $rpc_port
jobmanager.bind-host: 127.0.0.1
taskmanager.bind-host: 127.0.0.1
taskmanager.host: localhost
rest.address: localhost
rest.bind-address: 127.0.0.1
rest.port: $rest_port
blob.server.port: 0
taskmanager.rpc.port: 0
taskmanager.data.port: 0
jobmanager.memory.process.size: 1024m
taskmanager.memory.process.size: 1536m
taskmanager.memory.managed.size: 64m
taskmanager.memory.network.min: 64m
taskmanager.memory.network.max: 64m
taskmanager.numberOfTaskSlots: 4
parallelism.default: 1
$backend_key: hashmap
state.checkpoints.dir: file://$state/checkpoints
state.savepoints.dir: file://$state/savepoints
execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION
state.checkpoints.num-retained: 3
$restart_key: fixed-delay
restart-strategy.fixed-delay.attempts: 20
restart-strategy.fixed-delay.delay: 1 s
heartbeat.interval: 2000
heartbeat.timeout: 8000
io.tmp.dirs: $state/tmp
cluster.evenly-spread-out-slots: true
web.submit.enable: true
CONF
  mkdir -p "$state/tmp"
  cat >"$state/conf/log4j.properties" <<'CONF'
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = MainAppender
appender.main.name = MainAppender
appender.main.type = File
appender.main.append = true
appender.main.fileName = ${sys:log.file}
appender.main.layout.type = PatternLayout
appender.main.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
logger.akka.name = akka
logger.akka.level = WARN
logger.netty.name = org.apache.flink.shaded.netty4
logger.netty.level = WARN
CONF
}

# launch starts the Flink entry point $2 as process $1 (jobmanager or tm-N) with JVM flags
# $3 and program arguments $4..., in its own process group, and records its pid.
launch() {
  local name=$1 main=$2 jvm=$3
  shift 3
  # shellcheck disable=SC2046,SC2086 # the flags are lists of options
  setsid java $jvm $(java_flags) \
    -Dlog.file="$state/log/$name.log" -Dlog4j.configurationFile="file:$state/conf/log4j.properties" \
    -cp "$(classpath)" "$main" --configDir "$state/conf" "$@" \
    >"$state/log/$name.out" 2>&1 </dev/null &
  echo $! >"$state/$name.pid"
}

running() {
  [ -f "$state/$1.pid" ] && kill -0 "$(cat "$state/$1.pid")" 2>/dev/null
}

# launch_tm starts TaskManager $1 under a fresh resource id, which tells a replacement
# from the TaskManager it replaces, and records the id.
launch_tm() {
  local n=$1 params jvm dynamic id
  running "tm-$n" && die "TaskManager $n is already running (pid $(cat "$state/tm-$n.pid"))"
  params=$(resource_params GET_TM_RESOURCE_PARAMS)
  jvm=$(sed -n 1p <<<"$params"); dynamic=$(sed -n 2p <<<"$params")
  id="tm-$n-$(date +%s%N)"
  # shellcheck disable=SC2086 # dynamic is a list of -D options
  launch "tm-$n" org.apache.flink.runtime.taskexecutor.TaskManagerRunner "$jvm" \
    $dynamic -Dtaskmanager.resource-id="$id"
  echo "$id" >"$state/tm-$n.id"
}

# await_tm waits until the JobManager lists TaskManager $1 under its recorded id.
await_tm() {
  local n=$1 id deadline
  id=$(cat "$state/tm-$n.id")
  deadline=$((SECONDS + timeout))
  # grep reads the whole list (no -q), so that the lister never writes into a closed pipe.
  until registered | grep -x "$id" >/dev/null; do
    running "tm-$n" || fail "$state/log/tm-$n.log" "TaskManager $n exited before it registered"
    [ "$SECONDS" -lt "$deadline" ] || fail "$state/log/tm-$n.log" "TaskManager $n did not register within ${timeout}s"
    sleep 0.2 # poll interval of the deadline loop above
  done
}

start() {
  fetch
  if running jobmanager; then
    die "a cluster is already running (JobManager pid $(cat "$state/jobmanager.pid"), state $state); run stop first"
  fi
  command -v curl >/dev/null || die "curl is not installed; it asks the REST API for readiness"
  rm -rf "$state/conf" "$state/log" "$state/tmp" "$state"/*.pid "$state"/*.id
  write_config
  local started=$SECONDS deadline n
  launch jobmanager org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint \
    "$(resource_params GET_JM_RESOURCE_PARAMS | sed -n 1p)"
  deadline=$((SECONDS + timeout))
  until rest overview >/dev/null 2>&1; do
    running jobmanager || fail "$state/log/jobmanager.log" "the JobManager exited before its REST API answered"
    [ "$SECONDS" -lt "$deadline" ] || { stop >&2; fail "$state/log/jobmanager.log" "the JobManager's REST API did not answer within ${timeout}s"; }
    sleep 0.2 # poll interval of the deadline loop above
  done
  log "Flink $FLINK_VERSION: JobManager up after $((SECONDS - started))s"
  # The TaskManagers start side by side; they need only the JobManager's address.
  for n in $(seq "$TASKMANAGERS"); do
    launch_tm "$n"
  done
  for n in $(seq "$TASKMANAGERS"); do
    await_tm "$n"
  done
  log "$TASKMANAGERS TaskManagers registered after $((SECONDS - started))s; REST API http://127.0.0.1:$(cat "$state/rest-port"); logs in $state/log"
  echo "BEAMKINESIS_FLINK_REST=http://127.0.0.1:$(cat "$state/rest-port")"
  echo "BEAMKINESIS_FLINK_MASTER=localhost:$(cat "$state/rest-port")"
  echo "BEAMKINESIS_FLINK_CLUSTER_STATE=$state"
  echo "BEAMKINESIS_FLINK_CLUSTER_VERSION=$FLINK_VERSION"
}

# stop_process stops process $1 (jobmanager or tm-N): TERM to its process group, KILL
# after 30 s.
stop_process() {
  running "$1" || { rm -f "$state/$1.pid"; return 0; }
  local pid deadline
  pid=$(cat "$state/$1.pid")
  kill -TERM -- "-$pid" 2>/dev/null || true
  deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.2 # poll interval of the deadline loop above
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null
  rm -f "$state/$1.pid"
  log "stopped $1 (pid $pid)"
}

stop() {
  local f
  for f in "$state"/tm-*.pid; do
    [ -f "$f" ] && stop_process "$(basename "$f" .pid)"
  done
  stop_process jobmanager
  rm -rf "$state/tmp"
  [ -d "$state/log" ] && log "logs kept in $state/log"
  return 0
}

# tm_number checks that $1 names a TaskManager of this cluster.
tm_number() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le "$TASKMANAGERS" ] \
    || die "want a TaskManager number from 1 to $TASKMANAGERS, got '${1:-}'"
}

kill_tm() {
  tm_number "$1"
  running "tm-$1" || die "TaskManager $1 is not running"
  local pid
  pid=$(cat "$state/tm-$1.pid")
  kill -KILL -- "-$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done # the kernel reaps it at once
  rm -f "$state/tm-$1.pid"
  log "killed TaskManager $1 (pid $pid, $(cat "$state/tm-$1.id"))"
}

# kill_all kills every TaskManager and then the JobManager with kill -9.
kill_all() {
  local f name pid
  for f in "$state"/tm-*.pid "$state"/jobmanager.pid; do
    [ -f "$f" ] || continue
    name=$(basename "$f" .pid)
    pid=$(cat "$f")
    kill -KILL -- "-$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done # the kernel reaps it at once
    rm -f "$f"
    log "killed $name (pid $pid)"
  done
}

# start_all starts the JobManager and every TaskManager again with the config the last
# start wrote, so the REST and RPC ports stay those the job server submits to.
start_all() {
  [ -f "$state/conf/$FLINK_CONFIG_FILE" ] || die "no cluster config in $state; run start first"
  running jobmanager && die "the JobManager is running (pid $(cat "$state/jobmanager.pid"))"
  local started=$SECONDS deadline n
  launch jobmanager org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint \
    "$(resource_params GET_JM_RESOURCE_PARAMS | sed -n 1p)"
  deadline=$((SECONDS + timeout))
  until rest overview >/dev/null 2>&1; do
    running jobmanager || fail "$state/log/jobmanager.log" "the JobManager exited before its REST API answered"
    [ "$SECONDS" -lt "$deadline" ] || fail "$state/log/jobmanager.log" "the JobManager's REST API did not answer within ${timeout}s"
    sleep 0.2 # poll interval of the deadline loop above
  done
  for n in $(seq "$TASKMANAGERS"); do
    launch_tm "$n"
  done
  for n in $(seq "$TASKMANAGERS"); do
    await_tm "$n"
  done
  log "JobManager and $TASKMANAGERS TaskManagers up again after $((SECONDS - started))s"
}

status() {
  [ -f "$state/rest-port" ] || die "no cluster state in $state"
  rest overview && echo
  rest taskmanagers && echo
}

case "${1:-}" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  kill-tm) kill_tm "${2:-}" ;;
  start-tm) tm_number "${2:-}"; launch_tm "$2"; await_tm "$2"; log "TaskManager $2 registered as $(cat "$state/tm-$2.id")" ;;
  kill-all) kill_all ;;
  start-all) start_all ;;
  status) status ;;
  *) die "usage: $0 fetch|start|stop|kill-tm N|start-tm N|kill-all|start-all|status" ;;
esac
