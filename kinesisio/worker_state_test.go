package kinesisio

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/seqnum"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// memoHarness drives one shard's unbounded reader call after call, as a runner does,
// checkpointing after each call and collecting what it emits.
type memoHarness struct {
	t    *testing.T
	r    *shardReader
	fn   *shardFn
	d    shardDescriptor
	we   *watermarkEstimator
	got  []string
	rest shardRestriction
}

func newMemoHarness(t *testing.T, srv *kinesistest.Server, stream string, opts ...ReadOption) *memoHarness {
	t.Helper()
	cfg := buildConfig(targetRead, connect(srv, opts...))
	spec := newReadSpec(stream, cfg)
	r, err := newShardReader(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	d := shardDescriptor{Stream: stream, ShardID: "shardId-000000000000", StartKind: startTrimHorizon}
	return &memoHarness{t: t, r: r, fn: &shardFn{Spec: spec}, d: d, we: newWatermarkEstimator(mtime.MinTimestamp.Milliseconds()), rest: initialRestriction(d, 0)}
}

// call runs one ProcessElement call from h.rest, checkpoints, and makes the residual h.rest.
// It returns the continuation.
func (h *memoHarness) call(rest shardRestriction) sdf.ProcessContinuation {
	h.t.Helper()
	rt := sdf.NewLockRTracker(newShardTracker(rest))
	pc, err := h.r.process(context.Background(), h.we, rt, h.d, func(_ beam.EventTime, rec Record) {
		h.got = append(h.got, string(rec.Data))
	})
	if err != nil {
		h.t.Fatalf("process from %v: %v", rest, err)
	}
	if pc == nil || !pc.ShouldResume() {
		h.t.Fatalf("process from %v stopped (%v); want it to resume", rest, pc)
	}
	_, res, err := rt.TrySplit(0)
	if err != nil || res == nil {
		h.t.Fatalf("checkpoint after %v: %v, %v", rest, res, err)
	}
	h.rest = res.(shardRestriction)
	return pc
}

// putNumbered puts records "<prefix>-0" .. "<prefix>-<n-1>" to the stream's only shard.
func putNumbered(t *testing.T, srv *kinesistest.Server, stream, prefix string, n int) []string {
	t.Helper()
	var entries []types.PutRecordsRequestEntry
	var want []string
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		entries = append(entries, types.PutRecordsRequestEntry{Data: []byte(v), PartitionKey: aws.String("k")})
		want = append(want, v)
	}
	putAll(t, srv.Client(), stream, entries)
	return want
}

func assertSequence(t *testing.T, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %d records %v; want %d %v", len(got), got, len(want), want)
	}
}

// TestIteratorReusedAcrossCheckpoints reads 30 records in calls that each end at a
// checkpoint after one 3-record response, then polls the caught-up shard: every call
// continues the iterator the previous one left, so GetShardIterator is called once.
func TestIteratorReusedAcrossCheckpoints(t *testing.T) {
	const stream = "memo-reuse"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	want := putNumbered(t, srv, stream, "r", 30)
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(3), WithMaxRecordsPerFetch(3), WithPollInterval(time.Millisecond))
	for range 10 {
		h.call(h.rest)
	}
	assertSequence(t, h.got, want)
	// Caught up: three polls more, each from its own call.
	for range 3 {
		h.call(h.rest)
	}
	more := putNumbered(t, srv, stream, "s", 3)
	// The caught-up budget (a read per 250 ms) may hold the next calls back without a read.
	for i := 0; len(h.got) < len(want)+len(more) && i < 50; i++ {
		h.call(h.rest)
	}
	assertSequence(t, h.got, append(want, more...))
	if n := srv.CallCount("GetShardIterator"); n != 1 {
		t.Errorf("%d GetShardIterator calls for all the calls on one shard; want 1", n)
	}
}

