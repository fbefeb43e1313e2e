#!/usr/bin/env bash
# deps.sh installs the third-party components the test suite runs against, pinned, into a
# cache outside the repository, and prints the environment the tests need to find them
# (KEY=value lines on standard output; progress goes to standard error).
#
#   testing/deps/deps.sh [all|npm|python|java|kcl|flink|jobserver|flinkkinesis ...]   # default: all
#
# all is every component below.
#
# Components:
#   npm        the npm packages of testing/emulators (package-lock.json): Kinesis emulators,
#              aws-kinesis-agg and the other JavaScript clients the tests drive
#   python     a virtualenv with the PyPI packages of testing/deps/requirements.txt
#   flink      Flink's distribution jars (PyPI apache-flink-libraries, see testing/flink/cluster.sh)
#   jobserver  Beam's Flink job server classpath from Maven (testing/flink/jobserver.sh fetch)
#   java       the Java SDK v2 conformance client (testing/conformance/java-sdkv2), built with
#              Maven into the cache, offline first (a warm ~/.m2) and online if that fails
#   kcl        the KCL 3.x consumer of the KCL interop test (testing/kcl), built the same way
#              twice: on KCL 3.1 (the pom's kcl.version) and on KCL 3.5 (its profile kcl-3.5)
#   flinkkinesis  the bench's Flink Kinesis anchor (testing/anchors/flink-kinesis): a Flink job
#              reading with Flink's own FlinkKinesisConsumer (flink-connector-kinesis 4.3.0-1.19,
#              or 1.16.3 for Flink 1.16), shaded into one jar, built the same way
#
# flink, jobserver and flinkkinesis install one pair of testing/flink/versions.sh: Flink
# 1.19.3 with Beam 2.62.0's runner by default, Flink 1.16.3 with Beam 2.56.0's when
# BEAMKINESIS_FLINK_VERSION=1.16. Each pair has caches of its own, so both can be installed
# side by side; only the selected one is fetched.
#
# Environment:
#   BEAMKINESIS_CACHE  the cache root (default ${XDG_CACHE_HOME:-~/.cache}/beamkinesis)
#   BEAMKINESIS_FLINK_VERSION  the Flink pair: 1.19 (default) or 1.16
# Maven keeps what it resolves in its own local repository (~/.m2), also outside the repo.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${BEAMKINESIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/beamkinesis}
mkdir -p "$cache"
# FLINK_VERSION, FLINK_MINOR, FLINK_KINESIS_VERSION: the selected Flink pair.
# shellcheck source=../flink/versions.sh
. "$repo/testing/flink/versions.sh"

log() { echo "deps.sh: $*" >&2; }
die() { echo "deps.sh: $*" >&2; exit 1; }

# same_content reports whether files $1 and $2 both exist and are identical.
same_content() { [ -f "$1" ] && [ -f "$2" ] && cmp -s "$1" "$2"; }

npm_deps() {
  command -v npm >/dev/null || die "npm is not installed (Node 18 or later is needed)"
  local dir=$cache/npm src=$repo/testing/emulators
  mkdir -p "$dir"
  # npm ci again only when the lock file changed or the install is incomplete.
  if ! same_content "$src/package-lock.json" "$dir/package-lock.json" || [ ! -f "$dir/node_modules/.installed" ]; then
    log "npm ci into $dir"
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    rm -f "$dir/node_modules/.installed"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    touch "$dir/node_modules/.installed"
  fi
  echo "BEAMKINESIS_EMULATORS_DIR=$dir"
}

python_deps() {
  command -v python3 >/dev/null || die "python3 is not installed (3.9 or later is needed)"
  local venv=$cache/venv req=$here/requirements.txt
  if ! same_content "$req" "$venv/requirements.txt"; then
    log "installing $(grep -cv '^\s*\(#\|$\)' "$req") PyPI packages into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
    cp "$req" "$venv/requirements.txt"
  fi
  echo "BEAMKINESIS_PYTHON=$venv/bin/python"
  echo "BEAMKINESIS_VENV=$venv"
}

flink_deps() {
  "$repo/testing/flink/cluster.sh" fetch >&2
}

jobserver_deps() {
  "$repo/testing/flink/jobserver.sh" fetch >&2
}

