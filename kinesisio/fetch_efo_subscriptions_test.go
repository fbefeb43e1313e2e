package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/readapi"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestReadBoundedWithEnhancedFanOutSurvivesDroppedSubscriptionsAndResourceInUse holds a
// subscription to shard 0 when the read starts, so the reader's first call there is refused
// with ResourceInUseException until it may take over, and resets the connection of the
// reader's first subscription to shard 1 before its first event. The output must still be
// exact.
func TestReadBoundedWithEnhancedFanOutSurvivesDroppedSubscriptionsAndResourceInUse(t *testing.T) {
	const stream = "efo-faults"
	// No heartbeats: the held subscription gets no event while every event is dropped, and
	// the reader learns it is caught up from the event that carries the backlog.
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2), kinesistest.WithSubscriptionHeartbeat(time.Hour))
	arn, err := srv.RegisterConsumer(stream, "faults")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkload(t, "d", 2000, 100, 5)
	putAll(t, srv.Client(), stream, w.entries)
	want := expected(t, srv, stream, w.aggregates, nil)

	// Hold shard 0 with the read's consumer, past its first event.
	holder, err := srv.Client().SubscribeToShard(context.Background(), &kinesis.SubscribeToShardInput{
		ConsumerARN: aws.String(arn), ShardId: aws.String("shardId-000000000000"),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeLatest},
	}, readapi.OwnProtocol)
	if err != nil {
		t.Fatal(err)
	}
	held := holder.GetStream()
	defer held.Close()
	if _, ok := <-held.Events(); !ok {
		t.Fatalf("the held subscription ended at once: %v", held.Err())
	}

	// Drop every event until the reader's first subscription to shard 1 has been dropped.
	// The latency before each event keeps that subscription open long enough for the test
	// to see it open.
	srv.SetFaults(kinesistest.Faults{Seed: 5, SubscriptionDropRate: 1, EventLatency: 500 * time.Millisecond, Operations: []string{"SubscribeToShard"}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer srv.SetFaults(kinesistest.Faults{})
		opened := false
		waitSubs(t, srv, "the reader's first subscription to shard 1 to open and be dropped", func(subs []kinesistest.Subscription) bool {
			on := false
			for _, sub := range subs {
				on = on || sub.ShardID == "shardId-000000000001"
			}
			opened = opened || on
			return opened && !on
		})
	}()

	p, s := beam.NewPipelineWithRoot()
	recs := ReadBounded(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithEnhancedFanOutConsumerARN(arn))...)
	passert.Equals(s, canonical(s, recs), anys(want)...)
	res, err := ptest.RunWithMetrics(p)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	// The held subscription was taken over.
	for range held.Events() {
	}
	var inUse *types.ResourceInUseException
	if err := held.Err(); !errors.As(err, &inUse) {
		t.Errorf("the held subscription ended with %v, want a ResourceInUseException (taken over)", err)
	}
	if n := counter(res, "resubscribes"); n != 1 {
		t.Errorf("resubscribes = %d, want 1 (shard 1, after the drop)", n)
	}
	// Shard 0: refused, then taken over; shard 1: dropped, refused within 5s, subscribed.
	calls := counter(res, "subscribe_calls")
	if calls != 5 {
		t.Errorf("%d SubscribeToShard calls, want 5 (2 on shard 0, 3 on shard 1)", calls)
	}
	// The reader closes its subscriptions when a bounded read ends.
	waitSubs(t, srv, "every subscription to end", func(subs []kinesistest.Subscription) bool { return len(subs) == 0 })
}

// TestReadWithEnhancedFanOutKeepsSubscriptionsAcrossCheckpoints reads the same records with
// a checkpoint every 100ms or 100 records, once continuing the open subscription at each
// checkpoint and once closing it, and reports the SubscribeToShard calls each needed. The
// server's resubscription window is off, so closing costs only the 1 s between calls, not
// the service's 5 s (which the benchmark shows).
func TestReadWithEnhancedFanOutKeepsSubscriptionsAcrossCheckpoints(t *testing.T) {
	calls := map[bool]int{}
	for _, reuse := range []bool{true, false} {
		stream := "efo-reuse"
		srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2), kinesistest.WithResubscribeWindow(0))
		w := newWorkload(t, "r", 500, 50, 5)
		putAll(t, srv.Client(), stream, w.entries)
		want := expected(t, srv, stream, w.aggregates, nil)
		opts := connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(1500*time.Millisecond),
			WithDescribeShardInterval(100*time.Millisecond), WithMaxFetchTime(100*time.Millisecond),
			WithMaxRecordsPerFetch(100), WithEnhancedFanOut("reuse"))
		if !reuse {
			withoutSubscriptionReuse(t)
		}
		p, s := beam.NewPipelineWithRoot()
		passert.Equals(s, canonical(s, Read(s, stream, opts...)), anys(want)...)
		start := time.Now()
		res, err := ptest.RunWithMetrics(p)
		if err != nil {
			t.Fatalf("reuse=%t: %v", reuse, err)
		}
		calls[reuse] = srv.CallCount("SubscribeToShard")
		t.Logf("reuse=%t: %d SubscribeToShard calls, %d subscriptions continued, read took %v",
			reuse, calls[reuse], counter(res, "subscriptions_reused"), time.Since(start).Round(10*time.Millisecond))
	}
	if calls[true] != 2 {
		t.Errorf("with reuse: %d SubscribeToShard calls, want 2 (one per shard)", calls[true])
	}
	if calls[false] <= calls[true] {
		t.Errorf("without reuse: %d SubscribeToShard calls, want more than with reuse (%d)", calls[false], calls[true])
	}
	// About one per checkpoint. A reader whose calls give up a new subscription before it
	// delivers anything (the fetch time passing while the call waits to subscribe) calls
	// hundreds of times until the subscription lifetime ends the stalemate.
	if calls[false] > 40 {
		t.Errorf("without reuse: %d SubscribeToShard calls for about 8 checkpoints", calls[false])
	}
}