// TestIteratorNotReusedAtAnotherPosition resumes an earlier checkpoint (as a retried bundle
// does) and the same position under another read: neither may continue the iterator parked
// for the latest checkpoint of the first read; each opens its own and reads exactly its
// range.
func TestIteratorNotReusedAtAnotherPosition(t *testing.T) {
	const stream = "memo-position"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	want := putNumbered(t, srv, stream, "r", 9)
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(3), WithMaxRecordsPerFetch(3))
	first := h.rest
	h.call(first)
	afterThree := h.rest
	h.call(afterThree) // parks an iterator at record 6
	assertSequence(t, h.got, want[:6])

	// A retry of the bundle that started after record 3.
	h.got = nil
	h.call(afterThree)
	assertSequence(t, h.got, want[3:6])
	if n := srv.CallCount("GetShardIterator"); n != 2 {
		t.Errorf("%d GetShardIterator calls; want 2 (the first open, then the retry's own)", n)
	}

	// Another read of the same stream, at the checkpoint the first read's iterator is parked at.
	other := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(3), WithMaxRecordsPerFetch(3))
	other.call(h.rest)
	assertSequence(t, other.got, want[6:9])
	if n := srv.CallCount("GetShardIterator"); n != 3 {
		t.Errorf("%d GetShardIterator calls; want 3 (another read opens its own)", n)
	}
	// The first read still continues its own.
	h.got = nil
	h.call(h.rest)
	assertSequence(t, h.got, want[6:9])
	if n := srv.CallCount("GetShardIterator"); n != 3 {
		t.Errorf("%d GetShardIterator calls; want still 3", n)
	}
}

// TestExpiredParkedIteratorRenewedFromTheRestriction parks an iterator, lets the server's
// clock pass its lifetime, and resumes: the reader renews it from the restriction's position
// and reads exactly the rest.
func TestExpiredParkedIteratorRenewedFromTheRestriction(t *testing.T) {
	const stream = "memo-expired"
	clock := kinesistest.NewManualClock(time.Now())
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1), kinesistest.WithClock(clock))
	want := putNumbered(t, srv, stream, "r", 6)
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(3), WithMaxRecordsPerFetch(3))
	h.call(h.rest)
	clock.Advance(6 * time.Minute)
	h.call(h.rest)
	assertSequence(t, h.got, want)
	if n := srv.CallCount("GetShardIterator"); n != 2 {
		t.Errorf("%d GetShardIterator calls; want 2 (the open and the renewal)", n)
	}
}

// TestReadsAgainWithinTheBudgetAfterRecordsAtTheTip: with a poll interval far longer than
// the test, a call that finds records at the tip of the shard asks to read again within the
// caught-up budget (tipReadGap), and waits the poll interval only after the empty answer.
func TestReadsAgainWithinTheBudgetAfterRecordsAtTheTip(t *testing.T) {
	const stream = "adaptive"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	want := putNumbered(t, srv, stream, "r", 5)
	h := newMemoHarness(t, srv, stream, WithPollInterval(time.Hour))
	pc := h.call(h.rest)
	assertSequence(t, h.got, want)
	if d := pc.ResumeDelay(); d > tipReadGap {
		t.Errorf("resume delay %v after records at the tip; want at most the budget's %v", d, tipReadGap)
	}
	// The next calls wait out the budget (the pacer holds early ones back), then read.
	for i := 0; srv.CallCount("GetRecords") < 2 && i < 20; i++ {
		pc = h.call(h.rest)
	}
	if n := srv.CallCount("GetRecords"); n != 2 {
		t.Fatalf("%d GetRecords calls; want 2: the records, then the empty answer", n)
	}
	if pc.ResumeDelay() < 59*time.Minute {
		t.Errorf("resume delay %v after an empty answer; want the poll interval, 1h", pc.ResumeDelay())
	}
}

