package kinesisio

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// foreignLease sets up a one-shard stream of 20 records and a checkpoint table whose lease
// of the shard is held by a KCL worker, checkpointed after the 10th record, as a KCL
// application leaves it after a graceful shutdown. It returns what a read must emit.
func foreignLease(t *testing.T, stream, table, owner string) (srvOpts []Option, dyn string, db *dynamodb.Client, want []string) {
	t.Helper()
	srv := startServer(t, stream, 1)
	dyn = startDynalite(t)
	w := newWorkload(t, "f", 20, 0, 0)
	putAll(t, srv.Client(), stream, w.entries)
	stored, err := srv.StreamRecords(stream)
	if err != nil {
		t.Fatal(err)
	}
	db = emulatorsDynamoDB(dyn)
	if _, err := leasetable.New(db, table).Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
		"leaseKey":                     &ddbtypes.AttributeValueMemberS{Value: stored[0].ShardID},
		"checkpoint":                   &ddbtypes.AttributeValueMemberS{Value: stored[9].SequenceNumber},
		"checkpointSubSequenceNumber":  &ddbtypes.AttributeValueMemberN{Value: "0"},
		"leaseCounter":                 &ddbtypes.AttributeValueMemberN{Value: "7"},
		"leaseOwner":                   &ddbtypes.AttributeValueMemberS{Value: owner},
		"ownerSwitchesSinceCheckpoint": &ddbtypes.AttributeValueMemberN{Value: "0"},
		"throughputKBps":               &ddbtypes.AttributeValueMemberN{Value: "1.5"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	after := map[string]bool{}
	for _, s := range stored[10:] {
		after[s.SequenceNumber] = true
	}
	want = expected(t, srv, stream, nil, func(s kinesistest.StoredRecord) bool { return after[s.SequenceNumber] })
	return connect(srv, WithStartingPosition(TrimHorizon()), WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn)), dyn, db, want
}

// A lease left by a KCL worker that no longer renews it is taken over after the failover
// time, and the read resumes after KCL's checkpoint.
func TestReadTakesOverAForeignLeaseNotRenewedForTheFailoverTime(t *testing.T) {
	const stream, table = "foreign", "kcl-app"
	opts, dyn, _, want := foreignLease(t, stream, table, "kcl-worker-gone")
	p, s := beam.NewPipelineWithRoot()
	got := collect(s, t.Name(), ReadBounded(s, stream, append(opts, WithCheckpointTableFailover(300*time.Millisecond))...))
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	assertSameRecords(t, got.get(), want)
	l := leaseOf(t, dyn, table, "shardId-000000000000")
	if !strings.HasPrefix(l.Owner, ownerPrefix) || l.Counter <= 7 || l.OwnerSwitches != 0 {
		t.Errorf("after the takeover the lease is owner %q, counter %d, owner switches %d; want a beamkinesis owner, a counter above 7, 0 switches since the new checkpoint", l.Owner, l.Counter, l.OwnerSwitches)
	}
}

// A lease whose KCL worker still renews it (its lease counter moves) is not taken: the read
// fails, naming the owner, and the lease stays the worker's.
func TestReadRefusesALeaseAForeignWorkerStillRenews(t *testing.T) {
	const stream, table, owner = "foreign-live", "kcl-app", "kcl-worker-live"
	opts, dyn, db, _ := foreignLease(t, stream, table, owner)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the live worker: renews every 50ms, as KCL does every third of its failover time
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(table),
				Key:                       map[string]ddbtypes.AttributeValue{"leaseKey": &ddbtypes.AttributeValueMemberS{Value: "shardId-000000000000"}},
				UpdateExpression:          aws.String("ADD leaseCounter :one"),
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
			})
			if err != nil && ctx.Err() == nil {
				t.Errorf("renewing: %v", err)
				return
			}
		}
	}()
	p, s := beam.NewPipelineWithRoot()
	got := collect(s, t.Name(), ReadBounded(s, stream, append(opts, WithCheckpointTableFailover(500*time.Millisecond))...))
	err := ptest.Run(p)
	cancel()
	wg.Wait()
	if err == nil || !strings.Contains(err.Error(), "live worker") || !strings.Contains(err.Error(), owner) {
		t.Fatalf("the read on a lease a live worker renews ended with %v; want an error naming the live worker %q", err, owner)
	}
	if n := len(got.get()); n != 0 {
		t.Errorf("the refused read emitted %d records", n)
	}
	if l := leaseOf(t, dyn, table, "shardId-000000000000"); l.Owner != owner {
		t.Errorf("the lease is now owner %q; want it left to %q", l.Owner, owner)
	}
}
