// Command load writes synthetic records to a Kinesis stream with kinesisio.Write, for demos
// and benchmarks: --count records of --size bytes at --rate records a second (0: as fast
// as the stream takes them) under --keys distinct partition keys (0: a random key per
// record). --format=json writes {id, ts, v} objects that kinesis-to-files stages.
//
// --warm_throughput_mibps=N first scales an ON_DEMAND stream for N MiB/s of writes
// (UpdateStreamWarmThroughput) and waits until it is ACTIVE and that warm, for a backfill at
// full speed. It costs money: it needs the account's On-demand Advantage minimum throughput
// billing commitment (UpdateAccountSettings), billed for at least 24 hours once on, and warm
// throughput is billed too (pipelines/README.md, "Warming a stream before a backfill").
//
// With no --stream it writes to a stream "load" on an in-process Kinesis server and
// prints what the stream then holds:
//
//	go run ./pipelines/load --count=100000 --size=200
package main

import "github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"

func main() {
	pipeflags.Main("load", (*config).register, config.preflight, run)
}
