// Package emulators starts third-party Kinesis implementations for tests:
// the Kinesis emulators kinesis-local (etspaceman's kinesis-mock, the
// emulator behind LocalStack) and kinesalite, and node scripts that use
// awslabs' KPL aggregation library aws-kinesis-agg.
//
// They are npm packages, pinned by package.json and package-lock.json in this
// directory. Install them once with
//
//	cd testing/emulators && npm ci
//
// (node_modules is ignored by git). Tests that need them call Start or Node;
// when node or the packages are missing those tests are skipped with a message
// saying how to install them, unless the environment variable
// BEAMKINESIS_REQUIRE_EMULATORS is set to 1, in which case they fail: CI sets
// it so that it cannot skip the suite silently.
//
// Each emulator runs as a child process in its own process group on free
// loopback ports; Start returns once it answers ListStreams, and Stop ends the
// whole group. The emulator's output is kept for failure messages.
package emulators
