package kinesistest_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// eventWait bounds how long a test waits for an event that must come; it only
// matters when the server is broken.
const eventWait = 10 * time.Second

// noHeartbeats keeps empty events out of tests that count events.
var noHeartbeats = kinesistest.WithSubscriptionHeartbeat(time.Hour)

// ownCodec gives one SubscribeToShard call a protocol of its own. The
// client's protocol holds one event-stream codec whose decoder and scratch
// buffer every stream of the client shares without synchronisation
// (aws/smithy-go#714, open): two subscriptions on one client are a data race
// that -race reports.
func ownCodec(o *kinesis.Options) { o.Protocol = awsjson.New11(schemas.Kinesis_20131202) }

// sub is an open subscription as a test reads it.
type sub struct {
	t  *testing.T
	es *kinesis.SubscribeToShardEventStream
}

func (e *env) subscribe(arn, shardID string, pos types.StartingPosition) *sub {
	e.t.Helper()
	out, err := e.kc.SubscribeToShard(e.ctx, &kinesis.SubscribeToShardInput{
		ConsumerARN: aws.String(arn), ShardId: aws.String(shardID), StartingPosition: &pos,
	}, ownCodec)
	if err != nil {
		e.t.Fatalf("SubscribeToShard(%s, %s, %s): %v", arn, shardID, pos.Type, err)
	}
	es := out.GetStream()
	e.t.Cleanup(func() { es.Close() })
	return &sub{t: e.t, es: es}
}

func (e *env) subscribeErr(arn, shardID string, pos types.StartingPosition) error {
	e.t.Helper()
	out, err := e.kc.SubscribeToShard(e.ctx, &kinesis.SubscribeToShardInput{
		ConsumerARN: aws.String(arn), ShardId: aws.String(shardID), StartingPosition: &pos,
	}, ownCodec)
	if err == nil {
		out.GetStream().Close()
		e.t.Fatalf("SubscribeToShard(%s, %s, %s) succeeded, want an error", arn, shardID, pos.Type)
	}
	return err
}

// next returns the next event, or nil once the stream has ended.
func (s *sub) next() *types.SubscribeToShardEvent {
	s.t.Helper()
	select {
	case ev, ok := <-s.es.Events():
		if !ok {
			return nil
		}
		m, isEvent := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !isEvent {
			s.t.Fatalf("got %T, want a SubscribeToShardEvent", ev)
		}
		return &m.Value
	case <-time.After(eventWait):
		s.t.Fatalf("no event within %v", eventWait)
		return nil
	}
}

// records reads events until n records have come and returns their data and
// the last event read.
func (s *sub) records(n int) ([]string, *types.SubscribeToShardEvent) {
	s.t.Helper()
	var got []string
	var last *types.SubscribeToShardEvent
	for len(got) < n {
		last = s.next()
		if last == nil {
			s.t.Fatalf("stream ended after %d of %d records (Err: %v)", len(got), n, s.es.Err())
		}
		for _, r := range last.Records {
			got = append(got, string(r.Data))
		}
	}
	return got, last
}

// ended reads events until the stream ends and returns its Err.
func (s *sub) ended() error {
	s.t.Helper()
	for s.next() != nil {
	}
	return s.es.Err()
}

func seqPos(typ types.ShardIteratorType, seq string) types.StartingPosition {
	return types.StartingPosition{Type: typ, SequenceNumber: aws.String(seq)}
}

