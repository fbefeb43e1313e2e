package leasetable_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// KCL leaves leaseOwner out of the leases nobody holds: the child leases it creates when a
// parent reaches SHARD_END, before its lease assignment hands them out. Such a lease is
// acquired, keeps its parents, and then commits like any other.
func TestALeaseWithoutOwnerAsKCLCreatesChildLeasesIsAcquired(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *dynamodb.Client) {
		ctx := context.Background()
		tab := newTable(t, db)
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tab.Name()), Item: map[string]types.AttributeValue{
			"leaseKey":                     &types.AttributeValueMemberS{Value: "shardId-000000000002"},
			"checkpoint":                   &types.AttributeValueMemberS{Value: leasetable.TrimHorizon},
			"checkpointSubSequenceNumber":  &types.AttributeValueMemberN{Value: "0"},
			"leaseCounter":                 &types.AttributeValueMemberN{Value: "0"},
			"ownerSwitchesSinceCheckpoint": &types.AttributeValueMemberN{Value: "0"},
			"parentShardId":                &types.AttributeValueMemberSS{Value: []string{"shardId-000000000000"}},
			"startingHashKey":              &types.AttributeValueMemberS{Value: "0"},
			"endingHashKey":                &types.AttributeValueMemberS{Value: "85070591730234615865843651857942052862"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		l, prev, err := tab.Acquire(ctx, leasetable.Lease{ShardID: "shardId-000000000002", Checkpoint: leasetable.TrimHorizon}, "beamkinesis-a")
		if err != nil {
			t.Fatalf("acquiring an unowned KCL lease: %v", err)
		}
		if prev == nil || prev.Owner != "" || l.Owner != "beamkinesis-a" || l.Counter != 1 || len(l.Parents) != 1 {
			t.Fatalf("acquired %+v (previous %+v); want owner beamkinesis-a, counter 1, the parent kept, a previous lease without owner", l, prev)
		}
		l, err = tab.Commit(ctx, l, "beamkinesis-a", leasetable.Position{Seq: "49039857307708443467467104868809893875799661393163059232", Sub: 3}, nil)
		if err != nil || l.Sub != 3 {
			t.Fatalf("commit after acquiring: %+v, %v", l, err)
		}
	})
}

// kcl35Items are the items other than leases that KCL 3.5.1 keeps in its lease table, as it
// writes them: the worker metrics, the client version migration state and the leader lock
// were read from the table of a KCL 3.5.1 worker (testing/kcl); the table migration state
// (written to the lease table when an application's migration completes) and the stream
// id (multi-stream applications) are from KCL's TableMigrationState and StreamInfo.
func kcl35Items() []map[string]types.AttributeValue {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	m := func(kv map[string]types.AttributeValue) types.AttributeValue {
		return &types.AttributeValueMemberM{Value: kv}
	}
	l := func(vs ...types.AttributeValue) types.AttributeValue { return &types.AttributeValueMemberL{Value: vs} }
	return []map[string]types.AttributeValue{
		{"leaseKey": s("kcl-worker-1"), "entityType": s("WORKER_METRIC_STATS"), "lut": n("1796358016"), "slu": n("1796358016"), "sup": n("1"),
			"opr": m(map[string]types.AttributeValue{}), "sts": m(map[string]types.AttributeValue{})},
		{"leaseKey": s("Migration3.0"), "entityType": s("CLIENT_VERSION_MIGRATION"), "cv": s("CLIENT_VERSION_3X"), "mb": s("kcl-worker-1"), "mts": n("1796358014699"),
			"h": l(m(map[string]types.AttributeValue{"cv": s("CLIENT_VERSION_INIT"), "mb": s("kcl-worker-1"), "mts": n("1796358014690")}))},
		{"leaseKey": s("Leader"), "entityType": s("LEADER"), "ownerName": s("kcl-worker-1"), "leaseDuration": s("120000"),
			"recordVersionNumber": s("2915f87f-d970-4d7d-a21f-f45d5e2f6a15")},
		{"leaseKey": s("TableMigration3.5"), "entityType": s("TABLE_MIGRATION"), "tm": s("TABLE_MIGRATION_STATUS_COMPLETE"), "mb": s("kcl-worker-1"), "mts": n("1796358014699"),
			"h": l(m(map[string]types.AttributeValue{"tm": s("TABLE_MIGRATION_STATUS_PENDING"), "mb": s("kcl-worker-1"), "mts": n("1796354414699")}))},
		{"leaseKey": s("123456789012:orders:1700000000"), "entityType": s("STREAM"), "streamId": s("orders-1700000000")},
	}
}

