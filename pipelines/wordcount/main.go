// Command wordcount counts the words of a Kinesis stream and prints them as a table, like
// the console output of the Spark Kinesis connector's word count:
//
//	+---------+-----+
//	|     word|count|
//	+---------+-----+
//	|  Kinesis|    1|
//	...
//
// With no flags it starts an in-process Kinesis server, creates the stream "words", puts
// the seed's words and a sample text, reads them back with kinesisio, and prints one table:
//
//	go run ./pipelines/wordcount
//
// With --stream (and --kinesis_region or --kinesis_endpoint) it reads a real stream:
// streaming by default, in fixed windows of --window, printing each window's table when the
// watermark passes its end; with --bounded, a one-shot count of what the stream holds.
// With --queue=<queue ARN> it reads a Kinesis queue instead of a stream's shards;
// --queue=embedded runs the demo through a queue of the embedded server.
// Beam's flags choose the runner (--runner=prism is the default; universal, flink,
// dataflow).
package main

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
)

func main() {
	pipeflags.Main("wordcount", (*config).register, config.preflight, run)
}

// run builds the pipeline cfg describes, prints its tables and runs it on the runner
// Beam's flags select.
func run(ctx context.Context, cfg config) error {
	j, err := prepare(ctx, cfg, environment{})
	if err != nil {
		return err
	}
	defer j.stop()
	p, s := beam.NewPipelineWithRoot()
	j.buildPrinted(s)
	if _, err := flinkrunner.Run(ctx, p); err != nil {
		return fmt.Errorf("running the pipeline: %w", err)
	}
	return nil
}