func TestSubscribeStartingPositions(t *testing.T) {
	e := newEnv(t, noHeartbeats)
	e.createStream("orders", 1)
	var seqs []string
	for i := range 5 {
		seqs = append(seqs, *e.put("orders", "k", fmt.Sprintf("r%d", i)).SequenceNumber)
		e.clock.Advance(time.Second)
	}
	tests := []struct {
		name string
		pos  types.StartingPosition
		want string
	}{
		{"TRIM_HORIZON", types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}, "r0 r1 r2 r3 r4"},
		{"AT_SEQUENCE_NUMBER", seqPos(types.ShardIteratorTypeAtSequenceNumber, seqs[2]), "r2 r3 r4"},
		{"AFTER_SEQUENCE_NUMBER", seqPos(types.ShardIteratorTypeAfterSequenceNumber, seqs[2]), "r3 r4"},
		{"AT_TIMESTAMP", types.StartingPosition{Type: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(t0.Add(1500 * time.Millisecond))}, "r2 r3 r4"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A consumer each: the same one could not subscribe again within 5 s.
			arn, err := e.srv.RegisterConsumer("orders", fmt.Sprintf("c%d", i))
			if err != nil {
				t.Fatal(err)
			}
			s := e.subscribe(arn, sid(0), tc.pos)
			n := len(strings.Fields(tc.want))
			got, last := s.records(n)
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
			if aws.ToString(last.ContinuationSequenceNumber) != seqs[4] {
				t.Errorf("continuation %s, want the last record's %s", aws.ToString(last.ContinuationSequenceNumber), seqs[4])
			}
			if aws.ToInt64(last.MillisBehindLatest) != 0 || last.ChildShards != nil {
				t.Errorf("last event MillisBehindLatest %d, ChildShards %v; want 0 and none", aws.ToInt64(last.MillisBehindLatest), last.ChildShards)
			}
			for _, r := range last.Records {
				if r.ApproximateArrivalTimestamp == nil || r.ApproximateArrivalTimestamp.Before(t0) || aws.ToString(r.PartitionKey) != "k" {
					t.Errorf("record %+v", r)
				}
			}
		})
	}

	t.Run("LATEST", func(t *testing.T) {
		arn, err := e.srv.RegisterConsumer("orders", "latest")
		if err != nil {
			t.Fatal(err)
		}
		s := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeLatest})
		// The first event comes at once, empty, with a continuation past the
		// last record: a reader starting at LATEST on an idle shard makes
		// progress.
		first := s.next()
		if len(first.Records) != 0 || first.ContinuationSequenceNumber == nil || !seqLess(seqs[4], *first.ContinuationSequenceNumber) && *first.ContinuationSequenceNumber != seqs[4] {
			t.Fatalf("first event %+v, want no records and a continuation at or after %s", first, seqs[4])
		}
		put := e.put("orders", "k", "new")
		got, last := s.records(1)
		if fmt.Sprint(got) != "[new]" || *last.ContinuationSequenceNumber != *put.SequenceNumber {
			t.Fatalf("got %v, continuation %s; want [new], %s", got, *last.ContinuationSequenceNumber, *put.SequenceNumber)
		}
	})
}

func TestSubscribePushesRecordsAsTheyArrive(t *testing.T) {
	e := newEnv(t, noHeartbeats)
	e.createStream("orders", 1)
	arn, err := e.srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	s := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	first := s.next()
	if len(first.Records) != 0 || first.ContinuationSequenceNumber == nil || aws.ToInt64(first.MillisBehindLatest) != 0 {
		t.Fatalf("first event on an empty shard %+v", first)
	}
	var cont string
	for i := range 3 {
		put := e.put("orders", "k", fmt.Sprintf("r%d", i))
		// With heartbeats an hour apart, only the put can have woken the
		// subscription.
		got, last := s.records(1)
		if got[0] != fmt.Sprintf("r%d", i) || *last.ContinuationSequenceNumber != *put.SequenceNumber {
			t.Fatalf("event %d: %v, continuation %s", i, got, *last.ContinuationSequenceNumber)
		}
		cont = *last.ContinuationSequenceNumber
	}

	// Resubscribing AFTER the continuation, 5 s later, misses nothing and
	// repeats nothing; the old subscription is taken over.
	e.clock.Advance(5 * time.Second)
	e.put("orders", "k", "r3")
	s2 := e.subscribe(arn, sid(0), seqPos(types.ShardIteratorTypeAfterSequenceNumber, cont))
	if got, _ := s2.records(1); fmt.Sprint(got) != "[r3]" {
		t.Fatalf("after resubscribing got %v, want [r3]", got)
	}
	if err := s.ended(); err == nil {
		t.Fatal("the taken-over subscription ended without an error")
	}
}

func TestSubscribeContinuationAdvancesOnIdleShard(t *testing.T) {
	e := newEnv(t, kinesistest.WithSubscriptionHeartbeat(time.Millisecond))
	e.createStream("orders", 2)
	arn, err := e.srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	// Shard 0 stays idle while shard 1 takes records.
	s := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeLatest})
	before := *s.next().ContinuationSequenceNumber
	upper := "300000000000000000000000000000000000000"
	for range 3 {
		e.putEHK("orders", upper, "x")
	}
	for {
		ev := s.next()
		if len(ev.Records) != 0 {
			t.Fatalf("idle shard delivered %d records", len(ev.Records))
		}
		if seqLess(before, *ev.ContinuationSequenceNumber) {
			break // heartbeats carry the newer continuation
		}
	}
	// And a record put later is after every continuation handed out.
	put := e.putEHK("orders", "0", "late")
	got, last := s.records(1)
	if fmt.Sprint(got) != "[late]" || *last.ContinuationSequenceNumber != *put.SequenceNumber {
		t.Fatalf("got %v, continuation %s", got, *last.ContinuationSequenceNumber)
	}
}

