#!/usr/bin/env bash
# flink.sh starts and stops what the e2e tests of this directory run on: the standalone
# Flink cluster of cluster.sh, and Beam's Flink job server (jobserver.sh) submitting to it.
#
#   testing/flink/flink.sh start   # start both and print, as KEY=value lines:
#                                  #   BEAMKINESIS_FLINK_ENDPOINT      the job server's job endpoint
#                                  #   BEAMKINESIS_FLINK_BEAM_VERSION  the Beam release of its runner
#                                  #   BEAMKINESIS_FLINK_REST          the cluster's REST API URL
#                                  #   BEAMKINESIS_FLINK_MASTER        the --flink-master it submits to
#                                  #   BEAMKINESIS_FLINK_CLUSTER_STATE the cluster's state directory,
#                                  #                                   for cluster.sh kill-tm/start-tm
#   testing/flink/flink.sh stop    # stop the job server, then the cluster
#
# The environment of cluster.sh and jobserver.sh applies (state directories, timeouts).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

start() {
  local line master=""
  while IFS= read -r line; do
    echo "$line"
    case "$line" in BEAMKINESIS_FLINK_MASTER=*) master=${line#*=} ;; esac
  done < <("$here/cluster.sh" start)
  [ -n "$master" ] || { "$here/cluster.sh" stop >&2; echo "flink.sh: cluster.sh start failed" >&2; exit 1; }
  if ! BEAMKINESIS_FLINK_MASTER=$master "$here/jobserver.sh" start; then
    "$here/cluster.sh" stop >&2
    echo "flink.sh: jobserver.sh start failed" >&2
    exit 1
  fi
}

stop() {
  local rc=0
  "$here/jobserver.sh" stop >&2 || rc=1
  "$here/cluster.sh" stop >&2 || rc=1
  return "$rc"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 1 ;;
esac
