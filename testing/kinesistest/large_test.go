package kinesistest_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

const mib = 1 << 20

// largeStream creates a stream whose records may be 10 MiB, with two shards
// so a test can read one while the other is throttled.
func (e *env) largeStream(name string) {
	e.t.Helper()
	e.createStream(name, 2)
	if _, err := e.kc.UpdateMaxRecordSize(e.ctx, &kinesis.UpdateMaxRecordSizeInput{
		StreamARN: aws.String(e.srv.StreamARN(name)), MaxRecordSizeInKiB: aws.Int32(10240),
	}); err != nil {
		e.t.Fatalf("UpdateMaxRecordSize: %v", err)
	}
}

// putSized writes records of size bytes (data plus the one-byte key) to
// shard 0, one PutRecords request each.
func (e *env) putSized(stream string, sizes ...int) {
	e.t.Helper()
	for _, size := range sizes {
		rec := types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), ExplicitHashKey: aws.String("0"), Data: make([]byte, size-1)}
		if out := e.putRecords(stream, []types.PutRecordsRequestEntry{rec}); *out.FailedRecordCount != 0 {
			e.t.Fatalf("a record of %d bytes failed: %+v", size, out.Records[0])
		}
	}
}

func (e *env) getRecordsErr(it string) (*kinesis.GetRecordsOutput, error) {
	return e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
}

func TestPutRecordsTakesRequestsOfUpTo10MiB(t *testing.T) {
	e := newEnv(t)
	e.largeStream("large")
	// Ten records of 1 MiB: 10 MiB in one request is the limit, not over it.
	// (A 10 MiB record alone: TestLargeReadThrottlePausesTheShardFiveSecondsAfterA10MiBPage.)
	tenMiB := make([]types.PutRecordsRequestEntry, 10)
	for i := range tenMiB {
		tenMiB[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), ExplicitHashKey: aws.String("0"), Data: make([]byte, mib-1)}
	}
	if out := e.putRecords("large", tenMiB); *out.FailedRecordCount != 0 {
		t.Fatalf("%d of 10 records failed", *out.FailedRecordCount)
	}
	_, err := e.kc.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String("large"), Records: []types.PutRecordsRequestEntry{
		{PartitionKey: aws.String("k"), Data: make([]byte, 10*mib-1)},
		{PartitionKey: aws.String("k"), Data: []byte{}},
	}})
	wantAPIError(t, err, "InvalidArgumentException", "Records size exceeds 10485760 bytes (10 MiB) limit: 10485761 bytes including partition keys.")
	if recs, _ := e.srv.StreamRecords("large"); len(recs) != 10 {
		t.Errorf("stored %d records, want 10", len(recs))
	}
}

func TestLargeReadThrottlePausesTheShardFiveSecondsAfterA10MiBPage(t *testing.T) {
	e := newEnv(t, kinesistest.WithLargeReadThrottle())
	e.largeStream("large")
	e.putSized("large", 10*mib, 1)
	e.putEHK("large", half, "on shard 1")
	it0 := e.iterator("large", sid(0), types.ShardIteratorTypeTrimHorizon)
	it1 := e.iterator("large", sid(1), types.ShardIteratorTypeTrimHorizon)

	out := e.getRecords(it0, 0)
	if len(out.Records) != 1 || len(out.Records[0].Data) != 10*mib-1 {
		t.Fatalf("first page: %d records", len(out.Records))
	}
	next := *out.NextShardIterator
	_, err := e.getRecordsErr(next)
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)
	wantAPIError(t, err, "ProvisionedThroughputExceededException", "Rate exceeded for shard shardId-000000000000 in stream large under account 123456789012.")
	// Any reader of the shard is paused, not only the one that read the page.
	_, err = e.getRecordsErr(it0)
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)
	if got := e.getRecords(it1, 0); len(got.Records) != 1 {
		t.Errorf("the other shard gave %d records, want 1", len(got.Records))
	}

	e.clock.Advance(5*time.Second - time.Millisecond)
	_, err = e.getRecordsErr(next)
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)
	e.clock.Advance(time.Millisecond)
	if out, err := e.getRecordsErr(next); err != nil || len(out.Records) != 1 {
		t.Fatalf("GetRecords 5 s after the 10 MiB page: %v", err)
	}
}

func TestLargeReadThrottleIsProportionalToThePage(t *testing.T) {
	e := newEnv(t, kinesistest.WithLargeReadThrottle())
	e.largeStream("large")
	e.putSized("large", 2*mib, 3*mib, 1)
	it := e.iterator("large", sid(0), types.ShardIteratorTypeTrimHorizon)
	// 2 MiB, one second of the read rate, pauses nothing.
	out := e.getRecords(it, 1)
	out = e.getRecords(*out.NextShardIterator, 1)
	if len(out.Records) != 1 || len(out.Records[0].Data) != 3*mib-1 {
		t.Fatalf("second page: %d records", len(out.Records))
	}
	// 3 MiB: 1.5 s.
	e.clock.Advance(1499 * time.Millisecond)
	_, err := e.getRecordsErr(*out.NextShardIterator)
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)
	e.clock.Advance(time.Millisecond)
	e.getRecords(*out.NextShardIterator, 0)
}

func TestLargeReadThrottleIsOffByDefaultAndSwitchable(t *testing.T) {
	e := newEnv(t)
	e.largeStream("large")
	e.putSized("large", 3*mib, 3*mib)
	it := e.iterator("large", sid(0), types.ShardIteratorTypeTrimHorizon)
	out := e.getRecords(it, 1)
	e.srv.SetLargeReadThrottle(true)
	out = e.getRecords(*out.NextShardIterator, 1) // the page before did not count
	if len(out.Records) != 1 {
		t.Fatalf("second page: %d records", len(out.Records))
	}
	_, err := e.getRecordsErr(*out.NextShardIterator)
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)
	e.srv.SetLargeReadThrottle(false)
	e.getRecords(*out.NextShardIterator, 0)
}