// TestTipBudget checks the caught-up read budget on a synthetic clock: tip reads at least
// tipReadGap apart.
func TestTipBudget(t *testing.T) {
	p := &pacer{next: map[callKey]time.Time{}, tips: map[shardKey]time.Time{}}
	k := shardKey{read: "r", stream: "s", shard: "shardId-000000000000"}
	t0 := time.Unix(1000, 0)
	if at := p.nextTipRead(k); !at.IsZero() {
		t.Fatalf("first tip read at %v; want now", at)
	}
	p.tipRead(k, t0)
	if at := p.nextTipRead(k); !at.Equal(t0.Add(tipReadGap)) {
		t.Errorf("next tip read at %v; want %v", at, t0.Add(tipReadGap))
	}
	p.tipRead(k, t0.Add(-time.Second)) // a late report of an older read changes nothing
	if at := p.nextTipRead(k); !at.Equal(t0.Add(tipReadGap)) {
		t.Errorf("next tip read at %v after an older read; want %v", at, t0.Add(tipReadGap))
	}
	if tipReadGap*4 < time.Second || tipReadGap*5 <= time.Second {
		t.Errorf("budget %v between reads allows more than 4 a second", tipReadGap)
	}
	p.forget(readsOf(k))
	if at := p.nextTipRead(k); !at.IsZero() {
		t.Errorf("a forgotten shard must read at once, got %v", at)
	}
}

func TestEstimateBacklog(t *testing.T) {
	// 3 MB over 3 s of arrival time, of which the first record's 1,000 bytes at its start:
	// 2,999,000 bytes in 3,000 ms.
	samples := []rateSample{{bytes: 1e6, head: 1000, firstMs: 0, last: 1000}, {bytes: 2e6, head: 10, firstMs: 1000, last: 3000}}
	for _, c := range []struct {
		behind int64
		want   float64
	}{{0, 0}, {-1, 0}, {3000, 2999000}, {1500, 1499500}} {
		if got := estimateBacklog(samples, c.behind); got != c.want {
			t.Errorf("estimateBacklog(%d ms behind) = %v; want %v", c.behind, got, c.want)
		}
	}
	if got := estimateBacklog(nil, 1000); got != 0 {
		t.Errorf("estimateBacklog without samples = %v; want 0", got)
	}
	// Records that all arrived within one millisecond count as their bytes per millisecond.
	if got := estimateBacklog([]rateSample{{bytes: 10, head: 5, firstMs: 5, last: 5}}, 3); got != 30 {
		t.Errorf("estimateBacklog of one instant = %v; want 30", got)
	}
}

func TestObserveKeepsTheRecentWindow(t *testing.T) {
	k := shardKey{read: "r", stream: "s", shard: "shardId-000000000000"}
	c := &memoCache{memos: map[shardKey]*shardMemo{}}
	now := time.Now()
	// An old burst at 10 bytes/ms, then 40 s later a steady 1 byte/ms.
	c.observe(k, rateSample{bytes: 10000, firstMs: 0, last: 1000}, 1, 1, now)
	var b float64
	for i := range int64(10) {
		start := 41000 + i*1000
		b = c.observe(k, rateSample{bytes: 1000, firstMs: start, last: start + 1000}, 1, 2000, now)
	}
	// The old burst has left the 30 s window: 10,000 bytes over 10 s.
	if b != 2000 {
		t.Errorf("backlog %v; want 2000 (1 byte/ms × 2000 ms)", b)
	}
	if b := c.observe(k, rateSample{}, 0, 0, now); b != 0 {
		t.Errorf("backlog when caught up %v; want 0", b)
	}
	for i := range int64(2 * rateSamples) {
		c.observe(k, rateSample{bytes: 1, firstMs: 60000 + i, last: 60000 + i}, 1, 1, now)
	}
	if n := len(c.memos[k].samples); n != rateSamples {
		t.Errorf("%d samples kept; want %d", n, rateSamples)
	}
}

