package leasetable_test

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
)

// backends are the DynamoDB implementations the suite runs against: dynalite (npm) and
// moto's server (PyPI), neither written here.
var backends = map[string]func(t *testing.T) *dynamodb.Client{
	"dynalite": func(t *testing.T) *dynamodb.Client {
		return emulators.StartT(t, emulators.Dynalite).DynamoDB()
	},
	"moto": func(t *testing.T) *dynamodb.Client {
		m := components.StartMotoT(t)
		return dynamodb.New(dynamodb.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(m.Endpoint),
			Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		})
	},
}

func forEachBackend(t *testing.T, test func(t *testing.T, db *dynamodb.Client)) {
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Run(n, func(t *testing.T) { test(t, backends[n](t)) })
	}
}

func newTable(t *testing.T, db *dynamodb.Client) *leasetable.Table {
	t.Helper()
	tab := leasetable.New(db, "leases")
	created, err := tab.Ensure(context.Background())
	if err != nil || !created {
		t.Fatalf("Ensure = %v, %v; want a new table", created, err)
	}
	return tab
}

func TestEnsureCreatesAnOnDemandTableWithTheOwnerIndexOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *dynamodb.Client) {
		ctx := context.Background()
		tab := newTable(t, db)
		if created, err := tab.Ensure(ctx); err != nil || created {
			t.Fatalf("second Ensure = %v, %v; want the existing table", created, err)
		}
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("leases")})
		if err != nil {
			t.Fatal(err)
		}
		td := out.Table
		if got := aws.ToString(td.KeySchema[0].AttributeName); len(td.KeySchema) != 1 || got != "leaseKey" {
			t.Errorf("key schema %+v; want leaseKey only", td.KeySchema)
		}
		if len(td.GlobalSecondaryIndexes) != 1 || aws.ToString(td.GlobalSecondaryIndexes[0].IndexName) != leasetable.OwnerIndex {
			t.Errorf("indexes %+v; want %s", td.GlobalSecondaryIndexes, leasetable.OwnerIndex)
		}
		if td.BillingModeSummary == nil || td.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
			t.Errorf("billing %+v; want PAY_PER_REQUEST", td.BillingModeSummary)
		}
	})
}

func TestLeaseItemsHaveKCLAttributeNamesAndTypes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *dynamodb.Client) {
		ctx := context.Background()
		tab := newTable(t, db)
		l, prev, err := tab.Acquire(ctx, leasetable.Lease{
			ShardID: "shardId-000000000002", Checkpoint: leasetable.TrimHorizon,
			Parents: []string{"shardId-000000000000", "shardId-000000000001"}, StartingHashKey: "0", EndingHashKey: "340282366920938463463374607431768211455",
		}, "job-a")
		if err != nil || prev != nil || l.Counter != 1 || l.Owner != "job-a" {
			t.Fatalf("Acquire = %+v, %v, %v", l, prev, err)
		}
		if _, err := tab.Commit(ctx, l, "job-a", leasetable.Position{Seq: "49590338271490256608559692538361571095921575989136588898", Sub: 9}, nil); err != nil {
			t.Fatal(err)
		}
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("leases"), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"leaseKey": &types.AttributeValueMemberS{Value: "shardId-000000000002"}}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]types.AttributeValue{
			"leaseKey":                     &types.AttributeValueMemberS{Value: "shardId-000000000002"},
			"checkpoint":                   &types.AttributeValueMemberS{Value: "49590338271490256608559692538361571095921575989136588898"},
			"checkpointSubSequenceNumber":  &types.AttributeValueMemberN{Value: "9"},
			"leaseCounter":                 &types.AttributeValueMemberN{Value: "2"},
			"leaseOwner":                   &types.AttributeValueMemberS{Value: "job-a"},
			"ownerSwitchesSinceCheckpoint": &types.AttributeValueMemberN{Value: "0"},
			"parentShardId":                &types.AttributeValueMemberSS{Value: []string{"shardId-000000000000", "shardId-000000000001"}},
			"startingHashKey":              &types.AttributeValueMemberS{Value: "0"},
			"endingHashKey":                &types.AttributeValueMemberS{Value: "340282366920938463463374607431768211455"},
		}
		if ss, ok := out.Item["parentShardId"].(*types.AttributeValueMemberSS); ok {
			sort.Strings(ss.Value)
		}
		if !reflect.DeepEqual(out.Item, want) {
			t.Errorf("item\n%#v\nwant\n%#v", out.Item, want)
		}
	})
}

