// Package flink holds the end-to-end tests that run the pipelines of ../../pipelines on
// Flink through Beam's Flink job server, as a user launches them:
//
//	<pipeline> --runner=flink --endpoint=<job server> --environment_type=LOOPBACK ...
//
// against an in-process Kinesis server (testing/kinesistest) that the test owns, or the
// pipelines' embedded mode. --runner=flink goes through pipelines/flinkrunner, which sends
// the Flink options (checkpointing and the rest) as top-level pipeline options.
//
// The scripts of this directory provide the runner:
//
//   - versions.sh pins two pairs: Flink 1.19.3 with Beam 2.62.0's Flink 1.19 runner (the
//     default) and Flink 1.16.3 with Beam 2.56.0's Flink 1.16 runner
//     (BEAMKINESIS_FLINK_VERSION=1.16). The scripts below use the selected pair.
//   - cluster.sh fetches the Flink release's jars from PyPI (apache-flink-libraries) into the
//     cache and starts a standalone session cluster on loopback: one JobManager and two
//     TaskManagers as separate JVMs; kill-tm and start-tm kill and replace a TaskManager.
//   - jobserver.sh fetches the pair's Beam Flink runner from Maven and starts its job
//     server, on a cluster (BEAMKINESIS_FLINK_MASTER=host:port) or in-JVM ([local]).
//   - flink.sh starts both, the job server pointed at the cluster, and prints the
//     environment the tests read (BEAMKINESIS_FLINK_ENDPOINT, BEAMKINESIS_FLINK_REST,
//     BEAMKINESIS_FLINK_CLUSTER_STATE, ...). testing/test.sh runs it around the suite.
//
// The tests run when BEAMKINESIS_FLINK_ENDPOINT names a running job server, or when
// BEAMKINESIS_FLINK=1, in which case TestMain starts the cluster and job server with
// flink.sh (BEAMKINESIS_FLINK=local: a job server with an in-JVM cluster) and stops them at
// the end. Otherwise they skip, unless BEAMKINESIS_REQUIRE_FLINK=1 makes a missing job
// server a failure. The tests that read Flink's REST API or kill TaskManagers need the
// standalone cluster (BEAMKINESIS_FLINK_REST and BEAMKINESIS_FLINK_CLUSTER_STATE); they
// reuse one cluster and run one pipeline at a time.
package flink
