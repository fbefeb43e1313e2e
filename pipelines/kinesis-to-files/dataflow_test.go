package main

import (
	"context"
	"testing"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/dryrun"
)

// TestDataflowDryRun translates the streaming Parquet job and the bounded JSON Lines job
// for Dataflow (--runner=dataflow --dry_run, staging to S3 as on Dataflow workers) through
// the command's own run function and checks the job it would submit: streaming for the
// unbounded read, batch with --bounded, the read's splittable DoFns, the file sinks, and
// every function and type registered.
func TestDataflowDryRun(t *testing.T) {
	source := []string{"--stream=events", "--kinesis_region=eu-west-1", "--staging_dir=s3://bucket/staging"}
	for _, tc := range []struct {
		name  string
		flags []string
		want  dryrun.Want
	}{
		{"streaming parquet", nil, dryrun.Want{
			Type:            dryrun.Streaming,
			Transforms:      []string{"kinesisio.Read", "decode.JSONByShard", "Events/filesink.WriteParquetPerKey", "DeadLetters/filesink.WritePerKey"},
			SplittableDoFns: []string{"kinesisio.Read/kinesisio.discoverFn", "kinesisio.Read/kinesisio.readFn"},
		}},
		{"bounded jsonl", []string{"--bounded", "--format=jsonl"}, dryrun.Want{
			Type:            dryrun.Batch,
			Transforms:      []string{"kinesisio.ReadBounded", "decode.JSONByShard", "Events/filesink.WritePerKey", "DeadLetters/filesink.WritePerKey"},
			SplittableDoFns: []string{"kinesisio.ReadBounded/kinesisio.readBoundedFn"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parse(t, append(source, tc.flags...)...)
			dryrun.Check(t, dryrun.Run(t, func(ctx context.Context) error { return run(ctx, cfg) }), tc.want)
		})
	}
}
