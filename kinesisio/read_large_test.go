package kinesisio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// A 9 MiB record, between small ones, on a stream raised to 10 MiB records, is read exactly
// by polling and by enhanced fan-out. After a GetRecords answer that large the service
// throttles the shard's reads for about 5 seconds: the polling reader waits that out with
// its backoff, without a loop of calls and without failing.
func TestReadA9MiBRecordByPollingAndEnhancedFanOut(t *testing.T) {
	for _, efo := range []bool{false, true} {
		t.Run(fmt.Sprintf("efo=%t", efo), func(t *testing.T) {
			const stream = "large"
			srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1), kinesistest.WithLargeReadThrottle())
			if _, err := srv.Client().UpdateMaxRecordSize(context.Background(), &kinesis.UpdateMaxRecordSizeInput{
				StreamARN: aws.String(srv.StreamARN(stream)), MaxRecordSizeInKiB: aws.Int32(10240)}); err != nil {
				t.Fatal(err)
			}
			big := bytes.Repeat([]byte("9"), 9<<20)
			var entries []types.PutRecordsRequestEntry
			for i := range 3 {
				entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("before-", i)), Data: []byte(fmt.Sprint("small before ", i))})
			}
			putAll(t, srv.Client(), stream, entries)
			putAll(t, srv.Client(), stream, []types.PutRecordsRequestEntry{{PartitionKey: aws.String("big"), Data: big}})
			entries = entries[:0]
			for i := range 3 {
				entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("after-", i)), Data: []byte(fmt.Sprint("small after ", i))})
			}
			putAll(t, srv.Client(), stream, entries)
			want := expected(t, srv, stream, nil, nil)
			if len(want) != 7 {
				t.Fatalf("the stream holds %d records, want 7", len(want))
			}

			// One record per GetRecords call puts the 9 MiB record alone in its answer, and
			// the call after it into the throttle.
			opts := []ReadOption{WithStartingPosition(TrimHorizon()), WithMaxRecordsPerRead(1)}
			if efo {
				opts = []ReadOption{WithStartingPosition(TrimHorizon()), WithEnhancedFanOut("large")}
			}
			p, s := beam.NewPipelineWithRoot()
			passert.Equals(s, canonical(s, ReadBounded(s, stream, connect(srv, opts...)...)), anys(want)...)
			start := time.Now()
			res, err := ptest.RunWithMetrics(p)
			if err != nil {
				t.Fatal(err)
			}
			calls, throttles := srv.CallCount("GetRecords"), counter(res, "throttles")
			t.Logf("read in %v: %d GetRecords calls, %d throttled", time.Since(start).Round(10*time.Millisecond), calls, throttles)
			if efo {
				if calls != 0 {
					t.Errorf("%d GetRecords calls with enhanced fan-out", calls)
				}
				return
			}
			// The reader waits out the refusal the service owes a large answer before it
			// reads the shard again: no call is throttled, and there is one call per record
			// and the empty one at the end.
			if throttles != 0 || calls > 8 {
				t.Errorf("%d GetRecords calls for 7 records, %d throttled; want at most 8 and none throttled", calls, throttles)
			}
			// The server does refuse a read right after the 9 MiB answer.
			it, err := srv.Client().GetShardIterator(context.Background(), &kinesis.GetShardIteratorInput{
				StreamName: aws.String(stream), ShardId: aws.String("shardId-000000000000"),
				ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(bigSeq(t, srv, stream)),
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := srv.Client().GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
			if err != nil {
				t.Fatal(err)
			}
			var ptee *types.ProvisionedThroughputExceededException
			if _, err := srv.Client().GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator}); !errors.As(err, &ptee) {
				t.Errorf("the read right after the 9 MiB answer: %v; want ProvisionedThroughputExceededException", err)
			}
		})
	}
}

// bigSeq is the sequence number of the largest record of stream.
func bigSeq(t *testing.T, srv *kinesistest.Server, stream string) string {
	t.Helper()
	stored, err := srv.StreamRecords(stream)
	if err != nil {
		t.Fatal(err)
	}
	seq, size := "", 0
	for _, r := range stored {
		if len(r.Data) > size {
			seq, size = r.SequenceNumber, len(r.Data)
		}
	}
	return seq
}
