// Package kcl runs the checkpoint table against a real Kinesis Client Library application:
// a small KCL 3.x consumer (the Maven project in this directory, built by
// testing/deps/deps.sh kcl) and beamkinesis take turns on the same lease table, in both
// directions, against the kinesistest server and dynalite. The tests check, as exact
// multisets, that the second reader continues where the first one checkpointed: nothing
// lost, and nothing read twice beyond the records the first one had not checkpointed.
//
// deps.sh builds the consumer twice. Every scenario runs on KCL 3.1 (BEAMKINESIS_KCL); one
// runs on KCL 3.5 (BEAMKINESIS_KCL35), whose lease table also holds its worker metrics and
// coordinator state, and hands the table over both ways across a split. Pointing
// BEAMKINESIS_KCL at the KCL 3.5 build (<cache>/kcl-3.5) runs every scenario on KCL 3.5.
//
// For debugging, BEAMKINESIS_KCL_LOG_DIR keeps each KCL run's log there,
// BEAMKINESIS_KCL_LOG_LEVEL sets its level (default warn) and BEAMKINESIS_KCL_PROTOCOL=h2
// has it talk cleartext HTTP/2 to the server instead of HTTP/1.1.
package kcl
