package main

import (
	"context"
	"testing"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/dryrun"
)

// TestDataflowDryRun translates the streaming, bounded and reshuffling jobs for Dataflow
// (--runner=dataflow --dry_run) through the command's own run function and checks the
// job it would submit: streaming for the unbounded read, batch with --bounded, the read's
// splittable DoFns, the write, and every function and type registered.
func TestDataflowDryRun(t *testing.T) {
	streams := []string{"--input_stream=in", "--output_stream=out", "--kinesis_region=eu-west-1"}
	for _, tc := range []struct {
		name  string
		flags []string
		want  dryrun.Want
	}{
		{"streaming", nil, dryrun.Want{
			Type:            dryrun.Streaming,
			Transforms:      []string{"kinesisio.Read", "decode.String", "count.PerWindow", "kinesisio.Write/kinesisio.writeFn", "report.Failures"},
			SplittableDoFns: []string{"kinesisio.Read/kinesisio.discoverFn", "kinesisio.Read/kinesisio.readFn"},
		}},
		{"bounded", []string{"--bounded"}, dryrun.Want{
			Type:            dryrun.Batch,
			Transforms:      []string{"kinesisio.ReadBounded", "decode.String", "count.PerWindow", "kinesisio.Write/kinesisio.writeFn", "report.Failures"},
			SplittableDoFns: []string{"kinesisio.ReadBounded/kinesisio.readBoundedFn"},
		}},
		{"passthrough", []string{"--transform=passthrough", "--reshuffle"}, dryrun.Want{
			Type:            dryrun.Streaming,
			Transforms:      []string{"kinesisio.Read", "Reshuffle", "kinesisio.MessagesWithRandomKeys", "kinesisio.Write/kinesisio.writeFn"},
			SplittableDoFns: []string{"kinesisio.Read/kinesisio.discoverFn", "kinesisio.Read/kinesisio.readFn"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parse(t, append(streams, tc.flags...)...)
			dryrun.Check(t, dryrun.Run(t, func(ctx context.Context) error { return run(ctx, cfg) }), tc.want)
		})
	}
}