func TestSubscribeShardEnd(t *testing.T) {
	e := newEnv(t, noHeartbeats)
	e.createStream("orders", 1)
	arn, err := e.srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	e.put("orders", "k", "before")
	s := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	if got, _ := s.records(1); fmt.Sprint(got) != "[before]" {
		t.Fatalf("got %v", got)
	}
	// Splitting while subscribed wakes the subscription, which ends the shard.
	_, err = e.kc.SplitShard(e.ctx, &kinesis.SplitShardInput{
		StreamName: aws.String("orders"), ShardToSplit: aws.String(sid(0)),
		NewStartingHashKey: aws.String("170141183460469231731687303715884105728"),
	})
	if err != nil {
		t.Fatal(err)
	}
	last := s.next()
	if last == nil {
		t.Fatalf("stream ended without a final event: %v", s.es.Err())
	}
	if last.ContinuationSequenceNumber != nil || len(last.Records) != 0 || aws.ToInt64(last.MillisBehindLatest) != 0 {
		t.Fatalf("final event %+v, want no continuation and no records", last)
	}
	if len(last.ChildShards) != 2 || *last.ChildShards[0].ShardId != sid(1) || *last.ChildShards[1].ShardId != sid(2) ||
		fmt.Sprint(last.ChildShards[0].ParentShards) != "["+sid(0)+"]" {
		t.Fatalf("child shards %+v", last.ChildShards)
	}
	if ev := s.next(); ev != nil {
		t.Fatalf("event after the shard's end: %+v", ev)
	}
	if err := s.es.Err(); err != nil {
		t.Fatalf("Err() = %v after the shard's end, want nil", err)
	}

	// Subscribing to the closed shard later: its records, then the end, in
	// the same event (like GetRecords' last page).
	other, err := e.srv.RegisterConsumer("orders", "late")
	if err != nil {
		t.Fatal(err)
	}
	s2 := e.subscribe(other, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	ev := s2.next()
	if len(ev.Records) != 1 || ev.ContinuationSequenceNumber != nil || len(ev.ChildShards) != 2 {
		t.Fatalf("event on a closed shard %+v", ev)
	}
	if err := s2.ended(); err != nil {
		t.Fatalf("Err() = %v, want nil", err)
	}
}

func TestSubscriptionLifetime(t *testing.T) {
	e := newEnv(t, noHeartbeats, kinesistest.WithSubscriptionLifetime(time.Minute))
	e.createStream("orders", 1)
	arn, err := e.srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	s := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	s.next()
	e.clock.Advance(59 * time.Second)
	e.put("orders", "k", "still open")
	if got, _ := s.records(1); fmt.Sprint(got) != "[still open]" {
		t.Fatalf("got %v", got)
	}
	// Moving the clock past the lifetime ends the stream cleanly at once.
	e.clock.Advance(time.Second)
	if err := s.ended(); err != nil {
		t.Fatalf("Err() = %v after the lifetime, want nil", err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, eventWait)
	defer cancel()
	if err := e.srv.WaitSubscriptions(ctx, func(subs []kinesistest.Subscription) bool { return len(subs) == 0 }); err != nil {
		t.Fatal(err)
	}
	// 60 s after the last subscription, resubscribing is allowed.
	e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeLatest}).next()
}

