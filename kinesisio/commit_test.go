package kinesisio

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/checkpoint"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// openCommitFixture starts dynalite, opens the checkpointer of a new table there and
// acquires the lease of one shard, as a reader does before its commit tokens reach the
// commit step. It returns dynalite's endpoint, the client and table configuration, the
// checkpointer and the shard.
func openCommitFixture(t *testing.T, table string) (dyn string, client clientConfig, spec checkpoint.Config, cp *checkpoint.Checkpointer, d shardDescriptor) {
	t.Helper()
	ctx := context.Background()
	dyn = startDynalite(t)
	spec = checkpoint.Config{Table: table, Endpoint: dyn, Owner: "beamkinesis-commit-test", LeaseDuration: checkpoint.DefaultLeaseDuration}
	client = clientConfig{Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test", Endpoint: "http://127.0.0.1:1"}
	cp, err := openCheckpointer(ctx, client, spec)
	if err != nil {
		t.Fatal(err)
	}
	d = shardDescriptor{Stream: "s", ShardID: "shardId-000000000000", StartKind: startTrimHorizon}
	if _, _, err := leased(ctx, cp, []shardDescriptor{d}); err != nil {
		t.Fatal(err)
	}
	return dyn, client, spec, cp, d
}

// Commit tokens reach the commit step in any order (a Reshuffle keeps none): within a
// bundle the furthest position of a shard is written, and a late token of an old bundle
// never moves the checkpoint back.
func TestCommitStepWritesTheFurthestPositionAndNeverMovesBack(t *testing.T) {
	ctx := context.Background()
	dyn, client, spec, cp, d := openCommitFixture(t, "positions")
	fn := &commitFn{Spec: commitSpec{Client: client, Checkpoint: spec}}
	bundle := func(toks ...commitToken) leasetable.Lease {
		t.Helper()
		fn.StartBundle(ctx)
		for _, tok := range toks {
			if err := fn.ProcessElement(ctx, tok); err != nil {
				t.Fatal(err)
			}
		}
		if err := fn.FinishBundle(ctx); err != nil {
			t.Fatal(err)
		}
		return leaseOf(t, dyn, spec.Table, d.ShardID)
	}
	tok := func(seq string, sub int64) commitToken {
		return commitToken{Stream: "s", ShardID: d.ShardID, Seq: seq, Sub: sub, Records: 1}
	}
	cp.TakeStats() // the lease's calls: the bundle reports its own
	calls0 := tableStats(spec.Table).Calls
	if l := bundle(tok("200", 1), tok("1000", 0), tok("99", 0), tok("1000", 3), tok("300", 0)); l.Checkpoint != "1000" || l.Sub != 3 {
		t.Fatalf("after the first bundle the checkpoint is %s/%d; want 1000/3", l.Checkpoint, l.Sub)
	}
	if n := tableStats(spec.Table).Calls - calls0; n != 1 {
		t.Errorf("the bundle made %d DynamoDB calls; want one UpdateItem", n)
	}
	if l := bundle(tok("999", 9)); l.Checkpoint != "1000" || l.Sub != 3 {
		t.Fatalf("a late token moved the checkpoint to %s/%d", l.Checkpoint, l.Sub)
	}
	if l := bundle(tok(leasetable.ShardEnd, 0), tok("2000", 0)); l.Checkpoint != leasetable.ShardEnd {
		t.Fatalf("after SHARD_END the checkpoint is %s", l.Checkpoint)
	}
	if l := bundle(tok("3000", 0)); l.Checkpoint != leasetable.ShardEnd {
		t.Fatalf("a token after SHARD_END moved the checkpoint to %s", l.Checkpoint)
	}
}

// A commit that cannot be written fails the commit step's bundle, naming the table and the
// shard, instead of being dropped: the token may be the shard's SHARD_END, which its
// children wait for. The runner's retry of the bundle delivers the token again and writes it.
func TestAFailedCommitFailsTheBundleAndItsRetryWritesIt(t *testing.T) {
	ctx := context.Background()
	dyn, client, spec, cp, d := openCommitFixture(t, "positions-failing")
	fn := &commitFn{Spec: commitSpec{Client: client, Checkpoint: spec}, cp: cp}
	end := commitToken{Stream: "s", ShardID: d.ShardID, Seq: leasetable.ShardEnd, Records: 3}
	runBundle := func() error {
		fn.StartBundle(ctx)
		if err := fn.ProcessElement(ctx, end); err != nil {
			t.Fatal(err)
		}
		return fn.FinishBundle(ctx)
	}

	// The table disappears under the job: DynamoDB answers ResourceNotFoundException.
	db := emulatorsDynamoDB(dyn)
	if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(spec.Table)}); err != nil {
		t.Fatal(err)
	}
	err := runBundle()
	if err == nil || !strings.Contains(err.Error(), spec.Table) || !strings.Contains(err.Error(), d.ShardID) {
		t.Fatalf("FinishBundle: %v; want an error naming table %s and shard %s", err, spec.Table, d.ShardID)
	}

	// Back, with the shard's lease: the retried bundle writes SHARD_END.
	if _, err := leasetable.New(db, spec.Table).Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := leased(ctx, cp, []shardDescriptor{d}); err != nil {
		t.Fatal(err)
	}
	if err := runBundle(); err != nil {
		t.Fatalf("the retried bundle: %v", err)
	}
	if l := leaseOf(t, dyn, spec.Table, d.ShardID); l.Checkpoint != leasetable.ShardEnd {
		t.Fatalf("after the retry the checkpoint is %s; want %s", l.Checkpoint, leasetable.ShardEnd)
	}
}
