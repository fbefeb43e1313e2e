package kinesisio

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x1(recordOne)
	register.DoFn2x0[typex.Window, int](&firedFn{})
}

func recordOne(Record) int { return 1 }

// firing is one window result seen by firedFn: the window's end, its count and when it
// fired (wall time).
type firing struct {
	end   time.Time
	count int
	at    time.Time
}

var (
	firingsMu sync.Mutex
	firings   = map[string][]firing{}
)

// firedFn records when each window's count arrives.
type firedFn struct{ Key string }

func (fn *firedFn) ProcessElement(w typex.Window, n int) {
	firingsMu.Lock()
	defer firingsMu.Unlock()
	firings[fn.Key] = append(firings[fn.Key], firing{end: w.MaxTimestamp().ToTime(), count: n, at: time.Now()})
}

// TestReadWindowsFireWhileReadingWithAnIdleShard counts records in 500ms event-time windows
// downstream of an unbounded Read of two shards, one of which never receives a record.
// Windows must fire while the read runs: the idle shard's watermark advances on its own.
func TestReadWindowsFireWhileReadingWithAnIdleShard(t *testing.T) {
	const stream = "windows"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	client := srv.Client()
	const readTime = 5 * time.Second
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(readTime),
		WithIdleThreshold(200*time.Millisecond), WithPollInterval(50*time.Millisecond),
		WithDescribeShardInterval(100*time.Millisecond))...)
	ones := beam.ParDo(s, recordOne, beam.WindowInto(s, window.NewFixedWindows(500*time.Millisecond), recs))
	beam.ParDo0(s, &firedFn{Key: t.Name()}, stats.Sum(s, ones))
	// Forget the firings of an earlier run of this test in the process (go test -count).
	firingsMu.Lock()
	delete(firings, t.Name())
	firingsMu.Unlock()

	t0 := time.Now()
	const written = 25
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitFor(t, "the read to start", func() bool { return srv.CallCount("GetRecords") > 0 })
		tick := time.NewTicker(100 * time.Millisecond) // the pace of the producer, not synchronisation
		defer tick.Stop()
		for i := range written {
			<-tick.C
			// Hash key 0 always lands in shard 0; shard 1 stays idle.
			if _, err := client.PutRecord(context.Background(), &kinesis.PutRecordInput{
				StreamName: aws.String(stream), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String("0"),
				Data: []byte(strconv.Itoa(i)),
			}); err != nil {
				t.Errorf("PutRecord: %v", err)
				return
			}
		}
	}()
	err := ptest.Run(p)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	end := t0.Add(readTime)
	firingsMu.Lock()
	got := firings[t.Name()]
	firingsMu.Unlock()
	total, early := 0, 0
	for _, f := range got {
		total += f.count
		if f.at.Before(end) {
			early++
		}
	}
	if total != written {
		t.Errorf("windows counted %d records, want %d", total, written)
	}
	// 25 records over 2.5s span at least 5 windows; all but the last couple must have fired
	// before the read's end, i.e. while it was running.
	if early < 3 {
		t.Errorf("%d of %d windows fired before the read ended at %v; the watermark did not advance while reading: %+v", early, len(got), end, got)
	}
	if ss, _ := srv.ShardRecords(stream, "shardId-000000000001"); len(ss) != 0 {
		t.Fatalf("shard 1 got %d records; it was meant to stay idle", len(ss))
	}
}

