package kinesistest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// benchEntries returns n PutRecords entries of 100-byte records with
// distinct partition keys.
func benchEntries(n int) []types.PutRecordsRequestEntry {
	data := make([]byte, 100)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	out := make([]types.PutRecordsRequestEntry, n)
	for i := range out {
		out[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("partition-key-%d", i)), Data: data}
	}
	return out
}

func benchServer(b *testing.B, clock kinesistest.Clock, stream string, shards int) (*kinesistest.Server, *kinesis.Client) {
	b.Helper()
	srv := kinesistest.StartT(b, kinesistest.WithClock(clock), kinesistest.WithStream(stream, shards))
	return srv, srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
}

// BenchmarkPutRecords measures ingest through the SDK: 500 entries of 100
// bytes per request, four concurrent clients' worth of goroutines, four shards.
func BenchmarkPutRecords(b *testing.B) {
	clock := kinesistest.NewManualClock(time.Now())
	_, kc := benchServer(b, clock, "bench", 4)
	recs := benchEntries(500)
	in := &kinesis.PutRecordsInput{StreamName: aws.String("bench"), Records: recs}
	var calls atomic.Int64
	b.SetParallelism(2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := kc.PutRecords(context.Background(), in)
			if err != nil {
				b.Error(err)
				return
			}
			if *out.FailedRecordCount != 0 {
				b.Errorf("%d entries failed", *out.FailedRecordCount)
				return
			}
			// Let retention drop old records now and then, to keep memory flat.
			if calls.Add(1)%200 == 0 {
				clock.Advance(25 * time.Hour)
			}
		}
	})
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkGetRecords measures reading through the SDK: pages of up to
// 10,000 records of 100 bytes from one shard holding 100,000.
func BenchmarkGetRecords(b *testing.B) {
	_, kc := benchServer(b, kinesistest.NewManualClock(time.Now()), "bench", 1)
	ctx := context.Background()
	recs := benchEntries(500)
	for range 200 {
		if _, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("bench"), Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	trimHorizon := func() *string {
		out, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("bench"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			b.Fatal(err)
		}
		return out.ShardIterator
	}
	it := trimHorizon()
	read := 0
	b.ResetTimer()
	for range b.N {
		out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(10000)})
		if err != nil {
			b.Fatal(err)
		}
		read += len(out.Records)
		it = out.NextShardIterator
		if len(out.Records) == 0 {
			it = trimHorizon()
		}
	}
	b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "records/s")
}