// TestReadWithEnhancedFanOutKeepsEveryBusyShardSubscribed reads 4 shards that records keep
// arriving at, with a fetch time far longer than the read. Prism runs the elements of a bundle
// one after the other and splits a bundle only while it makes no progress: a reader that held
// its ProcessElement call for the fetch time while records came kept the shards bundled after
// its own unread until the read ended. One that checkpoints whenever it is caught up and idle
// has every shard subscribed at once.
func TestReadWithEnhancedFanOutKeepsEveryBusyShardSubscribed(t *testing.T) {
	const stream = "efo-busy"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 4))
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(5*time.Second),
		WithMaxFetchTime(time.Hour), WithEnhancedFanOut("busy"))...)
	sink := collect(s, t.Name(), recs)
	// A few records for every shard every 20ms until all 4 are subscribed at once, or the
	// read is over: the readers make progress, so Prism does not split their bundles.
	ctx, readOver := context.WithCancel(context.Background())
	defer readOver()
	var subErr error
	subscribed := make(chan struct{})
	go func() {
		defer close(subscribed)
		subErr = srv.WaitSubscriptions(ctx, func(subs []kinesistest.Subscription) bool { return len(subs) == 4 })
	}()
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-subscribed:
				return
			case <-tick.C:
			}
			var entries []types.PutRecordsRequestEntry
			for j := range 8 {
				entries = append(entries, types.PutRecordsRequestEntry{
					PartitionKey: aws.String(fmt.Sprintf("k%d-%d", i, j)), Data: []byte(fmt.Sprintf("busy %d %d", i, j)),
				})
			}
			putAll(t, srv.Client(), stream, entries)
		}
	}()
	_, err := ptest.RunWithMetrics(p)
	readOver()
	<-produced
	if err != nil {
		t.Fatal(err)
	}
	if subErr != nil {
		t.Fatalf("the read ended before all 4 shards were subscribed at once (%v)", subErr)
	}
	assertSameRecords(t, sink.get(), expected(t, srv, stream, nil, nil))
}

