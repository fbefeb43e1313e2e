# versions.sh is sourced by cluster.sh, jobserver.sh and testing/deps/deps.sh: the one place
# the Flink release and Beam's Flink runner are pinned, as two tested pairs.
#
#   BEAMKINESIS_FLINK_VERSION=1.19 (default)  Flink 1.19.3, Beam 2.62.0's Flink 1.19 runner,
#                                             flink-connector-kinesis 4.3.0-1.19
#   BEAMKINESIS_FLINK_VERSION=1.16            Flink 1.16.3, Beam 2.56.0's Flink 1.16 runner,
#                                             flink-connector-kinesis 1.16.3
#
# The variable takes the minor release or the full one (1.19 or 1.19.3). Each pair is the
# newest Beam runner whose dependencies all resolve from Maven Central for that Flink minor
# release: Beam 2.70.0 (Flink 1.19) and 2.59.0 (Flink 1.16) are listed there but
# beam-runners-java-job-service is not served at those versions, and no runner is served
# for Flink 1.17, 1.18, 1.20 or 2.x. Neither runner has the fix of Beam issue #27648
# (pipelines/README.md: "Use a Beam 2.76 or later Flink job server").
#
# Sets FLINK_VERSION (the release of the cluster's jars), FLINK_MINOR (the runner's Flink
# line), FLINK_SDIST_SHA256 (of PyPI's apache-flink-libraries sdist of FLINK_VERSION),
# BEAM_VERSION (the runner's Beam release), FLINK_KINESIS_VERSION (Flink's Kinesis connector
# built for FLINK_MINOR) and FLINK_CONFIG_FILE (the name of the config the cluster reads).
# flink_pair VERSION sets them for VERSION and fails on a release that is not pinned here.

flink_pair() {
  case "$1" in
    1.19 | 1.19.3)
      FLINK_VERSION=1.19.3
      FLINK_MINOR=1.19
      FLINK_SDIST_SHA256=4a58e3a1fb7d83340bc96b6c080624c6d792d69fae5d294b96224775204a9c60
      BEAM_VERSION=2.62.0
      FLINK_KINESIS_VERSION=4.3.0-1.19
      # Flink 1.19 reads config.yaml (standard YAML) and falls back to the legacy
      # flink-conf.yaml only when config.yaml is absent.
      FLINK_CONFIG_FILE=config.yaml
      ;;
    1.16 | 1.16.3)
      FLINK_VERSION=1.16.3
      FLINK_MINOR=1.16
      FLINK_SDIST_SHA256=d15df4185e9c507836b031879b64e18f68955dd7e90cd7d39b450513ed64ebbe
      BEAM_VERSION=2.56.0
      FLINK_KINESIS_VERSION=1.16.3
      FLINK_CONFIG_FILE=flink-conf.yaml
      ;;
    *)
      echo "BEAMKINESIS_FLINK_VERSION=$1 is not a pinned Flink release; want 1.19 (the default) or 1.16" >&2
      return 1
      ;;
  esac
}

flink_pair "${BEAMKINESIS_FLINK_VERSION:-1.19}" || exit 1