// A late commit of an old bundle, made with the lease as that bundle's worker last saw it,
// can never move the checkpoint back; nor can one made with the current lease.
func TestAStaleCommitNeverMovesACheckpointBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *dynamodb.Client) {
		ctx := context.Background()
		tab := newTable(t, db)
		l0, _, err := tab.Acquire(ctx, leasetable.Lease{ShardID: "s", Checkpoint: leasetable.Latest}, "job")
		if err != nil {
			t.Fatal(err)
		}
		old := leasetable.Position{Seq: "100", Sub: 0}
		l1, err := tab.Commit(ctx, l0, "job", leasetable.Position{Seq: "200", Sub: 3}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The old bundle's worker still holds l0 (counter 1): its conditional write fails,
		// it reads the lease again, sees 200/3 and writes nothing.
		if got, err := tab.Commit(ctx, l0, "job", old, nil); err != nil || got.Checkpoint != "200" || got.Sub != 3 {
			t.Fatalf("stale commit = %+v, %v; want the lease at 200/3", got, err)
		}
		if got, err := tab.Commit(ctx, l1, "job", leasetable.Position{Seq: "200", Sub: 2}, nil); err != nil || got.Sub != 3 {
			t.Fatalf("commit inside the aggregate before the checkpoint = %+v, %v", got, err)
		}
		// 99 sorts after 100 as a string, not as a number.
		if got, err := tab.Commit(ctx, l1, "job", leasetable.Position{Seq: "99"}, nil); err != nil || got.Checkpoint != "200" {
			t.Fatalf("commit of 99 = %+v, %v", got, err)
		}
		end, err := tab.Commit(ctx, l0, "job", leasetable.Position{Seq: leasetable.ShardEnd}, []string{"c1", "c2"})
		if err != nil || end.Checkpoint != leasetable.ShardEnd {
			t.Fatalf("SHARD_END commit = %+v, %v", end, err)
		}
		if got, err := tab.Commit(ctx, l1, "job", leasetable.Position{Seq: "300"}, nil); err != nil || got.Checkpoint != leasetable.ShardEnd {
			t.Fatalf("commit after SHARD_END = %+v, %v", got, err)
		}
		stored, ok, err := tab.Get(ctx, "s")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		sort.Strings(stored.Children)
		want := leasetable.Lease{ShardID: "s", Checkpoint: leasetable.ShardEnd, Counter: 3, Owner: "job", Children: []string{"c1", "c2"}}
		if !reflect.DeepEqual(stored, want) {
			t.Errorf("stored %+v; want %+v", stored, want)
		}
	})
}

