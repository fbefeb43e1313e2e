package kinesisio

import (
	"fmt"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

// Streams that distribute records themselves (RecordDistributionStrategy AUTO): the
// service picks each record's shard and ignores partition keys and explicit hash keys.

func init() {
	register.DoFn2x0[[]byte, func(Message)](&autoMessagesFn{})
}

// autoMessagesFn emits messages 0..N-1 of testMessage, every third without a partition key.
type autoMessagesFn struct{ N int }

func (f *autoMessagesFn) ProcessElement(_ []byte, emit func(Message)) {
	for i := range f.N {
		emit(autoMessage(i))
	}
}

func autoMessage(i int) Message {
	m := testMessage(i)
	if i%3 == 0 {
		m.PartitionKey = ""
	}
	return m
}

// Write to an AUTO stream never aggregates, even with aggregation on (the default), and
// takes messages without a partition key: the stream holds each message exactly once as a
// record of its own, which a KCL consumer keeps on whatever shard it lands.
func TestWriteToAnAutoStreamWritesRecordsOfTheirOwn(t *testing.T) {
	const n = 3000
	srv := kinesistest.StartT(t, kinesistest.WithOnDemandStream("auto", 4, types.RecordDistributionStrategyAuto))
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.ParDo(s, &autoMessagesFn{N: n}, beam.Impulse(s))
	passert.Empty(s, Write(s, "auto", msgs, to(srv)...))
	pr, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for i := range n {
		m := autoMessage(i)
		want[m.PartitionKey+"|"+string(m.Data)]++
	}
	res := readStream(t, srv, "auto")
	if d := streamcheck.Diff(streamcheck.Multiset(res.Kept(), userRecordKey), want, 5); d != "" {
		t.Fatal(d)
	}
	if res.Aggregates != 0 || res.KinesisRecords != n {
		t.Errorf("%d Kinesis records, %d aggregates; want %d records of their own", res.KinesisRecords, res.Aggregates, n)
	}
	if got := writeCounter(t, pr, "service_distributed_messages"); got != n {
		t.Errorf("service_distributed_messages = %d, want %d", got, n)
	}
}

// A read of an AUTO stream gives records written without a partition key an empty
// PartitionKey, and keeps every user record of a KPL aggregate on whatever shard the
// service put it: the KCL drops the records of such an aggregate outside the shard's hash
// range, which on an AUTO stream no other shard has.
func TestReadOfAnAutoStreamKeepsEveryRecord(t *testing.T) {
	const stream = "auto"
	srv := kinesistest.StartT(t, kinesistest.WithOnDemandStream(stream, 4, types.RecordDistributionStrategyAuto))
	w := newWorkload(t, "a", 200, 40, 5)
	for i := range 100 {
		w.entries = append(w.entries, types.PutRecordsRequestEntry{Data: []byte(fmt.Sprintf("a keyless %d", i))})
	}
	putAll(t, srv.Client(), stream, w.entries)
	want := expected(t, srv, stream, w.aggregates, nil)
	if len(want) != 200+40*5+100 {
		t.Fatalf("the stream holds %d user records, want %d", len(want), 200+40*5+100)
	}
	p, s := beam.NewPipelineWithRoot()
	recs := ReadBounded(s, stream, connect(srv, WithStartingPosition(TrimHorizon()))...)
	passert.Equals(s, canonical(s, recs), anys(want)...)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	kept, dropped := counter(res, "aggregates_outside_shard_kept"), counter(res, "aggregates_outside_shard")
	t.Logf("%d of 40 aggregates landed outside their shard's range and were kept", kept)
	if kept == 0 || dropped != 0 {
		t.Errorf("aggregates_outside_shard_kept = %d, aggregates_outside_shard = %d; want some kept and none dropped", kept, dropped)
	}
}