# maven_build builds the Maven project $1 into $2, passing the build directory as property
# $3 and any further arguments to mvn, again only when its pom, a source or those arguments
# changed or the build's product $4 (default classpath.txt; "" for the default) is missing;
# offline first (a warm ~/.m2), then online.
maven_build() {
  command -v mvn >/dev/null || die "mvn is not installed (Maven 3 and a JDK 17 are needed)"
  local src=$1 out=$2 prop=$3 product=${4:-classpath.txt} stamp
  shift $(( $# < 4 ? $# : 4 ))
  stamp=$( { cd "$src" && find pom.xml src -type f -print0 | sort -z | xargs -0 sha256sum; [ $# -eq 0 ] || echo "mvn $*"; } | sha256sum | cut -d' ' -f1)
  if [ ! -f "$out/$product" ] || [ "$(cat "$out/.stamp" 2>/dev/null)" != "$stamp" ]; then
    log "building ${src#"$repo"/} into $out${*:+ ($*)}"
    rm -rf "$out"
    (cd "$src" && { mvn -q -B -o "-D$prop=$out" "$@" package >&2 ||
      { log "offline Maven build failed, building online"; mvn -q -B "-D$prop=$out" "$@" package >&2; }; })
    echo "$stamp" > "$out/.stamp"
  fi
}

java_deps() {
  maven_build "$repo/testing/conformance/java-sdkv2" "$cache/java-sdkv2" conformance.build.dir
  echo "BEAMKINESIS_JAVA_CLIENT=$cache/java-sdkv2"
}

# kcl_deps builds the KCL consumer on KCL 3.1, which the interop runs every scenario on, and
# on KCL 3.5, whose lease table also holds its worker metrics and coordinator state.
kcl_deps() {
  maven_build "$repo/testing/kcl" "$cache/kcl" kcl.build.dir
  echo "BEAMKINESIS_KCL=$cache/kcl"
  maven_build "$repo/testing/kcl" "$cache/kcl-3.5" kcl.build.dir "" -Pkcl-3.5
  echo "BEAMKINESIS_KCL35=$cache/kcl-3.5"
}

# flinkkinesis_deps builds the anchor for the selected pair's Flink release, into a directory
# of that release (testing/bench looks there by $BEAMKINESIS_FLINK_CLUSTER_VERSION).
flinkkinesis_deps() {
  local out=$cache/flink-kinesis-$FLINK_VERSION
  maven_build "$repo/testing/anchors/flink-kinesis" "$out" flinkkinesis.build.dir flink-kinesis-anchor.jar \
    "-Dflink.version=$FLINK_VERSION" "-Dflink.kinesis.version=$FLINK_KINESIS_VERSION"
  echo "BEAMKINESIS_FLINK_KINESIS_JAR=$out/flink-kinesis-anchor.jar"
}

# all_deps installs every component in three lanes at once, which mostly wait on the
# network: npm; PyPI (the virtualenv, then Flink's jars); Maven (one build after the other,
# since they share the local repository). Each lane's KEY=value lines are printed once all
# have finished; a failed lane fails the whole.
all_deps() {
  local dir rc=0 pids=() lane
  dir=$(mktemp -d)
  ( npm_deps ) >"$dir/1" & pids+=($!)
  ( python_deps && flink_deps ) >"$dir/2" & pids+=($!)
  ( java_deps && kcl_deps && flinkkinesis_deps && jobserver_deps ) >"$dir/3" & pids+=($!)
  for lane in "${pids[@]}"; do
    wait "$lane" || rc=1
  done
  cat "$dir/1" "$dir/2" "$dir/3"
  rm -rf "$dir"
  [ "$rc" -eq 0 ] || die "installing the components failed (see the lines above)"
}

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(all)
for part in "${parts[@]}"; do
  case "$part" in
    all) all_deps ;;
    npm) npm_deps ;;
    python) python_deps ;;
    flink) flink_deps ;;
    jobserver) jobserver_deps ;;
    java) java_deps ;;
    kcl) kcl_deps ;;
    flinkkinesis) flinkkinesis_deps ;;
    *) die "unknown component $part; want all, npm, python, java, kcl, flink, jobserver or flinkkinesis" ;;
  esac
done
