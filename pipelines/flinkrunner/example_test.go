package flinkrunner_test

import (
	"context"
	"flag"
	"log"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
)

// A pipeline's main calls flinkrunner.Run where it would call beamx.Run. Launched as
//
//	mypipeline --runner=flink --endpoint=localhost:8099 --checkpointing_interval=30000
//
// it runs on the Flink job server at localhost:8099 with a checkpoint every 30 s; with
// any other --runner it runs as beamx.Run would.
func ExampleRun() {
	flag.Parse()
	beam.Init()
	p, s := beam.NewPipelineWithRoot()
	beam.Create(s, "a", "b") // the pipeline's transforms
	if _, err := flinkrunner.Run(context.Background(), p); err != nil {
		log.Fatalf("running the pipeline: %v", err)
	}
}

// Execute takes the options as a value, for a program that sets them itself.
func ExampleExecute() {
	flag.Parse()
	beam.Init()
	p, s := beam.NewPipelineWithRoot()
	beam.Create(s, "a", "b")
	opts := flinkrunner.Defaults
	opts.CheckpointingInterval = 60_000
	opts.SavepointPath = "file:///flink/savepoints/savepoint-1a2b3c-0123456789ab"
	if _, err := flinkrunner.Execute(context.Background(), p, opts); err != nil {
		log.Fatalf("running the pipeline on Flink: %v", err)
	}
}
