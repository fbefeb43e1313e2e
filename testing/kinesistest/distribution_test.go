package kinesistest_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// createOnDemand creates an ON_DEMAND stream over HTTP (4 shards) with the
// given record distribution strategy ("" leaves it out).
func (e *env) createOnDemand(name string, strategy types.RecordDistributionStrategy) {
	e.t.Helper()
	_, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{
		StreamName:                 aws.String(name),
		StreamModeDetails:          &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand},
		RecordDistributionStrategy: strategy,
	})
	if err != nil {
		e.t.Fatalf("CreateStream(%s, ON_DEMAND, %q): %v", name, strategy, err)
	}
}

func (e *env) summary(name string) *types.StreamDescriptionSummary {
	e.t.Helper()
	out, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		e.t.Fatalf("DescribeStreamSummary(%s): %v", name, err)
	}
	return out.StreamDescriptionSummary
}

func (e *env) setDistribution(name string, strategy types.RecordDistributionStrategy) error {
	_, err := e.kc.UpdateStreamRecordDistributionStrategy(e.ctx, &kinesis.UpdateStreamRecordDistributionStrategyInput{
		StreamARN: aws.String(e.srv.StreamARN(name)), RecordDistributionStrategy: strategy,
	})
	return err
}

// putKeyless writes one record without a partition key.
func (e *env) putKeyless(stream, data string) (*kinesis.PutRecordOutput, error) {
	return e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), Data: []byte(data)})
}

// shardsOf lists the shard each result went to, as shard numbers.
func shardsOf(results []types.PutRecordsResultEntry) []int {
	out := make([]int, len(results))
	for i, r := range results {
		fmt.Sscanf(aws.ToString(r.ShardId), "shardId-%d", &out[i])
	}
	return out
}

func TestAutoStreamDealsRecordsToTheOpenShardsInTurn(t *testing.T) {
	e := newEnv(t)
	e.createOnDemand("auto", types.RecordDistributionStrategyAuto)
	// Keys, explicit hash keys and no key at all: all ignored.
	recs := []types.PutRecordsRequestEntry{
		{Data: []byte("0")},
		{Data: []byte("1"), PartitionKey: aws.String("same")},
		{Data: []byte("2"), PartitionKey: aws.String("same")},
		{Data: []byte("3"), PartitionKey: aws.String("same"), ExplicitHashKey: aws.String("0")},
		{Data: []byte("4"), ExplicitHashKey: aws.String("0")},
		{Data: []byte("5")}, {Data: []byte("6")}, {Data: []byte("7")}, {Data: []byte("8")}, {Data: []byte("9")},
	}
	out := e.putRecords("auto", recs)
	if got, want := shardsOf(out.Records), []int{0, 1, 2, 3, 0, 1, 2, 3, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("PutRecords placed entries in shards %v, want %v", got, want)
	}
	// The turn carries over to the next request and to PutRecord.
	p, err := e.putKeyless("auto", "10")
	if err != nil || *p.ShardId != sid(2) {
		t.Fatalf("PutRecord without a key: %v %+v, want shard 2", err, p)
	}
	p = e.putEHK("auto", "0", "11")
	if *p.ShardId != sid(3) {
		t.Fatalf("PutRecord with explicit hash key 0 went to %s, want %s", *p.ShardId, sid(3))
	}
	perShard := map[string]int{}
	stored, _ := e.srv.StreamRecords("auto")
	for _, r := range stored {
		perShard[r.ShardID]++
	}
	if want := map[string]int{sid(0): 3, sid(1): 3, sid(2): 3, sid(3): 3}; fmt.Sprint(perShard) != fmt.Sprint(want) {
		t.Errorf("records per shard %v, want %v", perShard, want)
	}
}

func TestAutoStreamIgnoresTheExplicitHashKeyRangeButNotTheModel(t *testing.T) {
	e := newEnv(t)
	e.createOnDemand("auto", types.RecordDistributionStrategyAuto)
	// 2^128 is outside the key space: an InvalidArgumentException elsewhere.
	e.putEHK("auto", "340282366920938463463374607431768211456", "x")
	_, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("auto"), Data: []byte("x"), ExplicitHashKey: aws.String("12a")})
	wantAPIError(t, err, "ValidationException",
		`1 validation error detected: Value '12a' at 'explicitHashKey' failed to satisfy constraint: Member must satisfy regular expression pattern: 0|([1-9]\d{0,38})`)
	_, err = e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("auto"), Data: []byte("x"), PartitionKey: aws.String("")})
	wantErrorType[*types.ValidationException](t, err)
	// The record size still counts a key that was sent.
	_, err = e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("auto"), Data: make([]byte, 1<<20), PartitionKey: aws.String("k")})
	wantAPIError(t, err, "InvalidArgumentException",
		"Record size 1048577 bytes (data plus partition key) exceeds the maximum record size of 1048576 bytes for stream auto under account 123456789012.")
	if _, err := e.putKeyless("auto", string(make([]byte, 1<<20))); err != nil {
		t.Errorf("a keyless record of exactly 1 MiB: %v", err)
	}
}

