#!/usr/bin/env bash
# test.sh is the one test command (README: Running the tests). It installs the components
# the suite needs into caches outside the repository (testing/deps/deps.sh), starts the
# Flink cluster and its job server (testing/flink), runs every test of the module with
# nothing skipped for a missing component, and stops what it started.
#
#   testing/test.sh [go test flags and packages]     # default: -count=1 -timeout 25m ./...
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

args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-count=1 -timeout 25m ./...)
step "go test ${args[*]}"
go test "${args[@]}"

step "stopping the Flink cluster"
stop_flink
trap - EXIT
step "done"