func TestSubscribeResourceInUse(t *testing.T) {
	e := newEnv(t, noHeartbeats)
	e.createStream("orders", 2)
	arn, err := e.srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	latest := types.StartingPosition{Type: types.ShardIteratorTypeLatest}
	first := e.subscribe(arn, sid(0), latest)
	first.next()

	// Within 5 s: refused before any streaming, as a typed error.
	e.clock.Advance(4999 * time.Millisecond)
	wantErrorType[*types.ResourceInUseException](t, e.subscribeErr(arn, sid(0), latest))
	// Other shards and other consumers are independent.
	e.subscribe(arn, sid(1), latest).next()
	other, err := e.srv.RegisterConsumer("orders", "other")
	if err != nil {
		t.Fatal(err)
	}
	e.subscribe(other, sid(0), latest).next()
	if n := len(e.srv.Subscriptions()); n != 3 {
		t.Fatalf("%d subscriptions open, want 3", n)
	}

	// From 5 s on, a new subscription takes over; the old one ends with
	// ResourceInUseException.
	e.clock.Advance(time.Millisecond)
	second := e.subscribe(arn, sid(0), latest)
	second.next()
	wantErrorType[*types.ResourceInUseException](t, first.ended())
	ctx, cancel := context.WithTimeout(e.ctx, eventWait)
	defer cancel()
	err = e.srv.WaitSubscriptions(ctx, func(subs []kinesistest.Subscription) bool { return len(subs) == 3 })
	if err != nil {
		t.Fatal(err)
	}
	e.put("orders", "k", "x") // lands in one of the shards; the new subscription still works
	if e.srv.CallCount("SubscribeToShard") != 5 {
		t.Errorf("CallCount(SubscribeToShard) = %d, want 5", e.srv.CallCount("SubscribeToShard"))
	}
}

func TestSubscribeErrorsBeforeStreaming(t *testing.T) {
	e := newEnv(t)
	e.createStream("orders", 1)
	arn, err := e.srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	seq := *e.put("orders", "k", "x").SequenceNumber
	e.createStream("other", 2)
	otherSeq := *e.putEHK("other", "300000000000000000000000000000000000000", "y").SequenceNumber
	trim := types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}

	wantErrorType[*types.ResourceNotFoundException](t, e.subscribeErr(arn+"0", sid(0), trim))
	wantErrorType[*types.ResourceNotFoundException](t, e.subscribeErr(strings.Replace(arn, "/app:", "/nobody:", 1), sid(0), trim))
	wantErrorType[*types.ResourceNotFoundException](t, e.subscribeErr(arn, sid(7), trim))
	wantErrorType[*types.InvalidArgumentException](t, e.subscribeErr(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeAtSequenceNumber}))
	wantErrorType[*types.InvalidArgumentException](t, e.subscribeErr(arn, sid(0), seqPos(types.ShardIteratorTypeTrimHorizon, seq)))
	wantErrorType[*types.InvalidArgumentException](t, e.subscribeErr(arn, sid(0), seqPos(types.ShardIteratorTypeAtSequenceNumber, otherSeq)))
	wantErrorType[*types.InvalidArgumentException](t, e.subscribeErr(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeAtTimestamp}))
	wantErrorType[*types.InvalidArgumentException](t, e.subscribeErr(arn, sid(0), types.StartingPosition{
		Type: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(t0.Add(time.Hour)),
	}))
	wantAPIError(t, e.subscribeErr(arn, sid(0), types.StartingPosition{Type: "SOMEWHERE"}), "ValidationException", "")
	wantAPIError(t, e.subscribeErr("not-an-arn", sid(0), trim), "ValidationException", "")
	// Failed calls do not count as subscriptions for the 5-second rule.
	e.subscribe(arn, sid(0), trim).next()
}

func TestSubscriptionEndsWhenConsumerOrStreamGoes(t *testing.T) {
	e := newEnv(t, noHeartbeats)
	e.createStream("orders", 1)
	a, err := e.srv.RegisterConsumer("orders", "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.srv.RegisterConsumer("orders", "b")
	if err != nil {
		t.Fatal(err)
	}
	trim := types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}
	sa, sb := e.subscribe(a, sid(0), trim), e.subscribe(b, sid(0), trim)
	sa.next()
	sb.next()
	if _, err := e.kc.DeregisterStreamConsumer(e.ctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(a)}); err != nil {
		t.Fatal(err)
	}
	wantErrorType[*types.ResourceNotFoundException](t, sa.ended())
	if _, err := e.kc.DeleteStream(e.ctx, &kinesis.DeleteStreamInput{StreamName: aws.String("orders")}); err != nil {
		t.Fatal(err)
	}
	wantErrorType[*types.ResourceNotFoundException](t, sb.ended())
}

