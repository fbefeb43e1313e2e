package kinesisio

import (
	"slices"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// BenchmarkWriteShardThroughput measures end to end (Prism, the real SDK over HTTP, a
// server enforcing 1000 records/s and 1 MiB/s per shard) how many 100-byte messages a
// shard takes per second, with aggregation and without, in the same run.
//
// Rates are steady-state: the first second of arrivals is left out because both the
// server's and the writer's token buckets start full (one second of burst). Reported:
//   - agg-msgs/s/shard and plain-msgs/s/shard: messages per second per shard;
//   - agg-share-of-1MiB: messages/s × (key + data bytes) / 1 MiB, what the shard's byte
//     limit carries of user bytes as the service counts them (target ≥ 0.9);
//   - agg-data-share-of-1MiB: the same counting only the 100 data bytes;
//   - agg/plain: the ratio of the two message rates (target ≥ 8).
func BenchmarkWriteShardThroughput(b *testing.B) {
	const shards = 2
	const seconds = 3 // of steady state per case, after the one-second burst
	var agg, plain float64
	var aggThrottled, plainThrottled int64
	for i := 0; i < b.N; i++ {
		agg, aggThrottled = measureWrite(b, shards, (seconds+1)*shards*10_000, WithAggregation())
		plain, plainThrottled = measureWrite(b, shards, (seconds+1)*shards*1000, WithoutAggregation())
	}
	m := testMessage(0)
	userBytes := float64(len(m.PartitionKey) + len(m.Data))
	b.ReportMetric(agg, "agg-msgs/s/shard")
	b.ReportMetric(agg*userBytes/(1<<20), "agg-share-of-1MiB")
	b.ReportMetric(agg*float64(len(m.Data))/(1<<20), "agg-data-share-of-1MiB")
	b.ReportMetric(plain, "plain-msgs/s/shard")
	b.ReportMetric(agg/plain, "agg/plain")
	b.ReportMetric(float64(aggThrottled), "agg-throttled-entries")
	b.ReportMetric(float64(plainThrottled), "plain-throttled-entries")
}

// measureWrite writes n messages to a fresh stream with limits on and returns the
// steady-state messages per second per shard and the number of throttled entries.
func measureWrite(b *testing.B, shards, n int, opts ...WriteOption) (float64, int64) {
	b.Helper()
	srv := kinesistest.StartT(b, kinesistest.WithStream("bench", shards), kinesistest.WithLimits())
	p, s := beam.NewPipelineWithRoot()
	Write(s, "bench", generated(s, n), to(srv, opts...)...)
	pr, err := ptest.RunWithMetrics(p)
	if err != nil {
		b.Fatal(err)
	}
	var throttled int64
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		if c.Key.Namespace == "kinesisio.Write" && c.Key.Name == "throttled_entries" {
			throttled += c.Committed
		}
	}
	stored, err := srv.StreamRecords("bench")
	if err != nil {
		b.Fatal(err)
	}
	type arrival struct {
		at    time.Time
		users int
	}
	var arrivals []arrival
	total := 0
	for _, r := range stored {
		users := 1
		if recs, ok, err := kpl.Deaggregate(r.Data); err != nil {
			b.Fatal(err)
		} else if ok {
			users = len(recs)
		}
		total += users
		arrivals = append(arrivals, arrival{r.ArrivalTime, users})
	}
	if total != n {
		b.Fatalf("the stream holds %d messages, %d were written", total, n)
	}
	slices.SortFunc(arrivals, func(x, y arrival) int { return x.at.Compare(y.at) })
	from := arrivals[0].at.Add(time.Second)
	last := arrivals[len(arrivals)-1].at
	counted := 0
	for _, a := range arrivals {
		if !a.at.Before(from) {
			counted += a.users
		}
	}
	secs := last.Sub(from).Seconds()
	if secs <= 0.5 {
		b.Fatalf("only %.2fs of steady state; write more messages", secs)
	}
	return float64(counted) / secs / float64(shards), throttled
}
