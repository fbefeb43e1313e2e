// Command kinesis-to-kinesis reads one Kinesis stream, transforms it and writes the result
// to another with kinesisio.Write, KPL-aggregated by default, as the Spark connector's sink
// example does. Two transforms:
//
//   - count (the default): counts the records of each distinct data value per window
//     (the global window when bounded) and writes one JSON record per value and window,
//     {"key":..., "count":..., "window_start":..., "window_end":...}, keyed by the value;
//   - passthrough: writes every record's data unchanged under a random partition key (the
//     sink example's CAST(rand() AS STRING)), spreading it over the output's shards.
//
// Records the sink fails to write are logged with their reason, counted in the metric
// pipelines.kinesis-to-kinesis/failed_messages, and reported at the end of a bounded run.
//
// --queue=<queue ARN> reads a Kinesis queue instead of --input_stream's shards;
// --queue=embedded runs the demo through a queue.
//
// With no flags it starts an in-process Kinesis server with the streams "input" and
// "output", puts sample records into "input", runs once and prints what "output" holds:
//
//	go run ./pipelines/kinesis-to-kinesis
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/report"
)

func main() {
	pipeflags.Main("kinesis-to-kinesis", (*config).register, config.preflight, run)
}

// run builds the pipeline cfg describes and runs it on the runner Beam's flags select.
func run(ctx context.Context, cfg config) error {
	j, err := prepare(ctx, cfg, environment{})
	if err != nil {
		return err
	}
	defer j.stop()
	p, s := beam.NewPipelineWithRoot()
	j.build(s)
	res, err := flinkrunner.Run(ctx, p)
	if err != nil {
		return fmt.Errorf("running the pipeline: %w", err)
	}
	if res == nil { // --runner=vet checks the graph and runs nothing; so does a Dataflow --dry_run
		return nil
	}
	fmt.Printf("%d messages could not be written to %s\n", report.FailedCount(res, metricsNamespace), j.output)
	if j.srv != nil {
		return printStream(os.Stdout, j.srv, j.output)
	}
	return nil
}