// TestRestrictionSizeIsTheBacklog reads part of a shard's records and checks the size the
// runner is given for the residual: the estimate from MillisBehindLatest and the byte rate
// while behind, 0 once caught up, the nominal 1 at a position this worker has not read to.
func TestRestrictionSizeIsTheBacklog(t *testing.T) {
	const stream = "memo-backlog"
	clock := kinesistest.NewManualClock(time.Now().Add(-time.Minute))
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1), kinesistest.WithClock(clock))
	// 10 records of 100 bytes, one every second of arrival time.
	client := srv.Client()
	for i := range 10 {
		putAll(t, client, stream, []types.PutRecordsRequestEntry{{Data: make([]byte, 100), PartitionKey: aws.String(fmt.Sprint(i))}})
		clock.Advance(time.Second)
	}
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(5), WithMaxRecordsPerFetch(5))
	h.call(h.rest)
	// 5 records read, arriving over 4 s: 400 bytes after the first in 4,000 ms. The first
	// unread record arrived at +5 s and the clock is at +10 s: 5,000 ms behind.
	if got, want := h.fn.RestrictionSize(h.d, h.rest), 5000.0*400/4000; got != want {
		t.Errorf("RestrictionSize while behind = %v; want %v (the 500 bytes unread)", got, want)
	}
	h.call(h.rest) // the other 5, then caught up
	if got := h.fn.RestrictionSize(h.d, h.rest); got != 0 {
		t.Errorf("RestrictionSize when caught up = %v; want 0", got)
	}
	if got := h.fn.RestrictionSize(h.d, initialRestriction(h.d, 0)); got != 1 {
		t.Errorf("RestrictionSize at a position not read here = %v; want the nominal 1", got)
	}
	if len(h.got) != 10 {
		t.Errorf("read %d records; want 10", len(h.got))
	}
}

// TestBacklogFollowsAProducerThatOutrunsTheReader puts 30 records of 60 to 140 bytes (20 ms
// apart on the server's clock) for every 20 the reader reads, and after each of the
// reader's calls compares the residual's RestrictionSize with the bytes the shard really
// holds after the checkpoint: within ±25 % once the reader has seen a second of arrivals.
func TestBacklogFollowsAProducerThatOutrunsTheReader(t *testing.T) {
	const stream = "memo-outrun"
	clock := kinesistest.NewManualClock(time.Now().Add(-time.Hour))
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1), kinesistest.WithClock(clock))
	client := srv.Client()
	// Without read-ahead: its pages are as fresh as its last answer, which here came before
	// the records put between calls (TestReadAheadBacklogIsTheHeldBytesAndTheNewestAnswer).
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(20), WithMaxRecordsPerFetch(20), WithoutReadAhead())
	n := 0
	var worst float64
	for step := range 40 {
		for range 30 {
			size := 60 + (n*37)%81 // 60..140 bytes, deterministic
			n++
			putAll(t, client, stream, []types.PutRecordsRequestEntry{{Data: make([]byte, size), PartitionKey: aws.String("k")}})
			clock.Advance(20 * time.Millisecond)
		}
		h.call(h.rest)
		if step < 3 {
			continue // fewer than 60 records, about a second of arrivals, seen yet
		}
		worst = max(worst, backlogDeviation(t, h, srv, stream, step))
	}
	t.Logf("%d records put, %d read; worst deviation of the backlog from the true unread bytes %.1f %%", n, len(h.got), 100*worst)
	if len(h.got) != 40*20 {
		t.Errorf("read %d records; want %d", len(h.got), 40*20)
	}
}

// backlogDeviation compares the backlog the read reports for h's residual (RestrictionSize)
// with the bytes the server holds after its start, fails the test beyond ±25 %, and returns
// the deviation's size.
func backlogDeviation(t *testing.T, h *memoHarness, srv *kinesistest.Server, stream string, step int) float64 {
	t.Helper()
	unread := unreadBytes(t, srv, stream, h.d.ShardID, h.rest)
	got := h.fn.RestrictionSize(h.d, h.rest)
	dev := got/float64(unread) - 1
	if dev > 0.25 || dev < -0.25 {
		t.Errorf("step %d: RestrictionSize %.0f, true unread bytes %d (%+.0f %%)", step, got, unread, 100*dev)
	}
	return max(dev, -dev)
}

// unreadBytes is the data of the records the server holds in shard after the start of the
// residual rest.
func unreadBytes(t testing.TB, srv *kinesistest.Server, stream, shard string, rest shardRestriction) int64 {
	t.Helper()
	stored, err := srv.ShardRecords(stream, shard)
	if err != nil {
		t.Fatal(err)
	}
	var unread int64
	for _, r := range stored {
		if seqnum.Compare(r.SequenceNumber, rest.StartSeq) > 0 {
			unread += int64(len(r.Data))
		}
	}
	return unread
}

