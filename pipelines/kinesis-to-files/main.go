// Command kinesis-to-files stages the JSON records of a Kinesis stream as Parquet (or
// JSON-lines) files for a batch loader, like the seed's Spark job that writes {id, ts, v}
// records into a staging folder that spark.read.format("parquet") then reads. Each
// record's data is parsed against the schema Event; records that are not a JSON object of
// that schema (or not UTF-8) go, whole and with the reason, to dead-letter files (always
// JSON lines). Both are written per fixed window of arrival time, to a local directory or
// an s3://bucket/prefix:
//
//	<staging_dir>/events/part-<window start>-<window end>-<shard id>-00000-of-00001.parquet
//	<staging_dir>/dead-letters/part-<window start>-<window end>-<shard id>-00000-of-00001.jsonl
//
// A file appears complete or not at all, and a retried bundle rewrites it with the same
// bytes (see transforms/filesink). --format=jsonl writes the events as JSON lines
// (.jsonl); --s3_endpoint points s3:// staging at a local S3-compatible server.
//
// --queue=<queue ARN> reads a Kinesis queue instead of --stream's shards (files then
// named per window and "queue"); --queue=embedded runs the demo through a queue.
//
// With no flags it starts an in-process Kinesis server with the stream "iot-events", puts
// well-formed and malformed records, stages them as Parquet under kinesis_staging/iot-events
// and prints the files written:
//
//	go run ./pipelines/kinesis-to-files
package main

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
)

func main() {
	pipeflags.Main("kinesis-to-files", (*config).register, config.preflight, run)
}

// run builds the pipeline cfg describes, prints the paths of the files it writes and runs
// it on the runner Beam's flags select.
func run(ctx context.Context, cfg config) error {
	j, err := prepare(ctx, cfg, environment{})
	if err != nil {
		return err
	}
	defer j.stop()
	p, s := beam.NewPipelineWithRoot()
	events, dead := j.build(s)
	beam.ParDo0(s, printStaged, events)
	beam.ParDo0(s, printStaged, dead)
	if _, err := flinkrunner.Run(ctx, p); err != nil {
		return fmt.Errorf("running the pipeline: %w", err)
	}
	return nil
}
