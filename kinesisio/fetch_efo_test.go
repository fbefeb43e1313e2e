package kinesisio

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// withoutSubscriptionReuse makes every subscription close at the end of its ProcessElement
// call until the test ends, as for a residual resumed on another worker, to measure what
// keeping them open saves.
func withoutSubscriptionReuse(t *testing.T) {
	dropSubscriptions.Store(true)
	t.Cleanup(func() { dropSubscriptions.Store(false) })
}

// waitSubs waits until cond holds for the server's open subscriptions.
func waitSubs(t *testing.T, srv *kinesistest.Server, what string, cond func([]kinesistest.Subscription) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.WaitSubscriptions(ctx, cond); err != nil {
		t.Errorf("waiting for %s: %v", what, err)
	}
}

// TestReadBoundedWithEnhancedFanOutReturnsExactlyTheWrittenRecords reads plain records and
// KPL aggregates through SubscribeToShard, registering the consumer by name (CREATING for a
// while first), then reads again with the same name, which must reuse that consumer.
func TestReadBoundedWithEnhancedFanOutReturnsExactlyTheWrittenRecords(t *testing.T) {
	const stream = "efo-bounded"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 3), kinesistest.WithConsumerActivationDelay(300*time.Millisecond))
	w := newWorkload(t, "b", 3000, 200, 10)
	putAll(t, srv.Client(), stream, w.entries)
	want := expected(t, srv, stream, w.aggregates, nil)
	if len(want) != 5000 {
		t.Fatalf("workload has %d user records, want 5000", len(want))
	}

	var arn string
	for run := range 2 {
		p, s := beam.NewPipelineWithRoot()
		recs := ReadBounded(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithEnhancedFanOut("beam-efo"))...)
		passert.Equals(s, canonical(s, recs), anys(want)...)
		res, err := ptest.RunWithMetrics(p)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		// The records metric is not asserted here: Prism v2.77 drops the final values of a
		// metric whose short id it first sees in a bundle's final response
		// (jobservices/metrics.go, contributeMetrics skips unknown short ids), and the
		// subscription waits make this read's shards short, separate bundles. The output
		// above is exact; the metric is asserted in the polling tests, whose bundles report
		// progress first.
		if n := counter(res, "getrecords_calls"); n != 0 {
			t.Errorf("run %d: %d GetRecords calls; enhanced fan-out must not poll", run, n)
		}
		consumers, err := srv.Consumers(stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(consumers) != 1 || consumers[0].Name != "beam-efo" || consumers[0].Status != "ACTIVE" {
			t.Fatalf("run %d: consumers = %+v, want one ACTIVE consumer beam-efo", run, consumers)
		}
		if run == 0 {
			arn = consumers[0].ARN
		} else if consumers[0].ARN != arn {
			t.Errorf("the second read registered a new consumer %s instead of reusing %s", consumers[0].ARN, arn)
		}
	}
	if n := srv.CallCount("RegisterStreamConsumer"); n < 1 {
		t.Errorf("RegisterStreamConsumer was called %d times; the first read must register the consumer", n)
	}
	// The second read comes within the service's 5-second window after the first read's
	// subscriptions, so its first calls may be refused with ResourceInUseException once.
	if n := srv.CallCount("SubscribeToShard"); n < 6 || n > 9 {
		t.Errorf("%d SubscribeToShard calls, want one per shard and read (6) plus at most one refused call per shard", n)
	}
}

// TestReadWithEnhancedFanOutFollowsSplitAndMergeReadingEveryRecordOnce is the polling
// reshard test through SubscribeToShard: parents end with ChildShards and the children are
// subscribed as discovery finds them. Every checkpoint (every 200ms) continues the open
// subscription, so each shard is subscribed once.
func TestReadWithEnhancedFanOutFollowsSplitAndMergeReadingEveryRecordOnce(t *testing.T) {
	const stream = "efo-reshard"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 3))
	arn, err := srv.RegisterConsumer(stream, "pre-registered")
	if err != nil {
		t.Fatal(err)
	}
	client := srv.Client()
	aggs := map[string][]kpl.UserRecord{}
	write := func(prefix string) {
		w := newWorkload(t, prefix, 300, 20, 5)
		for k, v := range w.aggregates {
			aggs[k] = v
		}
		putAll(t, client, stream, w.entries)
	}
	write("before")

	const readTime = 4 * time.Second
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(readTime),
		WithDescribeShardInterval(100*time.Millisecond), WithMaxFetchTime(200*time.Millisecond),
		WithEnhancedFanOutConsumerARN(arn))...)
	sink := collect(s, t.Name(), recs)

	t0 := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitSubs(t, srv, "the three shards to be subscribed", func(subs []kinesistest.Subscription) bool { return len(subs) == 3 })
		writeWhileResharding(t, client, stream, write)
	}()
	res, err := ptest.RunWithMetrics(p)
	<-done
	if err != nil {
		t.Fatal(err)
	}

	assertReshardedReadExact(t, srv, stream, aggs, t0.Add(readTime), sink.get())
	// Six shards, each subscribed once; checkpoints continue the open subscription.
	if n := srv.CallCount("SubscribeToShard"); n != 6 {
		t.Errorf("%d SubscribeToShard calls, want 6 (one per shard)", n)
	}
	if n := counter(res, "subscriptions_reused"); n == 0 {
		t.Errorf("no checkpoint continued an open subscription")
	}
	t.Logf("SubscribeToShard calls: %d, subscriptions continued across checkpoints: %d", srv.CallCount("SubscribeToShard"), counter(res, "subscriptions_reused"))
}