func putItems(t *testing.T, db *dynamodb.Client, table string, items ...map[string]types.AttributeValue) {
	t.Helper()
	for _, item := range items {
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
}

func rawItem(t *testing.T, db *dynamodb.Client, table, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"leaseKey": &types.AttributeValueMemberS{Value: key}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// An item of KCL 3.5 that is not a lease is never read as one: Get and Acquire at its key
// fail with ErrNotALease, naming its entityType, and leave it as it was.
func TestKCL35ItemsThatAreNotLeasesAreRefusedByGetAndAcquire(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *dynamodb.Client) {
		ctx := context.Background()
		tab := newTable(t, db)
		items := kcl35Items()
		putItems(t, db, tab.Name(), items...)
		for _, item := range items {
			key := item["leaseKey"].(*types.AttributeValueMemberS).Value
			entity := item["entityType"].(*types.AttributeValueMemberS).Value
			l, ok, err := tab.Get(ctx, key)
			if !errors.Is(err, leasetable.ErrNotALease) || ok || !reflect.DeepEqual(l, leasetable.Lease{}) {
				t.Errorf("Get(%s) = %+v, %v, %v; want ErrNotALease", key, l, ok, err)
			} else if !strings.Contains(err.Error(), `"`+entity+`"`) || !strings.Contains(err.Error(), key) {
				t.Errorf("Get(%s) error %q does not name the key and entityType %s", key, err, entity)
			}
			now, prev, err := tab.Acquire(ctx, leasetable.Lease{ShardID: key, Checkpoint: leasetable.TrimHorizon}, "beamkinesis-a")
			if !errors.Is(err, leasetable.ErrNotALease) || prev != nil || !reflect.DeepEqual(now, leasetable.Lease{}) {
				t.Errorf("Acquire(%s) = %+v, %+v, %v; want ErrNotALease", key, now, prev, err)
			}
			if got := rawItem(t, db, tab.Name(), key); !reflect.DeepEqual(got, item) {
				t.Errorf("the item %s after Get and Acquire\n%#v\nwant it unchanged\n%#v", key, got, item)
			}
		}
	})
}

