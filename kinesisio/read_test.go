package kinesisio

import (
	"fmt"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// counter returns the committed value of a kinesisio counter, summed over steps.
func counter(res beam.PipelineResult, name string) int64 {
	var total int64
	for _, c := range res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == metricsNamespace && r.Name() == name
	}).Counters() {
		total += c.Committed
	}
	return total
}

func TestReadBoundedReturnsExactlyTheWrittenRecords(t *testing.T) {
	const stream = "bounded"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 4))
	// 40,000 plain records and 500 aggregates of 20: 50,000 user records.
	w := newWorkload(t, "b", 40000, 500, 20)
	// A record that starts with the KPL magic but is not an aggregate is passed through
	// whole, and an aggregate whose user records span shards is dropped (KCL rules).
	bogus := append(append([]byte{}, kpl.Magic[:]...), []byte("not really an aggregate, checksum missing")...)
	spread := kpl.NewAggregator(1<<20, 100)
	for _, pk := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if err := spread.Add(kpl.UserRecord{PartitionKey: pk, Data: []byte(pk)}); err != nil {
			t.Fatal(err)
		}
	}
	wrong, err := spread.Build()
	if err != nil {
		t.Fatal(err)
	}
	w.entries = append(w.entries,
		types.PutRecordsRequestEntry{PartitionKey: aws.String("bogus"), Data: bogus},
		types.PutRecordsRequestEntry{PartitionKey: aws.String(wrong.PartitionKey), ExplicitHashKey: aws.String(wrong.ExplicitHashKey), Data: wrong.Data})
	putAll(t, srv.Client(), stream, w.entries)

	want := expected(t, srv, stream, w.aggregates, func(s kinesistest.StoredRecord) bool { return string(s.Data) != string(wrong.Data) })
	if len(want) != 50001 {
		t.Fatalf("expected %d records, want 50,000 user records plus the passed-through one", len(want))
	}

	p, s := beam.NewPipelineWithRoot()
	recs := ReadBounded(s, stream, connect(srv, WithStartingPosition(TrimHorizon()))...)
	passert.Equals(s, canonical(s, recs), anys(want)...)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := counter(res, "records"); got != 50001 {
		t.Errorf("records counter = %d, want 50001", got)
	}
	if got := counter(res, "aggregates_passed_through"); got != 1 {
		t.Errorf("aggregates_passed_through = %d, want 1", got)
	}
	if got := counter(res, "aggregates_outside_shard"); got != 1 {
		t.Errorf("aggregates_outside_shard = %d, want 1", got)
	}
}

func init() {
	register.Function2x1(withEventTime)
}

// withEventTime renders a record's data with the event time Beam gave it.
func withEventTime(et beam.EventTime, r Record) string {
	return fmt.Sprintf("%q@%d|agg=%t", r.Data, et.Milliseconds(), r.Aggregated)
}

// TestReadBoundedAppliesACustomEventTimeAndCanKeepAggregatesWhole reads with a registered
// custom event time function (arrival + 5ms) and deaggregation off: every record, the
// aggregate included, comes out whole and stamped by the function.
func TestReadBoundedAppliesACustomEventTimeAndCanKeepAggregatesWhole(t *testing.T) {
	const stream = "custom"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	w := newWorkload(t, "e", 3, 1, 3)
	putAll(t, srv.Client(), stream, w.entries)
	stored, err := srv.StreamRecords(stream)
	if err != nil {
		t.Fatal(err)
	}
	var want []any
	for _, s := range stored {
		want = append(want, fmt.Sprintf("%q@%d|agg=false", s.Data, s.ArrivalTime.UnixMilli()+5))
	}
	if len(want) != 4 {
		t.Fatalf("stored %d records, want 4", len(want))
	}
	p, s := beam.NewPipelineWithRoot()
	recs := ReadBounded(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithoutDeaggregation(),
		WithCustomWatermarkPolicy(&testTimeFn{Offset: 5}))...)
	passert.Equals(s, beam.ParDo(s, withEventTime, recs), want...)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}