// TestEnhancedFanOutResumePositions checks where subscriptions start: a checkpoint inside an
// aggregate resubscribes AT its sequence number and skips the claimed user records, one
// after a whole record AFTER it, and a continuation number wins over both; and that the key
// a subscription is left open under is the start of the residual the tracker splits off.
func TestEnhancedFanOutResumePositions(t *testing.T) {
	const seq = "49590338271490256608559692538361571095921575989136588898"
	rest := shardRestriction{StartKind: startAtTimestamp, StartTimeMs: 1700000000000}
	for _, tc := range []struct {
		name     string
		last     *recordClaim
		cont     string
		wantType types.ShardIteratorType
		wantSeq  string
		wantSkip *recordPosition
	}{
		{"nothing claimed", nil, "", types.ShardIteratorTypeAtTimestamp, "", nil},
		{"inside an aggregate", &recordClaim{Pos: recordPosition{Seq: seq, Sub: 2}}, "", types.ShardIteratorTypeAtSequenceNumber, seq, &recordPosition{Seq: seq, Sub: 2}},
		{"after a whole record", &recordClaim{Pos: recordPosition{Seq: seq, Sub: 4}, Last: true}, "", types.ShardIteratorTypeAfterSequenceNumber, seq, &recordPosition{Seq: seq, Sub: maxSubSequence}},
		{"continuation", &recordClaim{Pos: recordPosition{Seq: seq, Sub: 2}}, "49590338271490256608559692538361571095921575989136588899", types.ShardIteratorTypeAfterSequenceNumber, "49590338271490256608559692538361571095921575989136588899", nil},
	} {
		st := &readState{rest: rest, lastClaim: tc.last}
		from, skip := (&subscriber{st: st, start: rest, cont: tc.cont}).position()
		p := from.startingPosition()
		if p.Type != tc.wantType || aws.ToString(p.SequenceNumber) != tc.wantSeq {
			t.Errorf("%s: position %s, want %s %s", tc.name, startingPositionString(p), tc.wantType, tc.wantSeq)
		}
		if (skip == nil) != (tc.wantSkip == nil) || (skip != nil && *skip != *tc.wantSkip) {
			t.Errorf("%s: skip %v, want %v", tc.name, skip, tc.wantSkip)
		}

		tr := newShardTracker(rest)
		if tc.last != nil {
			c := *tc.last
			c.ArrivalMs = rest.StartTimeMs + 1
			if !tr.TryClaim(c) {
				t.Fatalf("%s: claim refused: %v", tc.name, tr.GetError())
			}
		}
		_, res, err := tr.TrySplit(0)
		if err != nil {
			t.Fatal(err)
		}
		r := res.(shardRestriction)
		if got, want := r.start(), rest.after(tc.last).start(); got != want {
			t.Errorf("%s: the residual starts at %+v, but the subscription is kept for %+v", tc.name, got, want)
		}
	}
}