func TestAutoStreamRejectsSequenceNumberForOrdering(t *testing.T) {
	e := newEnv(t)
	e.createOnDemand("auto", types.RecordDistributionStrategyAuto)
	first, err := e.putKeyless("auto", "a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{
		StreamName: aws.String("auto"), Data: []byte("b"), PartitionKey: aws.String("k"), SequenceNumberForOrdering: first.SequenceNumber,
	})
	wantErrorType[*types.InvalidArgumentException](t, err)
	wantAPIError(t, err, "InvalidArgumentException",
		"SequenceNumberForOrdering is not supported for stream auto under account 123456789012 because its record distribution strategy is AUTO.")
	if recs, _ := e.srv.StreamRecords("auto"); len(recs) != 1 {
		t.Errorf("stored %d records, want 1", len(recs))
	}
}

func TestAutoStreamReturnsAPartitionKeyOnlyWhenOneWasSent(t *testing.T) {
	e := newEnv(t, noHeartbeats)
	if err := e.srv.CreateOnDemandStream("auto", 1, types.RecordDistributionStrategyAuto); err != nil {
		t.Fatal(err)
	}
	if _, err := e.putKeyless("auto", "keyless"); err != nil {
		t.Fatal(err)
	}
	e.put("auto", "kept", "keyed")
	check := func(how string, recs []types.Record) {
		t.Helper()
		if len(recs) != 2 || recs[0].PartitionKey != nil || aws.ToString(recs[1].PartitionKey) != "kept" {
			t.Fatalf("%s: %d records, keys %v and %v; want nil, then \"kept\"", how, len(recs), recs[0].PartitionKey, recs[1].PartitionKey)
		}
	}
	check("GetRecords", e.getRecords(e.iterator("auto", sid(0), types.ShardIteratorTypeTrimHorizon), 0).Records)

	c := e.registerConsumer("auto", "efo")
	s := e.subscribe(*c.ConsumerARN, sid(0), types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	check("SubscribeToShard", s.next().Records)

	stored, _ := e.srv.StreamRecords("auto")
	if stored[0].PartitionKey != "" || stored[1].PartitionKey != "kept" {
		t.Errorf("stored keys %q, %q", stored[0].PartitionKey, stored[1].PartitionKey)
	}
}

func TestUserPartitionKeyStreamsStillRequireAKey(t *testing.T) {
	e := newEnv(t)
	e.createStream("prov", 1)
	e.createOnDemand("od", "")
	for _, stream := range []string{"prov", "od", "missing"} {
		_, err := e.putKeyless(stream, "x")
		wantAPIError(t, err, "ValidationException",
			"1 validation error detected: Value null at 'partitionKey' failed to satisfy constraint: Member must not be null")
		_, err = e.kc.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: []types.PutRecordsRequestEntry{
			{Data: []byte("x"), PartitionKey: aws.String("k")}, {Data: []byte("y")}, {Data: []byte("z"), PartitionKey: aws.String("")},
		}})
		wantAPIError(t, err, "ValidationException",
			"2 validation errors detected: Value null at 'records.2.member.partitionKey' failed to satisfy constraint: Member must not be null; "+
				"Value '' at 'records.3.member.partitionKey' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
}

func TestRecordDistributionStrategyAtCreation(t *testing.T) {
	e := newEnv(t)
	e.createStream("prov", 1)
	e.createOnDemand("od", "")
	e.createOnDemand("od-auto", types.RecordDistributionStrategyAuto)
	for name, want := range map[string]types.RecordDistributionStrategy{"prov": "", "od": "USER_PARTITION_KEY", "od-auto": "AUTO"} {
		if got := e.summary(name).RecordDistributionStrategy; got != want {
			t.Errorf("stream %s: RecordDistributionStrategy %q, want %q (only ON_DEMAND streams report one)", name, got, want)
		}
	}

	_, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("prov-auto"), ShardCount: aws.Int32(1), RecordDistributionStrategy: types.RecordDistributionStrategyAuto})
	wantErrorType[*types.InvalidArgumentException](t, err)
	wantAPIError(t, err, "InvalidArgumentException",
		"Record distribution strategy AUTO is not supported for stream prov-auto under account 123456789012 because it is in PROVISIONED capacity mode; AUTO needs ON_DEMAND.")
	_, err = e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("bad"), StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand}, RecordDistributionStrategy: "RANDOM"})
	wantAPIError(t, err, "ValidationException",
		"1 validation error detected: Value 'RANDOM' at 'recordDistributionStrategy' failed to satisfy constraint: Member must satisfy enum value set: [AUTO, USER_PARTITION_KEY]")
	// USER_PARTITION_KEY is what a provisioned stream does anyway.
	if _, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("prov-user"), ShardCount: aws.Int32(1), RecordDistributionStrategy: types.RecordDistributionStrategyUserPartitionKey}); err != nil {
		t.Errorf("CreateStream PROVISIONED with USER_PARTITION_KEY: %v", err)
	}
	if err := e.srv.CreateOnDemandStream("direct", 2, "NONE"); err == nil {
		t.Errorf("CreateOnDemandStream accepted strategy NONE")
	}
}

