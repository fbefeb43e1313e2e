package kinesisio

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.DoFn2x0[Record, func(int)](&countFn{})
	register.Emitter1[int]()
	register.Function1x0(discardCount)
}

var (
	benchCount            atomic.Int64
	benchFirst, benchLast atomic.Int64 // UnixNano of the first and last record seen
)

// countFn counts the records it sees, notes when the first and last arrived, and emits its
// count per bundle. (A read whose stage has no output at all makes Prism's bundle loop spin
// on a closed channel for the whole bundle, eating a core; a downstream aggregation, as real
// pipelines have, avoids that.)
type countFn struct{ n int }

func (f *countFn) StartBundle(func(int)) { f.n = 0 }

func (f *countFn) ProcessElement(_ Record, _ func(int)) {
	now := time.Now().UnixNano()
	if benchCount.Add(1) == 1 {
		benchFirst.Store(now)
	}
	benchLast.Store(now)
	f.n++
}

func (f *countFn) FinishBundle(emit func(int)) { emit(f.n) }

func discardCount(int) {}

// getRecordsLoop is the baseline: a plain aws-sdk-go-v2 reader with one goroutine per shard,
// reading from TRIM_HORIZON with Limit 10000 until the shard is caught up.
func getRecordsLoop(ctx context.Context, client *kinesis.Client, stream string) (int64, error) {
	out, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return 0, err
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(out.Shards))
	for _, sh := range out.Shards {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
				StreamName: aws.String(stream), ShardId: aws.String(id), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				errs <- err
				return
			}
			iter := it.ShardIterator
			for iter != nil {
				res, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
				if err != nil {
					errs <- err
					return
				}
				total.Add(int64(len(res.Records)))
				if aws.ToInt64(res.MillisBehindLatest) == 0 && len(res.Records) == 0 {
					return
				}
				iter = res.NextShardIterator
			}
		}(aws.ToString(sh.ShardId))
	}
	wg.Wait()
	close(errs)
	return total.Load(), <-errs
}

// BenchmarkReadBoundedVsGetRecordsLoop reads the same 400,000 records (100-byte payloads)
// with ReadBounded on Prism and with a plain GetRecords loop (one goroutine per shard), and
// reports both rates and their ratio (the design's target is at least 0.8). It runs with
// one shard (the reader against one loop goroutine) and with four.
func BenchmarkReadBoundedVsGetRecordsLoop(b *testing.B) {
	for _, shards := range []int{1, 4} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) { benchmarkReadBounded(b, shards) })
	}
}

func benchmarkReadBounded(b *testing.B, shards int) {
	const stream, records = "bench", 400000
	srv := kinesistest.StartT(b, kinesistest.WithStream(stream, shards))
	var entries []types.PutRecordsRequestEntry
	payload := make([]byte, 100)
	for i := range records {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("pk-", i)), Data: payload})
	}
	putAll(b, srv.Client(), stream, entries)
	client := srv.Client()
	ctx := context.Background()

	var loopTime, beamTime, readTime time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		n, err := getRecordsLoop(ctx, client, stream)
		if err != nil || n != records {
			b.Fatalf("GetRecords loop read %d records: %v", n, err)
		}
		loopTime += time.Since(start)

		benchCount.Store(0)
		p, s := beam.NewPipelineWithRoot()
		counts := beam.ParDo(s, &countFn{}, ReadBounded(s, stream, connect(srv, WithStartingPosition(TrimHorizon()))...))
		beam.ParDo0(s, discardCount, stats.Sum(s, counts))
		start = time.Now()
		if err := ptest.Run(p); err != nil {
			b.Fatal(err)
		}
		beamTime += time.Since(start)
		readTime += time.Duration(benchLast.Load() - benchFirst.Load())
		if n := benchCount.Load(); n != records {
			b.Fatalf("ReadBounded read %d records, want %d", n, records)
		}
	}
	loopRate := float64(records*b.N) / loopTime.Seconds()
	beamRate := float64(records*b.N) / beamTime.Seconds()
	b.ReportMetric(loopRate, "loop-records/s")
	b.ReportMetric(beamRate, "readbounded-records/s")
	b.ReportMetric(beamRate/loopRate, "ratio")
	// The same, counting only from the first record emitted to the last (no job start-up).
	b.ReportMetric(float64(records*b.N)/readTime.Seconds()/loopRate, "ratio-read-phase")
}