// TestReadWithEnhancedFanOutFromLatestOnIdleShardsResubscribesAfterTheLifetime starts at
// LATEST on idle shards (old records exist before the start), lets every subscription
// reach its lifetime, and writes only once the readers have resubscribed: they must read
// exactly the new records, with one resubscription per shard and no loop of calls.
func TestReadWithEnhancedFanOutFromLatestOnIdleShardsResubscribesAfterTheLifetime(t *testing.T) {
	const stream = "efo-latest"
	const lifetime = 5500 * time.Millisecond
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2), kinesistest.WithSubscriptionLifetime(lifetime))
	client := srv.Client()
	putAll(t, client, stream, newWorkload(t, "old", 50, 0, 0).entries)

	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithMaxReadTime(7*time.Second), WithDescribeShardInterval(200*time.Millisecond),
		WithMaxFetchTime(300*time.Millisecond), WithEnhancedFanOut("latest"))...)
	sink := collect(s, t.Name(), recs)
	w := newWorkload(t, "new", 50, 5, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var first time.Time
		waitSubs(t, srv, "both shards to be subscribed", func(subs []kinesistest.Subscription) bool {
			if len(subs) != 2 {
				return false
			}
			first = subs[0].StartTime
			if subs[1].StartTime.After(first) {
				first = subs[1].StartTime
			}
			return true
		})
		waitSubs(t, srv, "both shards to be subscribed again after the lifetime", func(subs []kinesistest.Subscription) bool {
			return len(subs) == 2 && subs[0].StartTime.After(first) && subs[1].StartTime.After(first)
		})
		putAll(t, client, stream, w.entries)
	}()
	res, err := ptest.RunWithMetrics(p)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	want := expected(t, srv, stream, w.aggregates, func(r kinesistest.StoredRecord) bool { return string(r.Data[:min(3, len(r.Data))]) != "old" })
	if len(want) != 70 {
		t.Fatalf("%d new records stored, want 70", len(want))
	}
	assertSameRecords(t, sink.get(), want)
	if n := srv.CallCount("SubscribeToShard"); n != 4 {
		t.Errorf("%d SubscribeToShard calls, want 4: one per shard, and one more after the lifetime", n)
	}
	if n := counter(res, "resubscribes"); n != 2 {
		t.Errorf("resubscribes = %d, want 2 (one per shard after the lifetime)", n)
	}
}

func TestEnhancedFanOutOptions(t *testing.T) {
	for _, c := range []struct {
		opt  ReadOption
		want []string
	}{
		{WithEnhancedFanOut(""), []string{"WithEnhancedFanOut", "consumer name"}},
		{WithEnhancedFanOut("bad name"), []string{"WithEnhancedFanOut", "consumer name"}},
		{WithEnhancedFanOutConsumerARN("arn:aws:kinesis:us-east-1:123456789012:stream/s"), []string{"WithEnhancedFanOutConsumerARN", "not a stream consumer ARN"}},
	} {
		msg := mustPanic(t, func() { buildConfig(targetRead, []ReadOption{c.opt}) })
		for _, w := range append([]string{"kinesisio.Read"}, c.want...) {
			if !strings.Contains(msg, w) {
				t.Errorf("panic %q does not mention %q", msg, w)
			}
		}
	}
	const arn = "arn:aws:kinesis:us-east-1:123456789012:stream/s/consumer/c:1700000000"
	spec := newReadSpec("s", buildConfig(targetRead, []ReadOption{WithEnhancedFanOutConsumerARN(arn)}))
	if spec.ConsumerARN != arn || spec.ConsumerName != "" || !spec.enhancedFanOut() {
		t.Errorf("spec has consumer name %q, ARN %q; want the ARN alone", spec.ConsumerName, spec.ConsumerARN)
	}
	spec = newReadSpec("s", buildConfig(targetRead, []ReadOption{WithEnhancedFanOut("c")}))
	if spec.ConsumerARN != "" || spec.ConsumerName != "c" || !spec.enhancedFanOut() {
		t.Errorf("spec has consumer name %q, ARN %q; want the name alone", spec.ConsumerName, spec.ConsumerARN)
	}
	if newReadSpec("s", buildConfig(targetRead, []ReadOption(nil))).enhancedFanOut() {
		t.Errorf("polling must be the default")
	}
}