func TestSwitchingTheStrategyAppliesToTheNextRecord(t *testing.T) {
	e := newEnv(t)
	e.createOnDemand("od", "")
	byKey := *e.put("od", "k", "before").ShardId
	if err := e.setDistribution("od", types.RecordDistributionStrategyAuto); err != nil {
		t.Fatalf("switching to AUTO: %v", err)
	}
	if got := e.summary("od"); got.RecordDistributionStrategy != types.RecordDistributionStrategyAuto || got.StreamStatus != types.StreamStatusActive {
		t.Errorf("after the switch: %s, %s; want AUTO, ACTIVE", got.RecordDistributionStrategy, got.StreamStatus)
	}
	var placed []string
	for i := range 4 {
		placed = append(placed, *e.put("od", "k", fmt.Sprint("auto-", i)).ShardId)
	}
	if want := []string{sid(0), sid(1), sid(2), sid(3)}; !slices.Equal(placed, want) {
		t.Errorf("under AUTO the same key went to %v, want %v", placed, want)
	}
	if _, err := e.putKeyless("od", "keyless"); err != nil {
		t.Errorf("keyless put under AUTO: %v", err)
	}

	if err := e.setDistribution("od", types.RecordDistributionStrategyUserPartitionKey); err != nil {
		t.Fatalf("switching back: %v", err)
	}
	_, err := e.putKeyless("od", "x")
	wantErrorType[*types.ValidationException](t, err)
	if got := *e.put("od", "k", "after").ShardId; got != byKey {
		t.Errorf("back under USER_PARTITION_KEY key k went to %s, want %s as before", got, byKey)
	}
	// Records keep the shard they were stored in.
	stored, _ := e.srv.StreamRecords("od")
	where := map[string]string{}
	for _, r := range stored {
		where[string(r.Data)] = r.ShardID
	}
	if len(stored) != 7 || where["before"] != byKey || where["auto-1"] != sid(1) || where["after"] != byKey {
		t.Errorf("stored %d records at %v", len(stored), where)
	}
}

func TestUpdateRecordDistributionStrategyErrors(t *testing.T) {
	e := newEnv(t)
	e.createStream("prov", 1)
	for _, s := range []types.RecordDistributionStrategy{types.RecordDistributionStrategyAuto, types.RecordDistributionStrategyUserPartitionKey} {
		err := e.setDistribution("prov", s)
		wantErrorType[*types.InvalidArgumentException](t, err)
		wantAPIError(t, err, "InvalidArgumentException",
			"UpdateStreamRecordDistributionStrategy is not supported for stream prov under account 123456789012 because it is in PROVISIONED capacity mode; the record distribution strategy is a setting of ON_DEMAND streams.")
	}
	wantErrorType[*types.ResourceNotFoundException](t, e.setDistribution("missing", types.RecordDistributionStrategyAuto))
	e.createOnDemand("od", "")
	wantAPIError(t, e.setDistribution("od", "RANDOM"), "ValidationException",
		"1 validation error detected: Value 'RANDOM' at 'recordDistributionStrategy' failed to satisfy constraint: Member must satisfy enum value set: [AUTO, USER_PARTITION_KEY]")
}

// TestSwitchingUnderConcurrentPuts switches a stream back and forth while
// producers write keyless records: each put either lands (AUTO) or fails with
// ValidationException (USER_PARTITION_KEY), and the server stores exactly the
// ones that landed.
func TestSwitchingUnderConcurrentPuts(t *testing.T) {
	e := newEnv(t)
	if err := e.srv.CreateOnDemandStream("flip", 2, types.RecordDistributionStrategyAuto); err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		landed int
	)
	for p := range 4 {
		wg.Go(func() {
			for i := range 50 {
				_, err := e.putKeyless("flip", fmt.Sprint(p, "-", i))
				if err == nil {
					mu.Lock()
					landed++
					mu.Unlock()
					continue
				}
				if ve := (*types.ValidationException)(nil); !errors.As(err, &ve) {
					t.Errorf("a put during the switches: %v, want a ValidationException or success", err)
				}
			}
		})
	}
	for i := range 20 {
		s := types.RecordDistributionStrategyUserPartitionKey
		if i%2 == 1 {
			s = types.RecordDistributionStrategyAuto
		}
		if err := e.setDistribution("flip", s); err != nil {
			t.Errorf("switch %d: %v", i, err)
		}
	}
	wg.Wait()
	if stored, _ := e.srv.StreamRecords("flip"); len(stored) != landed {
		t.Errorf("stored %d records, %d puts succeeded", len(stored), landed)
	}
}
