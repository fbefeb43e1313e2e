package checkpoint

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/beamkinesis/beamkinesis/testing/emulators"
)

// openOnDynalite opens a Checkpointer on a new table of a dynalite of its own, and leases
// shard there.
func openOnDynalite(t *testing.T, table string, shard Shard) *Checkpointer {
	t.Helper()
	ctx := context.Background()
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	cfg := Config{Table: table, Endpoint: emulators.StartT(t, emulators.Dynalite).URL(), Owner: "beamkinesis-checkpoint-test"}
	c, err := Open(ctx, awsCfg, cfg, func(context.Context, string, string) ([]string, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireAll(ctx, []Shard{shard}); err != nil {
		t.Fatal(err)
	}
	return c
}

// A commit the table takes ends an outage of the lease renewals as a renewal does: when the
// table answers again, the commits may keep every lease fresh so that no renewal runs, and
// the next outage's first failed renewal must still warn.
func TestACommitEndsAnOutageOfTheRenewals(t *testing.T) {
	ctx := context.Background()
	d := Shard{Stream: "s", ID: "shardId-000000000000", Initial: "TRIM_HORIZON"}
	c := openOnDynalite(t, "renewals", d)
	if !c.renewalFailed() {
		t.Fatal("the first failed renewal did not warn")
	}
	if err := c.Commit(ctx, Token{Stream: d.Stream, ShardID: d.ID, Seq: "100", Records: 1}); err != nil {
		t.Fatal(err)
	}
	if !c.renewalFailed() {
		t.Fatal("after a commit the table took, the first failed renewal of the next outage did not warn")
	}
	if s := c.TakeStats(); s.Commits != 1 || s.Records[d.ID] != 1 || len(s.LagMs) != 1 {
		t.Errorf("stats after one commit of one record: %+v", s)
	}
}

// A child is ready once every parent's item says SHARD_END; a parent without an item does
// not hold it back; and once ready, the answer comes from memory, without a DynamoDB call.
func TestParentsReadyWaitsForEveryParentAtShardEnd(t *testing.T) {
	ctx := context.Background()
	p1 := Shard{Stream: "s", ID: "shardId-000000000001", Initial: "TRIM_HORIZON"}
	p2 := Shard{Stream: "s", ID: "shardId-000000000002", Initial: "TRIM_HORIZON"}
	c := openOnDynalite(t, "parents", p1)
	if _, err := c.AcquireAll(ctx, []Shard{p2}); err != nil {
		t.Fatal(err)
	}
	child := Shard{Stream: "s", ID: "shardId-000000000003", Parents: []string{p1.ID, p2.ID}, Initial: "TRIM_HORIZON"}
	if c.ParentsReady(ctx, child) {
		t.Fatal("ready while neither parent is at SHARD_END")
	}
	end := func(p Shard) {
		t.Helper()
		if err := c.Commit(ctx, Token{Stream: p.Stream, ShardID: p.ID, Seq: "SHARD_END"}); err != nil {
			t.Fatal(err)
		}
	}
	end(p1)
	if c.ParentsReady(ctx, child) {
		t.Fatal("ready while the adjacent parent is not at SHARD_END")
	}
	end(p2)
	if !c.ParentsReady(ctx, child) {
		t.Fatal("not ready with both parents at SHARD_END")
	}
	c.TakeStats()
	if !c.ParentsReady(ctx, child) {
		t.Fatal("no longer ready")
	}
	if n := c.TakeStats().Calls; n != 0 {
		t.Errorf("asking again made %d DynamoDB calls; want none", n)
	}
	orphan := Shard{Stream: "s", ID: "shardId-000000000004", Parents: []string{"shardId-000000000009"}, Initial: "TRIM_HORIZON"}
	if !c.ParentsReady(ctx, orphan) {
		t.Error("a parent without an item held its child back")
	}
}