// In a KCL 3.5 lease table a lease KCL created (entityType LEASE) and a lease from before
// 3.5 (no entityType) sit beside KCL's other items; both are read, taken over and committed
// as in KCL 3.1's tables, the KCL 3.5 lease keeps its entityType, and the other items are
// not touched.
func TestKCL35LeasesBesideKCLsOtherItemsAreReadTakenOverAndCommitted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *dynamodb.Client) {
		ctx := context.Background()
		tab := newTable(t, db)
		others := kcl35Items()
		putItems(t, db, tab.Name(), others...)
		kcl35 := map[string]types.AttributeValue{
			"leaseKey":                     &types.AttributeValueMemberS{Value: "shardId-000000000002"},
			"entityType":                   &types.AttributeValueMemberS{Value: "LEASE"},
			"checkpoint":                   &types.AttributeValueMemberS{Value: "49039857307708443467467104868809893875799663935783698464"},
			"checkpointSubSequenceNumber":  &types.AttributeValueMemberN{Value: "7"},
			"leaseCounter":                 &types.AttributeValueMemberN{Value: "22"},
			"leaseOwner":                   &types.AttributeValueMemberS{Value: "kcl-worker-1"},
			"ownerSwitchesSinceCheckpoint": &types.AttributeValueMemberN{Value: "0"},
			"startingHashKey":              &types.AttributeValueMemberS{Value: "226854911280625642308916404954512140970"},
			"endingHashKey":                &types.AttributeValueMemberS{Value: "340282366920938463463374607431768211455"},
		}
		older := map[string]types.AttributeValue{
			"leaseKey":                     &types.AttributeValueMemberS{Value: "shardId-000000000001"},
			"checkpoint":                   &types.AttributeValueMemberS{Value: leasetable.TrimHorizon},
			"checkpointSubSequenceNumber":  &types.AttributeValueMemberN{Value: "0"},
			"leaseCounter":                 &types.AttributeValueMemberN{Value: "3"},
			"leaseOwner":                   &types.AttributeValueMemberS{Value: "kcl-worker-1"},
			"ownerSwitchesSinceCheckpoint": &types.AttributeValueMemberN{Value: "0"},
		}
		putItems(t, db, tab.Name(), kcl35, older)
		if created, err := tab.Ensure(ctx); err != nil || created {
			t.Fatalf("Ensure on KCL 3.5's table = %v, %v; want the existing table", created, err)
		}

		got, ok, err := tab.Get(ctx, "shardId-000000000002")
		want := leasetable.Lease{ShardID: "shardId-000000000002", Checkpoint: "49039857307708443467467104868809893875799663935783698464", Sub: 7,
			Counter: 22, Owner: "kcl-worker-1", StartingHashKey: "226854911280625642308916404954512140970", EndingHashKey: "340282366920938463463374607431768211455"}
		if err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("Get of KCL 3.5's lease = %+v, %v, %v; want %+v", got, ok, err, want)
		}
		l, prev, err := tab.Acquire(ctx, leasetable.Lease{ShardID: "shardId-000000000002", Checkpoint: leasetable.TrimHorizon}, "beamkinesis-a")
		if err != nil || prev == nil || !reflect.DeepEqual(*prev, want) || l.Owner != "beamkinesis-a" || l.Counter != 23 || l.OwnerSwitches != 1 {
			t.Fatalf("Acquire of KCL 3.5's lease = %+v, previous %+v, %v; want beamkinesis-a at counter 23 after %+v", l, prev, err, want)
		}
		if _, err := tab.Commit(ctx, l, "beamkinesis-a", leasetable.Position{Seq: "49039857307708443467467104868809893875799663935783698465", Sub: 0}, nil); err != nil {
			t.Fatal(err)
		}
		wantItem := map[string]types.AttributeValue{}
		for k, v := range kcl35 {
			wantItem[k] = v
		}
		wantItem["checkpoint"] = &types.AttributeValueMemberS{Value: "49039857307708443467467104868809893875799663935783698465"}
		wantItem["checkpointSubSequenceNumber"] = &types.AttributeValueMemberN{Value: "0"}
		wantItem["leaseCounter"] = &types.AttributeValueMemberN{Value: "24"}
		wantItem["leaseOwner"] = &types.AttributeValueMemberS{Value: "beamkinesis-a"}
		if item := rawItem(t, db, tab.Name(), "shardId-000000000002"); !reflect.DeepEqual(item, wantItem) {
			t.Errorf("KCL 3.5's lease after take over and commit\n%#v\nwant\n%#v", item, wantItem)
		}

		o, prev, err := tab.Acquire(ctx, leasetable.Lease{ShardID: "shardId-000000000001", Checkpoint: leasetable.TrimHorizon}, "beamkinesis-a")
		if err != nil || prev == nil || prev.Counter != 3 || o.Counter != 4 || o.Checkpoint != leasetable.TrimHorizon {
			t.Fatalf("Acquire of the lease without entityType = %+v, previous %+v, %v", o, prev, err)
		}
		if _, ok := rawItem(t, db, tab.Name(), "shardId-000000000001")["entityType"]; ok {
			t.Error("the lease without entityType got one")
		}
		for _, item := range others {
			key := item["leaseKey"].(*types.AttributeValueMemberS).Value
			if got := rawItem(t, db, tab.Name(), key); !reflect.DeepEqual(got, item) {
				t.Errorf("KCL's item %s changed:\n%#v\nwant\n%#v", key, got, item)
			}
		}
	})
}
