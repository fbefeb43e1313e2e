package main

import (
	"context"
	"testing"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/dryrun"
)

// TestDataflowDryRun translates a counted load (a batch job) and an endless one at a rate
// (periodic.Sequence, a streaming job) for Dataflow (--runner=dataflow --dry_run) through
// the command's own run function and checks the job it would submit: its type, the write,
// and every function and type registered.
func TestDataflowDryRun(t *testing.T) {
	stream := []string{"--stream=load", "--kinesis_region=eu-west-1"}
	for _, tc := range []struct {
		name  string
		flags []string
		want  dryrun.Want
	}{
		{"counted", []string{"--count=1000"}, dryrun.Want{
			Type:       dryrun.Batch,
			Transforms: []string{"kinesisio.Write/kinesisio.writeFn", "report.Failures"},
		}},
		{"endless", []string{"--count=0", "--rate=100"}, dryrun.Want{
			Type:            dryrun.Streaming,
			Transforms:      []string{"periodic.Sequence", "kinesisio.Write/kinesisio.writeFn", "report.Failures"},
			SplittableDoFns: []string{"periodic.Sequence/GenSequence/periodic.sequenceGenDoFn"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parse(t, append(stream, tc.flags...)...)
			dryrun.Check(t, dryrun.Run(t, func(ctx context.Context) error { return run(ctx, cfg) }), tc.want)
		})
	}
}