func TestTakeOverStopsTheFormerOwnersCommits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *dynamodb.Client) {
		ctx := context.Background()
		tab := newTable(t, db)
		a, _, err := tab.Acquire(ctx, leasetable.Lease{ShardID: "s", Checkpoint: leasetable.TrimHorizon}, "job-a")
		if err != nil {
			t.Fatal(err)
		}
		if a, err = tab.Commit(ctx, a, "job-a", leasetable.Position{Seq: "10"}, nil); err != nil {
			t.Fatal(err)
		}
		b, prev, err := tab.Acquire(ctx, leasetable.Lease{ShardID: "s", Checkpoint: leasetable.TrimHorizon}, "job-b")
		if err != nil || prev == nil || prev.Owner != "job-a" || prev.Counter != 2 {
			t.Fatalf("take over = %+v, previous %+v, %v", b, prev, err)
		}
		if b.Checkpoint != "10" || b.Counter != 3 || b.OwnerSwitches != 1 {
			t.Errorf("lease after take over %+v; want checkpoint 10, counter 3, 1 owner switch", b)
		}
		_, err = tab.Commit(ctx, a, "job-a", leasetable.Position{Seq: "20"}, nil)
		var lost *leasetable.LostError
		if !errors.As(err, &lost) || !errors.Is(err, leasetable.ErrLeaseLost) || lost.Owner != "job-b" || lost.Counter != 3 {
			t.Fatalf("former owner's commit = %v; want the lease lost to job-b at counter 3", err)
		}
		if got, err := tab.Commit(ctx, b, "job-b", leasetable.Position{Seq: "20"}, nil); err != nil || got.Checkpoint != "20" || got.OwnerSwitches != 0 {
			t.Fatalf("new owner's commit = %+v, %v", got, err)
		}
	})
}

func TestCompareOrdersSymbolicSequenceAndShardEnd(t *testing.T) {
	order := []leasetable.Position{{Seq: leasetable.TrimHorizon}, {Seq: "9"}, {Seq: "10"}, {Seq: "10", Sub: 1}, {Seq: "11"}, {Seq: leasetable.ShardEnd}}
	for i := range order {
		for j := range order {
			got := leasetable.Compare(order[i], order[j])
			if (i < j && got >= 0) || (i > j && got <= 0) || (i == j && got != 0) {
				t.Errorf("Compare(%v, %v) = %d", order[i], order[j], got)
			}
		}
	}
	if leasetable.Compare(leasetable.Position{Seq: leasetable.Latest}, leasetable.Position{Seq: leasetable.TrimHorizon}) != 0 {
		t.Error("symbolic positions must compare equal")
	}
}

// TestAPreparedShardEndStaysPendingUntilCommittedOrTakenOver: Prepare writes KCL's
// pendingCheckpoint beside the checkpoint, which stays where it was; the SHARD_END commit
// clears it, and so does another owner's take-over (the prepared end was the old owner's).
func TestAPreparedShardEndStaysPendingUntilCommittedOrTakenOver(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *dynamodb.Client) {
		ctx := context.Background()
		tab := newTable(t, db)
		for _, shard := range []string{"committed", "taken"} {
			a, _, err := tab.Acquire(ctx, leasetable.Lease{ShardID: shard, Checkpoint: leasetable.TrimHorizon}, "job-a")
			if err != nil {
				t.Fatal(err)
			}
			if a, err = tab.Commit(ctx, a, "job-a", leasetable.Position{Seq: "10"}, nil); err != nil {
				t.Fatal(err)
			}
			if a, err = tab.Prepare(ctx, a, "job-a", leasetable.ShardEnd); err != nil {
				t.Fatal(err)
			}
			got, _, err := tab.Get(ctx, shard)
			if err != nil || got.Checkpoint != "10" || got.Pending != leasetable.ShardEnd || got.Counter != a.Counter {
				t.Fatalf("prepared lease = %+v, %v; want checkpoint 10, pendingCheckpoint SHARD_END, counter %d", got, err, a.Counter)
			}
			if shard == "committed" {
				if _, err := tab.Commit(ctx, a, "job-a", leasetable.Position{Seq: leasetable.ShardEnd}, nil); err != nil {
					t.Fatal(err)
				}
			} else if _, _, err := tab.Acquire(ctx, leasetable.Lease{ShardID: shard}, "job-b"); err != nil {
				t.Fatal(err)
			}
			got, _, err = tab.Get(ctx, shard)
			if err != nil || got.Pending != "" {
				t.Errorf("%s: lease = %+v, %v; want no pendingCheckpoint", shard, got, err)
			}
		}
	})
}
