package kinesisio

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
)

// impatientRunner calls process back to back, as Flink does while it drains a job (its
// processing-time timers fire at once, whatever delay ResumeProcessingIn asked for): each
// call resumes the checkpoint the previous one left, until the calls have taken span. It
// returns how many calls it made and how long they took.
func impatientRunner(t *testing.T, span time.Duration, rest any, process func(rt *sdf.LockRTracker) (sdf.ProcessContinuation, error), tracker func(any) sdf.RTracker) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	n := 0
	for time.Since(start) < span {
		rt := sdf.NewLockRTracker(tracker(rest))
		pc, err := process(rt)
		if err != nil {
			t.Fatalf("call %d: %v", n, err)
		}
		if pc == nil || !pc.ShouldResume() {
			t.Fatalf("call %d stopped (%v); want it to resume", n, pc)
		}
		_, res, err := rt.TrySplit(0)
		if err != nil || res == nil {
			t.Fatalf("call %d: checkpoint %v, %v", n, res, err)
		}
		rest = res
		n++
	}
	return n, time.Since(start)
}

// maxCalls is the most calls an interval allows in elapsed: one at the start, then one per
// full interval.
func maxCalls(elapsed, interval time.Duration) int { return 1 + int(elapsed/interval) }

// TestDiscoveryPollsNoMoreOftenThanItsIntervalWhateverTheRunnerDoes resumes discovery back
// to back for 1.5 s with a 300 ms interval: ListShards must be called at most once per
// interval, and polls must still happen.
func TestDiscoveryPollsNoMoreOftenThanItsIntervalWhateverTheRunnerDoes(t *testing.T) {
	const stream = "impatient-discovery"
	const interval = 300 * time.Millisecond
	srv := startServer(t, stream, 2)
	cfg := buildConfig("kinesisio.Read", dirRead, connect(srv, WithStartingPosition(TrimHorizon()), WithDescribeShardInterval(interval)))
	fn := &discoverFn{Spec: newDiscoverySpec(stream, cfg)}
	ctx := context.Background()
	we := newWatermarkEstimator(mtime.MinTimestamp.Milliseconds())
	emitted := 0
	calls, elapsed := impatientRunner(t, 1500*time.Millisecond, discoveryRestriction{},
		func(rt *sdf.LockRTracker) (sdf.ProcessContinuation, error) {
			return fn.ProcessElement(ctx, we, rt, nil, func(beam.EventTime, shardDescriptor) { emitted++ })
		},
		func(r any) sdf.RTracker { return &discoveryTracker{rest: r.(discoveryRestriction)} })
	polls := srv.CallCount("ListShards")
	t.Logf("%d ProcessElement calls in %v made %d ListShards calls", calls, elapsed, polls)
	if polls > maxCalls(elapsed, interval) || polls < 2 {
		t.Errorf("%d ListShards calls in %v with a %v interval; want 2 to %d", polls, elapsed, interval, maxCalls(elapsed, interval))
	}
	if calls > maxCalls(elapsed, pacingSleepMax)+polls {
		t.Errorf("%d ProcessElement calls in %v: an early call must wait up to %v before it returns", calls, elapsed, pacingSleepMax)
	}
	if emitted != 2 {
		t.Errorf("discovery emitted %d shards, want each of the 2 once", emitted)
	}
}

// TestShardReaderPollsNoMoreOftenThanItsIntervalWhateverTheRunnerDoes resumes the reader of
// a caught-up shard back to back for 1.5 s with a 300 ms poll interval: GetRecords and
// GetShardIterator must each be called at most once per interval.
func TestShardReaderPollsNoMoreOftenThanItsIntervalWhateverTheRunnerDoes(t *testing.T) {
	const stream = "impatient-reader"
	const interval = 300 * time.Millisecond
	srv := startServer(t, stream, 1)
	ctx := context.Background()
	cfg := buildConfig("kinesisio.Read", dirRead, connect(srv, WithStartingPosition(TrimHorizon()), WithPollInterval(interval)))
	r, err := newShardReader(ctx, newReadSpec(stream, cfg))
	if err != nil {
		t.Fatal(err)
	}
	d := shardDescriptor{Stream: stream, ShardID: "shardId-000000000000", StartKind: startTrimHorizon}
	we := newWatermarkEstimator(mtime.MinTimestamp.Milliseconds())
	calls, elapsed := impatientRunner(t, 1500*time.Millisecond, initialRestriction(d, 0),
		func(rt *sdf.LockRTracker) (sdf.ProcessContinuation, error) {
			return r.process(ctx, we, rt, d, func(beam.EventTime, Record) { t.Errorf("a record from an empty shard") })
		},
		func(x any) sdf.RTracker { return newShardTracker(x.(shardRestriction)) })
	reads, iterators := srv.CallCount("GetRecords"), srv.CallCount("GetShardIterator")
	t.Logf("%d ProcessElement calls in %v made %d GetRecords and %d GetShardIterator calls", calls, elapsed, reads, iterators)
	if reads > maxCalls(elapsed, interval) || reads < 2 {
		t.Errorf("%d GetRecords calls in %v with a %v poll interval; want 2 to %d", reads, elapsed, interval, maxCalls(elapsed, interval))
	}
	if calls > maxCalls(elapsed, pacingSleepMax)+reads {
		t.Errorf("%d ProcessElement calls in %v: an early call must wait up to %v before it returns", calls, elapsed, pacingSleepMax)
	}
	if iterators > maxCalls(elapsed, interval) {
		t.Errorf("%d GetShardIterator calls in %v with a %v poll interval; want at most %d", iterators, elapsed, interval, maxCalls(elapsed, interval))
	}
}
