package kinesisio

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestDiscoveryEmitsEachShardOnceWithThePreviousPollAsEventTime drives discovery directly:
// the first poll emits the initial shards at the minimum timestamp, a later poll emits only
// the shards a split created, stamped with the start of the poll before (they did not exist
// then), and the watermark is the start of the last completed poll.
func TestDiscoveryEmitsEachShardOnceWithThePreviousPollAsEventTime(t *testing.T) {
	const stream = "discovery"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	// Polls back to back: the interval only paces them
	// (TestDiscoveryPollsNoMoreOftenThanItsIntervalWhateverTheRunnerDoes tests that).
	cfg := buildConfig(targetRead, connect(srv, WithStartingPosition(TrimHorizon()), WithDescribeShardInterval(time.Millisecond)))
	fn := &discoverFn{Spec: newDiscoverySpec(stream, cfg)}
	ctx := context.Background()

	type emitted struct {
		et mtime.Time
		d  shardDescriptor
	}
	poll := func(rest discoveryRestriction, we *watermarkEstimator) ([]emitted, discoveryRestriction, int64) {
		t.Helper()
		var out []emitted
		rt := sdf.NewLockRTracker(&discoveryTracker{rest: rest})
		before := time.Now().UnixMilli()
		pc, err := fn.ProcessElement(ctx, we, rt, nil, func(et beam.EventTime, d shardDescriptor) { out = append(out, emitted{et, d}) })
		if err != nil || !pc.ShouldResume() {
			t.Fatalf("ProcessElement = %v, %v; want a resume", pc, err)
		}
		_, res, err := rt.TrySplit(0)
		if err != nil || res == nil {
			t.Fatalf("checkpoint = %v, %v", res, err)
		}
		return out, res.(discoveryRestriction), before
	}

	we := newWatermarkEstimator(mtime.MinTimestamp.Milliseconds())
	first, rest, poll1 := poll(discoveryRestriction{}, we)
	if len(first) != 2 || first[0].d.ShardID != "shardId-000000000000" || first[1].d.ShardID != "shardId-000000000001" {
		t.Fatalf("first poll emitted %+v", first)
	}
	for _, e := range first {
		if e.et != mtime.MinTimestamp || e.d.StartKind != startTrimHorizon || e.d.EndTimeMs != 0 {
			t.Errorf("initial shard emitted as %+v at %v", e.d, e.et)
		}
	}
	if wm := we.stateMs(); wm < poll1 || rest.LastPollMs != wm {
		t.Errorf("watermark after the first poll = %d, last poll %d, want the poll's start (>= %d)", wm, rest.LastPollMs, poll1)
	}

	// Nothing new: nothing emitted.
	again, rest, _ := poll(rest, we)
	if len(again) != 0 {
		t.Errorf("a poll without new shards emitted %+v", again)
	}
	prevPoll := rest.LastPollMs

	if _, err := srv.Client().SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(stream),
		ShardToSplit: aws.String("shardId-000000000000"), NewStartingHashKey: aws.String("1000")}); err != nil {
		t.Fatal(err)
	}
	children, rest, poll3 := poll(rest, we)
	if len(children) != 2 || children[0].d.ShardID != "shardId-000000000002" || children[1].d.ShardID != "shardId-000000000003" {
		t.Fatalf("poll after the split emitted %+v", children)
	}
	for _, c := range children {
		if c.et != mtime.FromMilliseconds(prevPoll) {
			t.Errorf("child %s emitted at %v, want the previous poll's start %v", c.d.ShardID, c.et, mtime.FromMilliseconds(prevPoll))
		}
		if c.d.ParentShardID != "shardId-000000000000" || c.d.StartKind != startTrimHorizon {
			t.Errorf("child descriptor %+v", c.d)
		}
	}
	if wm := we.stateMs(); wm < poll3 {
		t.Errorf("watermark %d is before the last poll's start %d", wm, poll3)
	}
	if len(rest.Shards) != 4 {
		t.Errorf("discovery remembers %v, want the 4 listed shards", rest.Shards)
	}
}
