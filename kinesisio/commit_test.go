package kinesisio

import (
	"context"
	"testing"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// Commit tokens reach the commit step in any order (a Reshuffle keeps none): within a
// bundle the furthest position of a shard is written, and a late token of an old bundle
// never moves the checkpoint back.
func TestCommitStepWritesTheFurthestPositionAndNeverMovesBack(t *testing.T) {
	dyn := startDynalite(t)
	ctx := context.Background()
	spec := checkpointSpec{Table: "positions", Endpoint: dyn, Owner: "beamkinesis-commit-test", LeaseDuration: defaultLeaseDuration}
	client := clientConfig{Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test", Endpoint: "http://127.0.0.1:1"}
	cp, err := openCheckpointer(ctx, client, spec)
	if err != nil {
		t.Fatal(err)
	}
	d := shardDescriptor{Stream: "s", ShardID: "shardId-000000000000", StartKind: startTrimHorizon}
	if _, _, err := cp.acquireAll(ctx, []shardDescriptor{d}); err != nil {
		t.Fatal(err)
	}
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
	calls0 := tableCallsTotal.Load()
	if l := bundle(tok("200", 1), tok("1000", 0), tok("99", 0), tok("1000", 3), tok("300", 0)); l.Checkpoint != "1000" || l.Sub != 3 {
		t.Fatalf("after the first bundle the checkpoint is %s/%d; want 1000/3", l.Checkpoint, l.Sub)
	}
	if n := tableCallsTotal.Load() - calls0; n != 1 {
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
