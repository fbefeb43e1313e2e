// Package conformance holds tests only: it runs one set of Kinesis Data
// Streams scenarios against three implementations — the in-process server of
// testing/kinesistest, kinesis-local (etspaceman's kinesis-mock) and
// kinesalite — and checks the KPL codec of kinesisio/kpl against awslabs'
// aws-kinesis-agg, so that neither the server nor the connector is only
// tested against itself.
//
// The third-party implementations are npm packages pinned in
// testing/emulators; without them (cd testing/emulators && npm ci) their
// subtests skip, or fail when BEAMKINESIS_REQUIRE_EMULATORS=1.
//
// Where an emulator differs from the API reference, the scenario is skipped
// for that emulator only, with the reason in the skip message; the reasons are
// collected in the gaps table of targets_test.go.
package conformance
