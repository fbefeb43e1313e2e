package kinesisio

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// expiredParent makes a stream whose only shard received 5 records, was split, and then
// stayed closed past the 24-hour retention, so that the service no longer knows it. It
// returns the server, the parent's descriptor and the sequence number and arrival time of
// its third record (a checkpoint a reader restored from long ago could hold).
func expiredParent(t *testing.T, stream string) (*kinesistest.Server, shardDescriptor, string, time.Time) {
	t.Helper()
	clock := kinesistest.NewManualClock(time.Now().Add(-48 * time.Hour))
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1), kinesistest.WithClock(clock))
	client, ctx := srv.Client(), context.Background()
	var seq string
	var arrival time.Time
	for i := range 5 {
		out, err := client.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte{byte('a' + i)}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			seq, arrival = aws.ToString(out.SequenceNumber), clock.Now()
		}
	}
	const parent = "shardId-000000000000"
	if _, err := client.SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: aws.String(parent), NewStartingHashKey: aws.String("170141183460469231731687303715884105728"),
	}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(25 * time.Hour)
	shards, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shards.Shards {
		if aws.ToString(s.ShardId) == parent {
			t.Fatalf("the parent is still listed 25 hours after it closed")
		}
	}
	return srv, shardDescriptor{Stream: stream, ShardID: parent, StartKind: startTrimHorizon}, seq, arrival
}

// TestReadingAShardPastRetentionEndsItOrReportsDataLoss resumes the read of a shard the
// service has forgotten (closed, then past retention) from a checkpoint, polling and with
// enhanced fan-out. The service answers ResourceNotFoundException; the reader must find out
// that the shard, not the stream or the consumer, is gone, and end the shard as the KCL
// does: quietly when the checkpoint proves every record was read, and otherwise as data loss,
// which fails by default and is skipped (and the shard ended) with WithSkipOnDataLoss().
func TestReadingAShardPastRetentionEndsItOrReportsDataLoss(t *testing.T) {
	for _, efo := range []bool{false, true} {
		for _, c := range []struct {
			name           string
			verified       func(arrival time.Time) time.Time
			failOnDataLoss bool
			wantErr        []string
		}{
			{"stale checkpoint fails", func(a time.Time) time.Time { return a }, true,
				[]string{"shardId-000000000000", "no longer exists", "records may have been lost", "WithSkipOnDataLoss()", "ResourceNotFoundException"}},
			{"stale checkpoint skipped", func(a time.Time) time.Time { return a }, false, nil},
			// Caught up an hour ago: the shard closed at least 24 hours ago, so nothing was left.
			{"checkpoint after the close", func(time.Time) time.Time { return time.Now().Add(-time.Hour) }, true, nil},
		} {
			name := map[bool]string{false: "polling/", true: "efo/"}[efo] + c.name
			t.Run(name, func(t *testing.T) {
				const stream = "expired-parent"
				srv, d, seq, arrival := expiredParent(t, stream)
				opts := connect(srv, onDataLoss(c.failOnDataLoss)...)
				if efo {
					arn, err := srv.RegisterConsumer(stream, "gone")
					if err != nil {
						t.Fatal(err)
					}
					opts = append(opts, WithEnhancedFanOutConsumerARN(arn))
				}
				ctx := context.Background()
				r, err := newShardReader(ctx, newReadSpec(stream, buildConfig(targetRead, opts)))
				if err != nil {
					t.Fatal(err)
				}
				defer r.closeSubscriptions()
				rest := initialRestriction(d, 0)
				rest.StartKind, rest.StartSeq, rest.VerifiedMs = startAfterSequence, seq, c.verified(arrival).UnixMilli()
				rt := sdf.NewLockRTracker(newShardTracker(rest))
				var emitted int
				cont, err := r.process(ctx, newWatermarkEstimator(0), rt, d, func(beam.EventTime, Record) { emitted++ })
				if emitted != 0 {
					t.Errorf("%d records emitted from a shard that no longer exists", emitted)
				}
				if c.wantErr != nil {
					if err == nil {
						t.Fatalf("the read succeeded; want an error about data loss")
					}
					for _, w := range c.wantErr {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("error does not mention %q: %v", w, err)
						}
					}
					return
				}
				if err != nil {
					t.Fatalf("process: %v", err)
				}
				if cont == nil || cont.ShouldResume() || !rt.IsDone() {
					t.Errorf("the shard's read did not end: continuation %+v, tracker done %t", cont, rt.IsDone())
				}
			})
		}
	}
}

// TestEnhancedFanOutWaitsForADeletingConsumerOfTheSameName asks for a consumer whose
// namesake is being deregistered (DELETING for 1 second): the reader waits until it is gone,
// registers the name again and waits for the new consumer to become ACTIVE.
func TestEnhancedFanOutWaitsForADeletingConsumerOfTheSameName(t *testing.T) {
	const stream = "efo-deleting"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1), kinesistest.WithConsumerActivationDelay(time.Second))
	old, err := srv.RegisterConsumer(stream, "phoenix")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := srv.Client().DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(old)}); err != nil {
		t.Fatal(err)
	}
	if cs, err := srv.Consumers(stream); err != nil || len(cs) != 1 || cs[0].Status != "DELETING" {
		t.Fatalf("consumers after deregistering = %+v, %v; want phoenix DELETING", cs, err)
	}

	r, err := newShardReader(ctx, newReadSpec(stream, buildConfig(targetRead, connect(srv, WithEnhancedFanOut("phoenix")))))
	if err != nil {
		t.Fatal(err)
	}
	arn, err := r.consumer(ctx)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	if arn == old {
		t.Errorf("the reader took the deregistered consumer %s", arn)
	}
	cs, err := srv.Consumers(stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].ARN != arn || cs[0].Status != "ACTIVE" {
		t.Errorf("consumers = %+v, want only the new %s, ACTIVE", cs, arn)
	}
	if n := srv.CallCount("RegisterStreamConsumer"); n != 1 {
		t.Errorf("RegisterStreamConsumer called %d times over HTTP, want 1", n)
	}
}

// TestReadWithEnhancedFanOutFailsClearlyWhenTheConsumerIsDeregistered deregisters the
// consumer under a running read: the service ends the subscriptions with
// ResourceNotFoundException, and the read must fail saying the consumer is gone rather than
// resubscribe or take the shard as ended.
func TestReadWithEnhancedFanOutFailsClearlyWhenTheConsumerIsDeregistered(t *testing.T) {
	const stream = "efo-deregistered"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	arn, err := srv.RegisterConsumer(stream, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithEnhancedFanOutConsumerARN(arn),
		WithDescribeShardInterval(100*time.Millisecond))...)
	done := make(chan error, 1)
	go func() { done <- ptest.Run(p) }()
	waitSubs(t, srv, "both shards subscribed", func(subs []kinesistest.Subscription) bool { return len(subs) == 2 })
	if _, err := srv.Client().DeregisterStreamConsumer(context.Background(), &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the read ended without an error")
		}
		for _, w := range []string{"consumer " + arn, "was deregistered while the read ran", string((&types.ResourceNotFoundException{}).ErrorCode())} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error does not mention %q: %v", w, err)
			}
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the read did not fail within 60s of the consumer being deregistered")
	}
}
