package main

import (
	"context"
	"testing"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/dryrun"
)

// TestDataflowDryRun translates both modes for Dataflow (--runner=dataflow --dry_run)
// through the command's own run function and checks the job it would submit: a
// streaming job for the unbounded read, a batch job with --bounded, the read's
// splittable DoFn and every function and type registered.
func TestDataflowDryRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want dryrun.Want
	}{
		{[]string{"--stream=words", "--kinesis_region=eu-west-1"}, dryrun.Want{
			Type:            dryrun.Streaming,
			Transforms:      []string{"kinesisio.Read", "decode.String", "count.PerWindow", "count.Tables"},
			SplittableDoFns: []string{"kinesisio.Read/kinesisio.discoverFn", "kinesisio.Read/kinesisio.readFn"},
		}},
		{[]string{"--stream=words", "--kinesis_region=eu-west-1", "--bounded"}, dryrun.Want{
			Type:            dryrun.Batch,
			Transforms:      []string{"kinesisio.ReadBounded", "decode.String", "count.PerWindow", "count.Tables"},
			SplittableDoFns: []string{"kinesisio.ReadBounded/kinesisio.readBoundedFn"},
		}},
	} {
		t.Run(tc.want.Type, func(t *testing.T) {
			cfg := parse(t, tc.args...)
			job := dryrun.Run(t, func(ctx context.Context) error { return run(ctx, cfg) })
			dryrun.Check(t, job, tc.want)
		})
	}
}