// TestReadWatermarkHoldsWhileTheStreamIsUnreadable drives the shard reader directly (not in
// a pipeline): while every GetRecords fails with 5xx, the unbounded reader asks to be
// resumed once its retries run out (a bounded one fails), and the watermark stays where it
// was; once reads succeed on the idle shard it advances.
func TestReadWatermarkHoldsWhileTheStreamIsUnreadable(t *testing.T) {
	const stream = "unreadable"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	ctx := context.Background()
	cfg := buildConfig(targetRead, connect(srv, WithRetries(2, time.Millisecond, 2*time.Millisecond),
		WithIdleThreshold(time.Second), WithStartingPosition(TrimHorizon())))
	r, err := newShardReader(ctx, newReadSpec(stream, cfg))
	if err != nil {
		t.Fatal(err)
	}
	d := shardDescriptor{Stream: stream, ShardID: "shardId-000000000000", StartKind: startTrimHorizon}
	start := time.Now().Add(-time.Hour).UnixMilli()
	we := newWatermarkEstimator(start)
	emit := func(beam.EventTime, Record) { t.Errorf("a record was emitted from an empty shard") }

	srv.SetFaults(kinesistest.Faults{Seed: 1, ServerErrorRate: 1, Operations: []string{"GetRecords"}})
	rt := sdf.NewLockRTracker(newShardTracker(initialRestriction(d, 0)))
	if _, err := r.process(ctx, nil, rt, d, emit); err == nil {
		t.Fatalf("a bounded read of an unreadable stream returned no error")
	}
	rt = sdf.NewLockRTracker(newShardTracker(initialRestriction(d, 0)))
	if pc, err := r.process(ctx, we, rt, d, emit); err != nil || pc == nil || !pc.ShouldResume() {
		t.Fatalf("an unbounded read of an unreadable stream = %v, %v; want a resume", pc, err)
	}
	if got := we.stateMs(); got != start {
		t.Errorf("watermark moved from %d to %d while reads failed", start, got)
	}

	srv.SetFaults(kinesistest.Faults{})
	before := time.Now()
	rt = sdf.NewLockRTracker(newShardTracker(initialRestriction(d, 0)))
	pc, err := r.process(ctx, we, rt, d, emit)
	if err != nil || pc == nil || !pc.ShouldResume() {
		t.Fatalf("process on an idle shard = %v, %v; want a resume", pc, err)
	}
	if got, want := we.stateMs(), before.Add(-time.Second).UnixMilli(); got < want || got > time.Now().UnixMilli() {
		t.Errorf("idle watermark = %d, want now minus the 1s threshold (at least %d)", got, want)
	}
}

func TestWatermarkEstimatorOnlyMovesForward(t *testing.T) {
	e := newWatermarkEstimator(1000)
	e.ObserveTimestamp(time.UnixMilli(900))
	if e.stateMs() != 1000 {
		t.Errorf("watermark went back to %d", e.stateMs())
	}
	e.ObserveTimestamp(time.UnixMilli(1500))
	// Caught up, but the last record is only 100ms older than the poll: not idle yet.
	e.observeCaughtUp(time.UnixMilli(1600), 200*time.Millisecond)
	if e.stateMs() != 1500 {
		t.Errorf("watermark = %d after a short idle period, want 1500", e.stateMs())
	}
	e.observeCaughtUp(time.UnixMilli(2000), 200*time.Millisecond)
	if e.stateMs() != 1800 {
		t.Errorf("watermark = %d after an idle period, want 1800", e.stateMs())
	}
	if !e.CurrentWatermark().Equal(time.UnixMilli(1800)) {
		t.Errorf("CurrentWatermark = %v", e.CurrentWatermark())
	}
	pol := watermarkPolicy{kind: watermarkProcessingTime}
	pol.afterRead(e, time.UnixMilli(2500), 3, false)
	if e.stateMs() != 2500 {
		t.Errorf("processing-time watermark = %d, want 2500", e.stateMs())
	}
}

// TestReadWindowsKeepTheRecordsOfALaggingShard counts records in event-time windows of a
// backlog in which one shard holds 100 times the records of the other, read a few records a
// call: the small shard catches up and goes idle long before the large one is read, and no
// record of the large one may arrive behind the watermark (a GroupByKey drops such records).
// Prism sets a stage's watermark from the residuals of the last bundle it finished, not from
// all of them, so each shard's watermark must hold the others' back.
func TestReadWindowsKeepTheRecordsOfALaggingShard(t *testing.T) {
	const stream = "lagging"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	client := srv.Client()
	const large, small = 1500, 15
	put := func(hashKey string, n int) {
		for i := range n {
			if _, err := client.PutRecord(context.Background(), &kinesis.PutRecordInput{
				StreamName: aws.String(stream), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(hashKey),
				Data: []byte(strconv.Itoa(i)),
			}); err != nil {
				t.Fatalf("PutRecord: %v", err)
			}
		}
	}
	put("0", large)                                       // shard 0
	put("340282366920938463463374607431768211455", small) // shard 1, the top of the hash range
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(8*time.Second),
		WithIdleThreshold(200*time.Millisecond), WithPollInterval(20*time.Millisecond), WithMaxRecordsPerFetch(5),
		WithDescribeShardInterval(100*time.Millisecond))...)
	ones := beam.ParDo(s, recordOne, beam.WindowInto(s, window.NewFixedWindows(100*time.Millisecond), recs))
	beam.ParDo0(s, &firedFn{Key: t.Name()}, stats.Sum(s, ones))
	firingsMu.Lock()
	delete(firings, t.Name())
	firingsMu.Unlock()
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	firingsMu.Lock()
	got := firings[t.Name()]
	firingsMu.Unlock()
	total := 0
	for _, f := range got {
		total += f.count
	}
	if total != large+small {
		t.Fatalf("windows counted %d records, want %d: %d were dropped behind the watermark", total, large+small, large+small-total)
	}
}
