package kcl

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/emulators"
)

// lease is a lease item as the test reads it, with its attribute types.
type lease struct {
	Checkpoint string
	Sub        int64
	Owner      string
	Counter    int64
	Item       map[string]ddbtypes.AttributeValue
}

func dynamo(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       emulators.Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// createLeaseTable makes a KCL 3 lease table with its LeaseOwnerToLeaseKeyIndex index up
// front: dynalite refuses the UpdateTable KCL 3 adds the index with.
func createLeaseTable(t *testing.T, db *dynamodb.Client, table string) {
	t.Helper()
	s := func(name string) *string { return aws.String(name) }
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:   s(table),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: s("leaseKey"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: s("leaseOwner"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: s("leaseKey"), KeyType: ddbtypes.KeyTypeHash}},
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{
			IndexName: s("LeaseOwnerToLeaseKeyIndex"),
			KeySchema: []ddbtypes.KeySchemaElement{
				{AttributeName: s("leaseOwner"), KeyType: ddbtypes.KeyTypeHash},
				{AttributeName: s("leaseKey"), KeyType: ddbtypes.KeyTypeRange},
			},
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// dynalite answers CreateTable before the table takes writes, even with --createTableMs 0.
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := w.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// seedLeases writes the items KCL's shard sync writes for the open shards of a new
// application at TRIM_HORIZON, so KCL starts at once: on an empty table it waits a random
// 1-30 s before syncing shards itself.
func seedLeases(t *testing.T, db *dynamodb.Client, client *kinesis.Client, table, stream string) {
	t.Helper()
	out, err := client.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range out.Shards {
		item := map[string]ddbtypes.AttributeValue{
			"leaseKey":                     &ddbtypes.AttributeValueMemberS{Value: aws.ToString(sh.ShardId)},
			"checkpoint":                   &ddbtypes.AttributeValueMemberS{Value: "TRIM_HORIZON"},
			"checkpointSubSequenceNumber":  &ddbtypes.AttributeValueMemberN{Value: "0"},
			"leaseCounter":                 &ddbtypes.AttributeValueMemberN{Value: "0"},
			"ownerSwitchesSinceCheckpoint": &ddbtypes.AttributeValueMemberN{Value: "0"},
			"startingHashKey":              &ddbtypes.AttributeValueMemberS{Value: aws.ToString(sh.HashKeyRange.StartingHashKey)},
			"endingHashKey":                &ddbtypes.AttributeValueMemberS{Value: aws.ToString(sh.HashKeyRange.EndingHashKey)},
		}
		if p := aws.ToString(sh.ParentShardId); p != "" {
			item["parentShardId"] = &ddbtypes.AttributeValueMemberSS{Value: []string{p}}
		}
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
}

// items reads every item of table. The tables here are small: one Scan page holds them.
func items(t *testing.T, db *dynamodb.Client, table string) []map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if out.LastEvaluatedKey != nil {
		t.Fatalf("table %s has more items than one Scan page", table)
	}
	return out.Items
}

// entityType is an item's entityType: KCL 3.5 marks the items of its lease table that are
// not leases (worker metrics, coordinator state) with one other than LEASE. A lease has
// LEASE (KCL 3.5 created it) or none (KCL 3.1 or beamkinesis did).
func entityType(item map[string]ddbtypes.AttributeValue) string {
	if v, ok := item["entityType"].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func isLease(item map[string]ddbtypes.AttributeValue) bool {
	e := entityType(item)
	return e == "" || e == "LEASE"
}

// otherItems reads KCL 3.5's items of table that are not leases, by leaseKey.
func otherItems(t *testing.T, db *dynamodb.Client, table string) map[string]map[string]ddbtypes.AttributeValue {
	t.Helper()
	m := map[string]map[string]ddbtypes.AttributeValue{}
	for _, item := range items(t, db, table) {
		if !isLease(item) {
			key, _ := item["leaseKey"].(*ddbtypes.AttributeValueMemberS)
			if key == nil {
				t.Fatalf("an item of %s has no leaseKey string: %v", table, item)
			}
			m[key.Value] = item
		}
	}
	return m
}

// leases reads every lease item of table, by shard, leaving out KCL 3.5's other items.
func leases(t *testing.T, db *dynamodb.Client, table string) map[string]lease {
	t.Helper()
	m := map[string]lease{}
	for _, item := range items(t, db, table) {
		if !isLease(item) {
			continue
		}
		l := lease{Item: item}
		key, _ := item["leaseKey"].(*ddbtypes.AttributeValueMemberS)
		if v, ok := item["checkpoint"].(*ddbtypes.AttributeValueMemberS); ok {
			l.Checkpoint = v.Value
		}
		if v, ok := item["leaseOwner"].(*ddbtypes.AttributeValueMemberS); ok {
			l.Owner = v.Value
		}
		if v, ok := item["checkpointSubSequenceNumber"].(*ddbtypes.AttributeValueMemberN); ok {
			l.Sub, _ = strconv.ParseInt(v.Value, 10, 64)
		}
		if v, ok := item["leaseCounter"].(*ddbtypes.AttributeValueMemberN); ok {
			l.Counter, _ = strconv.ParseInt(v.Value, 10, 64)
		}
		if key == nil {
			t.Fatalf("an item of %s has no leaseKey string: %v", table, item)
		}
		m[key.Value] = l
	}
	return m
}

// describe renders an item's attributes with their DynamoDB types, sorted.
func describe(item map[string]ddbtypes.AttributeValue) string {
	var parts []string
	for k, v := range item {
		switch v := v.(type) {
		case *ddbtypes.AttributeValueMemberS:
			parts = append(parts, fmt.Sprintf("%s{S}=%s", k, v.Value))
		case *ddbtypes.AttributeValueMemberN:
			parts = append(parts, fmt.Sprintf("%s{N}=%s", k, v.Value))
		case *ddbtypes.AttributeValueMemberSS:
			parts = append(parts, fmt.Sprintf("%s{SS}=%v", k, v.Value))
		default:
			parts = append(parts, fmt.Sprintf("%s{%T}", k, v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// stringSet returns the sorted members of a string set attribute, or nil for another type.
func stringSet(v ddbtypes.AttributeValue) []string {
	ss, ok := v.(*ddbtypes.AttributeValueMemberSS)
	if !ok {
		return nil
	}
	out := append([]string(nil), ss.Value...)
	sort.Strings(out)
	return out
}