func TestSubscriptionFaults(t *testing.T) {
	t.Run("dropped", func(t *testing.T) {
		e := newEnv(t, noHeartbeats)
		e.createStream("orders", 1)
		arn, err := e.srv.RegisterConsumer("orders", "app")
		if err != nil {
			t.Fatal(err)
		}
		s := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
		s.next()
		e.srv.SetFaults(kinesistest.Faults{SubscriptionDropRate: 1, Operations: []string{"SubscribeToShard"}})
		e.put("orders", "k", "lost in transit")
		err = s.ended()
		if err == nil || !strings.Contains(err.Error(), "reset") {
			t.Fatalf("a dropped subscription ended with Err() = %v, want a connection reset", err)
		}
		ctx, cancel := context.WithTimeout(e.ctx, eventWait)
		defer cancel()
		if err := e.srv.WaitSubscriptions(ctx, func(subs []kinesistest.Subscription) bool { return len(subs) == 0 }); err != nil {
			t.Fatal(err)
		}
		// The record stays on the server for the next subscription.
		e.srv.SetFaults(kinesistest.Faults{})
		e.clock.Advance(5 * time.Second)
		s2 := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
		if got, _ := s2.records(1); fmt.Sprint(got) != "[lost in transit]" {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("delayed", func(t *testing.T) {
		const delay = 50 * time.Millisecond
		e := newEnv(t, noHeartbeats, kinesistest.WithFaults(kinesistest.Faults{EventLatency: delay}))
		e.createStream("orders", 1)
		arn, err := e.srv.RegisterConsumer("orders", "app")
		if err != nil {
			t.Fatal(err)
		}
		s := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
		s.next()
		start := time.Now()
		e.put("orders", "k", "slow")
		if got, _ := s.records(1); fmt.Sprint(got) != "[slow]" {
			t.Fatalf("got %v", got)
		}
		if took := time.Since(start); took < delay {
			t.Fatalf("record arrived after %v, want at least the injected %v", took, delay)
		}
	})
}

func TestSubscriptionPacedInLimitsMode(t *testing.T) {
	e := newEnv(t, noHeartbeats, kinesistest.WithLimits())
	e.createStream("orders", 1)
	arn, err := e.srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	// 3 MiB in 1 MiB records; the write limit (1 MiB/s on the server clock)
	// needs a second between puts.
	blob := bytes.Repeat([]byte("x"), 1<<20-1)
	for range 3 {
		if _, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("orders"), PartitionKey: aws.String("k"), Data: blob}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
	}
	start := time.Now()
	s := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	got := 0
	for got < 3 {
		ev := s.next()
		if ev == nil {
			t.Fatalf("stream ended: %v", s.es.Err())
		}
		got += len(ev.Records)
	}
	// 2 MiB go out at once; the third MiB waits for the bucket, half a
	// second in real time (less a millisecond of rounding).
	if took := time.Since(start); took < 499*time.Millisecond {
		t.Fatalf("3 MiB delivered in %v, want pacing at 2 MiB/s", took)
	}
}

func TestCloseEndsSubscriptions(t *testing.T) {
	clock := kinesistest.NewManualClock(t0)
	srv, err := kinesistest.Start(kinesistest.WithClock(clock), noHeartbeats)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("orders", 2); err != nil {
		t.Fatal(err)
	}
	arn, err := srv.RegisterConsumer("orders", "app")
	if err != nil {
		t.Fatal(err)
	}
	kc := srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	e := &env{t: t, ctx: t.Context(), srv: srv, clock: clock, kc: kc}
	s0 := e.subscribe(arn, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeLatest})
	s1 := e.subscribe(arn, sid(1), types.StartingPosition{Type: types.ShardIteratorTypeLatest})
	s0.next()
	s1.next()

	// A client that closes its stream ends the server's side promptly.
	s1.es.Close()
	ctx, cancel := context.WithTimeout(t.Context(), eventWait)
	defer cancel()
	err = srv.WaitSubscriptions(ctx, func(subs []kinesistest.Subscription) bool {
		return len(subs) == 1 && subs[0].ShardID == sid(0) && subs[0].ConsumerARN == arn && subs[0].StartTime.Equal(t0)
	})
	if err != nil {
		t.Fatal(err)
	}

	// Close ends the remaining one: the body ends, so Err() is nil; Close
	// does not wait out its grace period.
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v with a subscription open", took)
	}
	if err := s0.ended(); err != nil {
		t.Fatalf("Err() = %v after Close, want nil", err)
	}
	if n := len(srv.Subscriptions()); n != 0 {
		t.Fatalf("%d subscriptions after Close", n)
	}
	// Close waited for every subscription's goroutine: none is left.
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "subscriptionStream") {
		t.Fatalf("a subscription goroutine outlived Close:\n%s", stacks)
	}
}
