package producer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

// setStrategy switches the stream's record distribution strategy, as an operator would.
func setStrategy(t *testing.T, srv *kinesistest.Server, stream string, strategy types.RecordDistributionStrategy) {
	t.Helper()
	if _, err := srv.Client().UpdateStreamRecordDistributionStrategy(context.Background(), &kinesis.UpdateStreamRecordDistributionStrategyInput{
		StreamARN: aws.String(srv.StreamARN(stream)), RecordDistributionStrategy: strategy,
	}); err != nil {
		t.Fatal(err)
	}
}

// keyless is record i without a partition key.
func keyless(i int) kpl.UserRecord {
	r := record(i)
	r.PartitionKey = ""
	return r
}

func TestDescribeStreamReadsTheLimitAndTheStrategy(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("s", 1))
	if err := srv.CreateOnDemandStream("auto", 2, types.RecordDistributionStrategyAuto); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	policy := testConfig("s", true).Retry
	got, err := DescribeStream(ctx, srv.Client(), "s", policy)
	if err != nil || got != (StreamSettings{MaxRecordBytes: 1 << 20}) {
		t.Fatalf("default stream: %+v, %v; want 1 MiB, keys as usual", got, err)
	}
	raiseMaxRecordSize(t, srv, "s", 5000)
	if got, err := DescribeStream(ctx, srv.Client(), "s", policy); err != nil || got.MaxRecordBytes != 5000<<10 {
		t.Fatalf("stream raised to 5000 KiB: %+v, %v", got, err)
	}
	if got, err := DescribeStream(ctx, srv.Client(), "auto", policy); err != nil || !got.ServiceDistributed {
		t.Fatalf("AUTO stream: %+v, %v; want ServiceDistributed", got, err)
	}
	if _, err := DescribeStream(ctx, srv.Client(), "missing", policy); err == nil || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Fatalf("missing stream: %v, want ResourceNotFoundException", err)
	}
}

// On an AUTO stream the producer sends every user record as a record of its own, with or
// without a partition key, however aggregation is configured: the stream holds exactly the
// records put, no aggregate, spread by the service over every shard.
func TestAServiceDistributedStreamGetsEveryRecordAsARecordOfItsOwn(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithOnDemandStream("auto", 4, types.RecordDistributionStrategyAuto))
	cfg := testConfig("auto", true)
	cfg.ServiceDistributed = true
	p := newProducer(t, srv, cfg)
	const n = 2000
	ctx := context.Background()
	want := map[string]int{}
	for i := range n {
		r := record(i)
		if i%3 == 0 {
			r = keyless(i)
		}
		want[r.PartitionKey+"|"+string(r.Data)]++
		if err := p.Put(ctx, r, i); err != nil {
			t.Fatalf("Put(%d): %v", i, err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if f := p.Failures(); len(f) != 0 {
		t.Fatalf("%d failures, first: %+v", len(f), f[0])
	}
	res := readBack(t, srv, "auto")
	if d := streamcheck.Diff(streamcheck.Multiset(res.Kept(), userKey), want, 5); d != "" {
		t.Fatal(d)
	}
	if res.Aggregates != 0 || res.KinesisRecords != n {
		t.Errorf("%d Kinesis records, %d aggregates; want %d records of their own", res.KinesisRecords, res.Aggregates, n)
	}
	perShard := map[string]int{}
	for _, u := range res.Records {
		perShard[u.Shard]++
	}
	if len(perShard) != 4 {
		t.Errorf("records landed on %d shards (%v); the service spreads them over all 4", len(perShard), perShard)
	}
	if st := p.TakeStats(); st.Unaggregated != n || st.UserRecords != n || st.DistributionSwitches != 0 {
		t.Errorf("stats %+v; want %d unaggregated user records and no switch", st, n)
	}
}

// A stream switched to AUTO while the producer aggregates for it: the aggregates sent after
// the switch land on any shard, where a KCL consumer would drop the records outside that
// shard's range. The producer reads the strategy again on that evidence, sends those
// aggregates' records again, and from then on sends records of their own: what a KCL
// consumer keeps holds every record put at least once.
func TestASwitchToAutoWhileAggregatingLosesNothing(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithOnDemandStream("switch", 4, types.RecordDistributionStrategyUserPartitionKey))
	cfg := testConfig("switch", true)
	p := newProducer(t, srv, cfg)
	ctx := context.Background()
	putAll(t, p, 0, 1000)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	setStrategy(t, srv, "switch", types.RecordDistributionStrategyAuto)
	putAll(t, p, 1000, 3000)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if f := p.Failures(); len(f) != 0 {
		t.Fatalf("%d failures, first: %+v", len(f), f[0])
	}
	res := readBack(t, srv, "switch")
	kept := streamcheck.Multiset(res.Kept(), userKey)
	for k := range wantMultiset(0, 3000) {
		if kept[k] == 0 {
			t.Fatalf("a KCL consumer loses %s", k)
		}
	}
	st := p.TakeStats()
	if st.DistributionSwitches != 1 || !p.ServiceDistributed() || st.Unaggregated == 0 {
		t.Errorf("stats %+v, service distributed %v; want the switch adopted", st, p.ServiceDistributed())
	}
	t.Logf("%d user records put; %d stored, %d kept by a KCL consumer; %d aggregates on a wrong shard sent again; %d records sent unaggregated",
		3000, len(res.Records), len(res.Kept()), st.WrongShard, st.Unaggregated)
}

// A stream switched away from AUTO while the producer sends records without a partition
// key: the service refuses such a request whole; the producer reads the strategy again,
// fails the keyless records as invalid, with the reason, and sends the others by their
// keys. Nothing is dropped without a word.
func TestASwitchAwayFromAutoFailsKeylessRecordsAsInvalid(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithOnDemandStream("back", 2, types.RecordDistributionStrategyAuto))
	cfg := testConfig("back", false)
	cfg.ServiceDistributed = true
	p := newProducer(t, srv, cfg)
	ctx := context.Background()
	setStrategy(t, srv, "back", types.RecordDistributionStrategyUserPartitionKey)
	want := map[string]int{}
	keylessPut, refused := 0, 0
	for i := range 200 {
		r := record(i)
		if i%2 == 0 {
			r = keyless(i)
			keylessPut++
		} else {
			want[userKey(streamcheck.UserRecord{PartitionKey: r.PartitionKey, Data: r.Data})]++
		}
		err := p.Put(ctx, r, i)
		var invalid *InvalidError
		switch {
		case errors.As(err, &invalid) && r.PartitionKey == "":
			refused++ // the producer knew by then that the stream wants keys
		case err != nil:
			t.Fatalf("Put(%d): %v", i, err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res := readBack(t, srv, "back")
	if d := streamcheck.Diff(streamcheck.Multiset(res.Records, userKey), want, 5); d != "" {
		t.Fatal(d)
	}
	failed := p.Failures()
	for _, f := range failed {
		if f.Record.PartitionKey != "" || f.ErrorCode != CodeInvalid || !strings.Contains(f.Reason, "partition key") {
			t.Errorf("failure %+v; want only keyless records, as invalid", f)
		}
	}
	if refused+len(failed) != keylessPut {
		t.Errorf("%d keyless records put: %d refused by Put, %d failed after it; want every one accounted for", keylessPut, refused, len(failed))
	}
	if p.ServiceDistributed() {
		t.Error("the producer still takes the stream for AUTO")
	}
	t.Logf("%d keyless records: %d refused by Put, %d failed as invalid after the switch was found", keylessPut, refused, len(failed))
}
