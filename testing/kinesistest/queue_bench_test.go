package kinesistest_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// BenchmarkQueueReceiveAck measures what N goroutines of the plain SDK get from a queue:
// each receives up to 10 records (100 bytes each) and acknowledges them in one call, until
// the queue is empty. It reports records/s; the Beam queue read's benchmark compares
// against it.
//
//	go test -run XXX -bench QueueReceiveAck -benchtime 100000x ./testing/kinesistest/
func BenchmarkQueueReceiveAck(b *testing.B) {
	for _, workers := range []int{1, 4, 8} {
		b.Run("goroutines="+strconv.Itoa(workers), func(b *testing.B) {
			srv, err := kinesistest.Start()
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			if err := srv.CreateOnDemandStream("s", 4, ""); err != nil {
				b.Fatal(err)
			}
			arn, err := srv.CreateQueue("q", "s", kinesistest.QueueConfig{})
			if err != nil {
				b.Fatal(err)
			}
			kc := srv.Client()
			ctx := context.Background()
			data := make([]byte, 100)
			for start := 0; start < b.N; start += 500 {
				in := &kinesis.PutRecordsInput{StreamName: aws.String("s")}
				for i := start; i < min(b.N, start+500); i++ {
					in.Records = append(in.Records, types.PutRecordsRequestEntry{PartitionKey: aws.String(strconv.Itoa(i)), Data: data})
				}
				if out, err := kc.PutRecords(ctx, in); err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
					b.Fatalf("PutRecords: %v", err)
				}
			}
			var done atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						out, err := kc.ReceiveQueueRecords(ctx, &kinesis.ReceiveQueueRecordsInput{QueueARN: &arn, WaitTimeSeconds: aws.Int32(0)})
						if err != nil {
							b.Error(err)
							return
						}
						if len(out.QueueRecords) == 0 {
							return
						}
						in := &kinesis.AcknowledgeQueueRecordsInput{QueueARN: &arn}
						for _, r := range out.QueueRecords {
							in.Entries = append(in.Entries, types.AcknowledgeQueueRecordsRequestEntry{ReceiptHandle: r.ReceiptHandle})
						}
						ack, err := kc.AcknowledgeQueueRecords(ctx, in)
						if err != nil || len(ack.Failed) != 0 {
							b.Errorf("AcknowledgeQueueRecords: %v", err)
							return
						}
						done.Add(int64(len(ack.Successful)))
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if got := done.Load(); got != int64(b.N) {
				b.Fatalf("acknowledged %d records, want %d", got, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
