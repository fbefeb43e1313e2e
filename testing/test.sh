#!/usr/bin/env bash
# test.sh is the one test command (README.md and testing/README.md: Running the tests). It
# installs the components the suite needs into caches outside the repository
# (testing/deps/deps.sh), starts the Flink cluster and its job server (testing/flink), runs
# every test of the module with nothing skipped for a missing component, and stops what it
# started.
#
#   testing/test.sh [go test flags and packages]     # default: -count=1 -timeout 25m ./...
#
# The Flink cluster and job server are Flink 1.19.3 with Beam 2.62.0's runner;
# BEAMKINESIS_FLINK_VERSION=1.16 installs and runs Flink 1.16.3 with Beam 2.56.0's instead
# (testing/flink/versions.sh). BEAMKINESIS_FLINK_STATE and BEAMKINESIS_FLINK_CLUSTER_STATE
# give a run state directories of its own, beside another run's cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { echo; echo "== test.sh: $* ($(( $(date +%s) - start ))s)"; }

step "installing the test components (testing/deps/deps.sh)"
while IFS= read -r line; do
  case "$line" in *=*) export "${line?}"; echo "  $line" ;; esac
done < <(testing/deps/deps.sh all)

# A component that is missing now is a failure, never a skip. The side-by-side runs with Beam
# Java KinesisIO (testing/bench TestAnchorsQuick; it builds testing/anchors/java-kinesisio with
# Maven) and with Flink's own FlinkKinesisConsumer on the cluster (testing/bench
# TestFlinkKinesisAnchorReadsEveryRecord) are part of the suite too.
export BEAMKINESIS_REQUIRE_EMULATORS=1 BEAMKINESIS_REQUIRE_FLINK=1 BEAMKINESIS_REQUIRE_COMPONENTS=1
export BEAMKINESIS_ANCHORS=1 BEAMKINESIS_REQUIRE_ANCHORS=1 BEAMKINESIS_FLINK_KINESIS=1

step "starting the Flink cluster and its job server (testing/flink)"
stop_flink() { testing/flink/flink.sh stop || true; }
trap stop_flink EXIT
while IFS= read -r line; do
  case "$line" in *=*) export "${line?}"; echo "  $line" ;; esac
done < <(testing/flink/flink.sh start)

if [ $# -gt 0 ]; then
  step "go test $*"
  go test "$@"
else
  # testing/flink is the longest package by far (about 10 minutes of cluster runs, mostly
  # waiting on submissions, checkpoints and restarts). go test would start it only when a
  # slot frees, late in the run, so it runs in a go test of its own from the start, beside
  # one that runs every other package one at a time: two test binaries at once, as before.
  # Its output is printed when both have ended.
  step "go test -count=1 -timeout 25m ./... (testing/flink beside the rest)"
  flink_log=$(mktemp)
  go test -count=1 -timeout 25m ./testing/flink/ >"$flink_log" 2>&1 &
  flink_pid=$!
  rest_rc=0
  go test -count=1 -timeout 25m -p 1 $(go list ./... | grep -vx "$(go list -m)/testing/flink") || rest_rc=$?
  flink_rc=0
  wait "$flink_pid" || flink_rc=$?
  cat "$flink_log"; rm -f "$flink_log"
  if [ "$rest_rc" -ne 0 ] || [ "$flink_rc" -ne 0 ]; then
    echo "go test failed (testing/flink: exit $flink_rc; the other packages: exit $rest_rc)"; exit 1
  fi
fi

step "stopping the Flink cluster"
stop_flink
trap - EXIT
step "done"
