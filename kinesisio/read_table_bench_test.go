package kinesisio

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// BenchmarkReadCheckpointTableCost streams the same backlog (4 shards, 40,000 records, read
// from TRIM_HORIZON, a checkpoint every 1,000 records) without and with a checkpoint table on
// dynalite, in one run, and reports the throughput ratio, the DynamoDB calls per 1,000
// records and the commit lag.
func BenchmarkReadCheckpointTableCost(b *testing.B) {
	const stream, shards, records = "tablecost", 4, 40000
	srv := kinesistest.StartT(b, kinesistest.WithStream(stream, shards))
	var entries []types.PutRecordsRequestEntry
	for i := range records {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("pk", i)), Data: make([]byte, 100)})
	}
	putAll(b, srv.Client(), stream, entries)
	dyn := emulatorsT(b)
	run := func(table string) (perSec float64) {
		benchCount.Store(0)
		opts := connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(4*time.Second), WithMaxRecordsPerFetch(1000))
		if table != "" {
			opts = append(opts, WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn))
		}
		p, s := beam.NewPipelineWithRoot()
		counts := beam.ParDo(s, &countFn{}, Read(s, stream, opts...))
		beam.ParDo0(s, discardCount, stats.Sum(s, counts))
		if err := ptest.Run(p); err != nil {
			b.Fatal(err)
		}
		if n := benchCount.Load(); n != records {
			b.Fatalf("read %d records, want %d", n, records)
		}
		return float64(records) / time.Duration(benchLast.Load()-benchFirst.Load()).Seconds()
	}
	for i := 0; i < b.N; i++ {
		plain := run("")
		table := fmt.Sprint("cost", i)
		withTable := run(table)
		st := tableStats(table)
		lags := st.LagMs
		b.ReportMetric(plain, "plain_records/s")
		b.ReportMetric(withTable, "table_records/s")
		b.ReportMetric(withTable/plain, "table/plain")
		b.ReportMetric(float64(st.Calls)*1000/records, "dynamodb_calls/1000records")
		if st.Commits > 0 && len(lags) > 0 {
			var sum int64
			for _, ms := range lags {
				sum += ms
			}
			b.ReportMetric(float64(sum)/float64(len(lags)), "commit_lag_avg_ms")
			b.ReportMetric(float64(slices.Max(lags)), "commit_lag_max_ms")
		}
		if len(lags) > 0 {
			slices.Sort(lags)
			b.ReportMetric(float64(lags[len(lags)/2]), "commit_lag_p50_ms")
			b.ReportMetric(float64(lags[len(lags)*99/100]), "commit_lag_p99_ms")
		}
	}
}

// BenchmarkReadHeldCommitCost streams the backlog of BenchmarkReadCheckpointTableCost
// through a windowed pipeline (1 s windows, a sum per window, the sum's output the sink)
// without a table and with WithCommitAfterSinks on dynalite, whose positions wait for their
// windows' sums, in one run. It reports the throughput ratio, the DynamoDB calls per 1,000
// records and the commit lag (end of the reader call to the written item: the token's hold
// until its window's sum is out, then the write).
func BenchmarkReadHeldCommitCost(b *testing.B) {
	const stream, shards, records = "heldcost", 4, 40000
	srv := kinesistest.StartT(b, kinesistest.WithStream(stream, shards))
	var entries []types.PutRecordsRequestEntry
	for i := range records {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("pk", i)), Data: make([]byte, 100)})
	}
	putAll(b, srv.Client(), stream, entries)
	dyn := emulatorsT(b)
	run := func(table string) (perSec float64) {
		benchCount.Store(0)
		opts := connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(4*time.Second), WithMaxRecordsPerFetch(1000))
		if table != "" {
			opts = append(opts, WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn))
		}
		p, s := beam.NewPipelineWithRoot()
		var commit Commit
		recs := Read(s, stream, append(opts, WithCommitAfterSinks(&commit))...)
		beam.ParDo0(s, discardCount, stats.Sum(s, beam.ParDo(s, &countFn{}, recs)))
		sums := stats.Sum(s, beam.ParDo(s, recordOne, beam.WindowInto(s, window.NewFixedWindows(time.Second), recs)))
		commit.After(s, sums)
		if err := ptest.Run(p); err != nil {
			b.Fatal(err)
		}
		if n := benchCount.Load(); n != records {
			b.Fatalf("read %d records, want %d", n, records)
		}
		return float64(records) / time.Duration(benchLast.Load()-benchFirst.Load()).Seconds()
	}
	for i := 0; i < b.N; i++ {
		plain := run("")
		table := fmt.Sprint("heldcost", i)
		held := run(table)
		st := tableStats(table)
		lags, calls, commits := st.LagMs, st.Calls, st.Commits
		b.ReportMetric(plain, "plain_records/s")
		b.ReportMetric(held, "held_records/s")
		b.ReportMetric(held/plain, "held/plain")
		b.ReportMetric(float64(calls)*1000/records, "dynamodb_calls/1000records")
		b.ReportMetric(float64(commits), "commits")
		if len(lags) > 0 {
			slices.Sort(lags)
			b.ReportMetric(float64(lags[len(lags)/2]), "commit_lag_p50_ms")
			b.ReportMetric(float64(lags[len(lags)*99/100]), "commit_lag_p99_ms")
		}
	}
}