// TestReadWithEnhancedFanOutFromLatestFollowsASplit starts at LATEST on an idle stream, splits
// its shard once the reader has subscribed, and writes to the children only: the parent
// ends with ChildShards, and the children, subscribed from their start, yield exactly the
// new records.
func TestReadWithEnhancedFanOutFromLatestFollowsASplit(t *testing.T) {
	const stream = "efo-latest-split"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	client := srv.Client()
	putAll(t, client, stream, newWorkload(t, "old", 20, 0, 0).entries)

	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithMaxReadTime(2500*time.Millisecond), WithDescribeShardInterval(100*time.Millisecond),
		WithMaxFetchTime(200*time.Millisecond), WithEnhancedFanOut("latest-split"))...)
	sink := collect(s, t.Name(), recs)
	w := newWorkload(t, "new", 100, 10, 3)
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitSubs(t, srv, "the shard to be subscribed", func(subs []kinesistest.Subscription) bool { return len(subs) == 1 })
		sh := listShards(t, client, stream)["shardId-000000000000"]
		lo, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.StartingHashKey), 10)
		hi, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.EndingHashKey), 10)
		if _, err := client.SplitShard(context.Background(), &kinesis.SplitShardInput{
			StreamName: aws.String(stream), ShardToSplit: aws.String("shardId-000000000000"),
			NewStartingHashKey: aws.String(new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1).String()),
		}); err != nil {
			t.Errorf("SplitShard: %v", err)
			return
		}
		putAll(t, client, stream, w.entries)
	}()
	res, err := ptest.RunWithMetrics(p)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	want := expected(t, srv, stream, w.aggregates, func(r kinesistest.StoredRecord) bool { return r.ShardID != "shardId-000000000000" })
	if len(want) != 130 {
		t.Fatalf("the children hold %d user records, want 130", len(want))
	}
	assertSameRecords(t, sink.get(), want)
	if n := srv.CallCount("SubscribeToShard"); n != 3 {
		t.Errorf("%d SubscribeToShard calls, want 3 (the parent and its two children, once each)", n)
	}
	if n := counter(res, "resubscribes"); n != 0 {
		t.Errorf("resubscribes = %d, want 0", n)
	}
}

// TestReadBoundedWithEnhancedFanOutHandlesATrimmedStart subscribes after a trimmed sequence
// number: by default the read fails naming the position, and with WithSkipOnDataLoss it
// subscribes at the trim horizon and reads what is retained.
func TestReadBoundedWithEnhancedFanOutHandlesATrimmedStart(t *testing.T) {
	for _, fail := range []bool{true, false} {
		stream := "efo-trimmed"
		srv, trimmed := trimmedStream(t, stream)
		want := expected(t, srv, stream, nil, nil)
		p, s := beam.NewPipelineWithRoot()
		recs := ReadBounded(s, stream, connect(srv, append(onDataLoss(fail), WithEnhancedFanOut("trimmed"),
			WithStartingPosition(ShardPositions(AfterSequenceNumber("shardId-000000000000", trimmed))))...)...)
		if fail {
			err := ptest.Run(p)
			if err == nil || !strings.Contains(err.Error(), "AFTER_SEQUENCE_NUMBER "+trimmed) || !strings.Contains(err.Error(), "WithSkipOnDataLoss()") {
				t.Errorf("the read of a trimmed position ended with %v, want the data loss error", err)
			}
			continue
		}
		passert.Equals(s, canonical(s, recs), anys(want)...)
		res, err := ptest.RunWithMetrics(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := counter(res, "data_loss_skips"); n != 1 {
			t.Errorf("data_loss_skips = %d, want 1", n)
		}
	}
}

// BenchmarkReadBoundedEnhancedFanOutVsPolling reads the same 100,000 records of 1 KiB from
// 2 shards with the server's limits on (polling: 5 GetRecords calls and 2 MiB per second
// per shard, shared; enhanced fan-out: 2 MiB/s per consumer and shard), once polling and
// once subscribed, and reports records/s of each (job start-up included). Each iteration
// registers a consumer of its own, so that no subscription waits out the service's
// 5-second window after the previous iteration's.
func BenchmarkReadBoundedEnhancedFanOutVsPolling(b *testing.B) {
	const stream, records, shards = "bench-efo", 100000, 2
	srv := kinesistest.StartT(b, kinesistest.WithStream(stream, shards))
	var entries []types.PutRecordsRequestEntry
	payload := make([]byte, 1024)
	for i := range records {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("pk-", i)), Data: payload})
	}
	putAll(b, srv.Client(), stream, entries)
	srv.SetLimits(true)

	run := func(opts ...ReadOption) time.Duration {
		benchCount.Store(0)
		p, s := beam.NewPipelineWithRoot()
		counts := beam.ParDo(s, &countFn{}, ReadBounded(s, stream, connect(srv, append(opts, WithStartingPosition(TrimHorizon()))...)...))
		beam.ParDo0(s, discardCount, stats.Sum(s, counts))
		start := time.Now()
		if err := ptest.Run(p); err != nil {
			b.Fatal(err)
		}
		if n := benchCount.Load(); n != records {
			b.Fatalf("read %d records, want %d", n, records)
		}
		return time.Since(start)
	}
	var pollTime, efoTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		pollTime += run()
		efoTime += run(WithEnhancedFanOut(fmt.Sprint("bench-", i)))
	}
	pollRate := float64(records*b.N) / pollTime.Seconds()
	efoRate := float64(records*b.N) / efoTime.Seconds()
	b.ReportMetric(pollRate, "polling-records/s")
	b.ReportMetric(efoRate, "efo-records/s")
	b.ReportMetric(efoRate/pollRate, "ratio")
}
