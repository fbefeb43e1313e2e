// Package flink holds the end-to-end tests that run the pipelines of ../../pipelines on
// Beam's Flink job server, as a user launches them:
//
//	<pipeline> --runner=flink --endpoint=<job server> --environment_type=LOOPBACK ...
//
// against an in-process Kinesis server (testing/kinesistest) that the test owns, or the
// pipelines' embedded mode. jobserver.sh fetches, starts and stops the job server.
//
// The tests run only when BEAMKINESIS_FLINK_ENDPOINT names a running job server, or when
// BEAMKINESIS_FLINK=1, in which case they start one with jobserver.sh themselves. Otherwise
// they skip, unless BEAMKINESIS_REQUIRE_FLINK=1 makes a missing job server a failure.
package flink
