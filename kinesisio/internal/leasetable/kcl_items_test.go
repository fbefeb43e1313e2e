package leasetable_test

import (
	"context"
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