// TestEnhancedFanOutBacklogIsTheUnreadBytes subscribes to a shard holding 3 MB (3,000
// records of 1,000 bytes that arrived over a minute), so that the service's events, of at
// most 1 MiB each, each report how far they are behind the tip. The reader reads 100
// records a call, stopping inside events; after each call the residual's RestrictionSize
// (MillisBehindLatest × byte rate, plus the rest of the event the call stopped inside) is
// within ±25 % of the bytes after the checkpoint, and 0 once the reader is caught up.
func TestEnhancedFanOutBacklogIsTheUnreadBytes(t *testing.T) {
	const stream = "memo-efo-backlog"
	// Every event is sent while the reader is behind, and its MillisBehindLatest stands. The
	// last records arrive 30 s ahead of the worker's clock, so that however slowly this test
	// runs no record's age on the worker's clock is taken for in-flight events (eventLagMs,
	// TestEventLag).
	clock := kinesistest.NewManualClock(time.Now().Add(-29 * time.Second))
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1), kinesistest.WithClock(clock))
	client := srv.Client()
	for range 60 {
		var entries []types.PutRecordsRequestEntry
		for range 50 {
			entries = append(entries, types.PutRecordsRequestEntry{Data: make([]byte, 1000), PartitionKey: aws.String("k")})
		}
		putAll(t, client, stream, entries)
		clock.Advance(time.Second)
	}
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerFetch(100), WithEnhancedFanOut("backlog"))
	var worst float64
	for step := range 29 {
		h.call(h.rest)
		worst = max(worst, backlogDeviation(t, h, srv, stream, step))
	}
	h.call(h.rest) // the last 100 records
	h.call(h.rest) // caught up
	if got := h.fn.RestrictionSize(h.d, h.rest); got != 0 {
		t.Errorf("RestrictionSize when caught up = %v; want 0", got)
	}
	t.Logf("worst deviation of the backlog from the true unread bytes %.1f %%", 100*worst)
	if len(h.got) != 3000 {
		t.Errorf("read %d records; want 3000", len(h.got))
	}
}

// TestEventLag checks how far an enhanced fan-out reader takes itself to be behind after an
// event: its MillisBehindLatest, except for an event sent caught up whose last record is
// more than half a second old when it is read (the service sent it long before the reader read
// it), where it is the record's age.
func TestEventLag(t *testing.T) {
	now := time.UnixMilli(1_700_000_100_000)
	event := func(behind int64, ageMs ...int64) *types.SubscribeToShardEvent {
		ev := &types.SubscribeToShardEvent{MillisBehindLatest: aws.Int64(behind)}
		for _, a := range ageMs {
			ev.Records = append(ev.Records, types.Record{ApproximateArrivalTimestamp: aws.Time(now.Add(-time.Duration(a) * time.Millisecond))})
		}
		return ev
	}
	for _, tc := range []struct {
		name string
		ev   *types.SubscribeToShardEvent
		want int64
	}{
		{"caught up, no records", event(0), 0},
		{"caught up, read at once", event(0, 90, 70), 0},
		{"behind when sent, read at once", event(5000, 5100, 5050), 5000},
		{"within the tolerance", event(0, 700, 450), 0},
		{"read 3 s after it was sent caught up", event(0, 3200, 3000), 3000},
		{"read late, behind when sent", event(2000, 9000, 8000), 2000},
	} {
		if got := aws.ToInt64(eventLagMs(tc.ev, now)); got != tc.want {
			t.Errorf("%s: lag %d ms, want %d", tc.name, got, tc.want)
		}
	}
}

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
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	cfg := buildConfig(targetRead, connect(srv, WithStartingPosition(TrimHorizon()), WithDescribeShardInterval(interval)))
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
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	ctx := context.Background()
	cfg := buildConfig(targetRead, connect(srv, WithStartingPosition(TrimHorizon()), WithPollInterval(interval)))
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