// TestReadWithEnhancedFanOutCheckpointsInsideAggregates reads aggregates of 5 user records
// with at most 7 records per ProcessElement call, so most checkpoints fall inside an
// aggregate, in the middle of a SubscribeToShard event. Continuing the open subscription,
// the next call emits the rest of that event first; without reuse (the residual on another
// worker), the new subscription starts AT_SEQUENCE_NUMBER of the aggregate and skips the
// user records already emitted. Both must deliver every record exactly once.
func TestReadWithEnhancedFanOutCheckpointsInsideAggregates(t *testing.T) {
	for _, reuse := range []bool{true, false} {
		t.Run(fmt.Sprintf("reuse=%t", reuse), func(t *testing.T) {
			stream := "efo-checkpoints"
			shards, w := 2, newWorkload(t, "ec", 300, 60, 5)
			if !reuse {
				// Every checkpoint subscribes again, at most once a second per shard.
				shards, w = 1, newWorkload(t, "ec", 5, 8, 5)
			}
			srv := kinesistest.StartT(t, kinesistest.WithStream(stream, shards), kinesistest.WithResubscribeWindow(0))
			putAll(t, srv.Client(), stream, w.entries)
			want := expected(t, srv, stream, w.aggregates, nil)

			opts := connect(srv, WithStartingPosition(TrimHorizon()), WithMaxRecordsPerFetch(7),
				WithMaxReadTime(1500*time.Millisecond), WithDescribeShardInterval(100*time.Millisecond),
				WithEnhancedFanOut("checkpoints"))
			if !reuse {
				withoutSubscriptionReuse(t)
			}
			p, s := beam.NewPipelineWithRoot()
			passert.Equals(s, canonical(s, Read(s, stream, opts...)), anys(want)...)
			res, err := ptest.RunWithMetrics(p)
			if err != nil {
				t.Fatal(err)
			}
			inside := counter(res, "checkpoints_inside_aggregates")
			calls := int64(srv.CallCount("SubscribeToShard"))
			t.Logf("%d user records, %d checkpoints inside aggregates, %d SubscribeToShard calls", len(want), inside, calls)
			// Cuts every 7 records over runs of 5-record aggregates: 40 of 45 records
			// in aggregates gives at least 3 cuts inside one, 300 of 600 at least 10.
			if min := int64(map[bool]int{true: 10, false: 3}[reuse]); inside < min {
				t.Errorf("%d checkpoints fell inside an aggregate, want at least %d", inside, min)
			}
			// With reuse, the subscription a call parks drains its events meanwhile (the
			// read-ahead is on by default), and the next call reads them first.
			if drained := counter(res, "readahead_pages"); reuse && drained == 0 {
				t.Errorf("with reuse: no event was drained while a subscription was parked")
			}
			switch {
			case reuse && calls != int64(shards):
				t.Errorf("with reuse: %d SubscribeToShard calls, want %d (one per shard)", calls, shards)
			case !reuse && calls <= inside:
				t.Errorf("without reuse: %d SubscribeToShard calls for %d checkpoints inside aggregates; each checkpoint must subscribe again", calls, inside)
			}
		})
	}
}

// TestReadWithEnhancedFanOutSurvivesFaultsWithCheckpoints is the polling fault test through
// SubscribeToShard under the unbounded Read: 10% of the control-plane and SubscribeToShard
// calls fail with 500/503, 5% lose their connection, and 30% of event frames are preceded by
// a reset connection (heartbeats included), while checkpoints fall every 23 records (inside aggregates, inside
// events). Every record must still arrive exactly once.
func TestReadWithEnhancedFanOutSurvivesFaultsWithCheckpoints(t *testing.T) {
	const stream = "efo-faults-streaming"
	// Heartbeats every 50ms give the faults many frames to fall before.
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2), kinesistest.WithResubscribeWindow(0), kinesistest.WithSubscriptionHeartbeat(50*time.Millisecond))
	w := newWorkload(t, "ef", 400, 40, 5)
	putAll(t, srv.Client(), stream, w.entries)
	want := expected(t, srv, stream, w.aggregates, nil)
	srv.SetFaults(kinesistest.Faults{
		Seed: 13, ServerErrorRate: 0.1, DropConnectionRate: 0.05, SubscriptionDropRate: 0.3,
		Operations: []string{"SubscribeToShard", "ListShards", "DescribeStreamSummary", "DescribeStreamConsumer", "RegisterStreamConsumer"},
	})
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxRecordsPerFetch(23),
		WithMaxReadTime(1500*time.Millisecond), WithDescribeShardInterval(100*time.Millisecond),
		WithEnhancedFanOut("faults"))...)
	passert.Equals(s, canonical(s, recs), anys(want)...)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d SubscribeToShard calls", srv.CallCount("SubscribeToShard"))
	if n := srv.CallCount("SubscribeToShard"); n <= 2 {
		t.Errorf("%d SubscribeToShard calls; the faults must have made the reader subscribe again", n)
	}
}

// TestReadWithEnhancedFanOutFailsWhenSubscriptionsNeverDeliver drops every subscription
// before its first event. Each drop makes the reader return to the runner until it may
// subscribe again, so the count of subscriptions in a row without an event must survive
// from one ProcessElement call to the next: after WithRetries of them the read fails,
// saying so, instead of resubscribing forever.
func TestReadWithEnhancedFanOutFailsWhenSubscriptionsNeverDeliver(t *testing.T) {
	const stream = "efo-never"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1), kinesistest.WithResubscribeWindow(0))
	srv.SetFaults(kinesistest.Faults{Seed: 3, SubscriptionDropRate: 1, Operations: []string{"SubscribeToShard"}})
	p, s := beam.NewPipelineWithRoot()
	Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithEnhancedFanOut("never"),
		WithRetries(2, 5*time.Millisecond, 50*time.Millisecond))...)
	err := ptest.Run(p)
	if err == nil {
		t.Fatalf("the read succeeded")
	}
	if !strings.Contains(err.Error(), "3 subscriptions to shard shardId-000000000000 of stream efo-never in a row ended without an event") {
		t.Errorf("error does not say the subscriptions kept ending without an event: %v", err)
	}
	if n := srv.CallCount("SubscribeToShard"); n < 3 {
		t.Errorf("%d SubscribeToShard calls, want at least 3", n)
	}
}
