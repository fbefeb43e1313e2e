package kinesistest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// within fails unless got is within tol of want.
func within(t *testing.T, what string, got, want, tol int) {
	t.Helper()
	if got < want-tol || got > want+tol {
		t.Errorf("%s = %d, want %d ± %d", what, got, want, tol)
	}
}

func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// retryingClient retries up to attempts times with short backoff.
func retryingClient(srv *kinesistest.Server, attempts int) *kinesis.Client {
	return srv.Client(func(o *kinesis.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = attempts
			so.Backoff = retry.NewExponentialJitterBackoff(5 * time.Millisecond)
		})
	})
}

func TestFaultsFailPutRecordsEntriesAtTheirRates(t *testing.T) {
	e := newEnv(t, kinesistest.WithFaults(kinesistest.Faults{Seed: 1, PutEntryThrottleRate: 0.2, PutEntryInternalFailureRate: 0.1}))
	e.createStream("faulty", 2)
	counts := map[string]int{}
	for range 10 {
		out := e.putRecords("faulty", entries(500, 10))
		failed := 0
		for _, r := range out.Records {
			code := aws.ToString(r.ErrorCode)
			counts[code]++
			switch code {
			case "":
				if r.SequenceNumber == nil || r.ShardId == nil {
					t.Fatalf("successful entry without sequence number: %+v", r)
				}
			case "ProvisionedThroughputExceededException":
				failed++
				if !strings.HasPrefix(aws.ToString(r.ErrorMessage), "Rate exceeded for shard shardId-") {
					t.Fatalf("throttled entry message %q", aws.ToString(r.ErrorMessage))
				}
			case "InternalFailure":
				failed++
				if aws.ToString(r.ErrorMessage) != "Internal service failure." {
					t.Fatalf("failed entry message %q", aws.ToString(r.ErrorMessage))
				}
			default:
				t.Fatalf("unexpected entry error code %q", code)
			}
		}
		if int(*out.FailedRecordCount) != failed {
			t.Fatalf("FailedRecordCount %d, counted %d", *out.FailedRecordCount, failed)
		}
	}
	within(t, "throttled entries of 5000", counts["ProvisionedThroughputExceededException"], 1000, 150)
	within(t, "InternalFailure entries of 5000", counts["InternalFailure"], 500, 100)
	if recs, _ := e.srv.StreamRecords("faulty"); len(recs) != counts[""] {
		t.Errorf("stored %d records, %d entries succeeded", len(recs), counts[""])
	}

	// PutRecord fails as a whole.
	e.srv.SetFaults(kinesistest.Faults{PutEntryThrottleRate: 1})
	_, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("faulty"), PartitionKey: aws.String("k"), Data: []byte("x")})
	wantErrorType[*types.ProvisionedThroughputExceededException](t, err)
	e.srv.SetFaults(kinesistest.Faults{PutEntryInternalFailureRate: 1})
	_, err = e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("faulty"), PartitionKey: aws.String("k"), Data: []byte("x")})
	wantErrorType[*types.InternalFailureException](t, err)
	if s := httpStatus(err); s != 500 {
		t.Errorf("InternalFailureException came with HTTP %d, want 500", s)
	}
}

func TestFaultsAnswerWithServerErrors(t *testing.T) {
	e := newEnv(t, kinesistest.WithFaults(kinesistest.Faults{Seed: 7, ServerErrorRate: 0.5, Operations: []string{"DescribeStreamSummary"}}))
	e.createStream("s", 1)
	kinds := map[string]int{}
	for range 200 {
		_, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
		var internal *types.InternalFailureException
		var api smithy.APIError
		switch {
		case err == nil:
			kinds["ok"]++
		case errors.As(err, &internal) && httpStatus(err) == 500:
			kinds["500"]++
		case errors.As(err, &api) && api.ErrorCode() == "ServiceUnavailable" && httpStatus(err) == 503:
			kinds["503"]++
		default:
			t.Fatalf("unexpected error %v (HTTP %d)", err, httpStatus(err))
		}
		// Other operations are not affected.
		if _, err := e.kc.ListStreams(e.ctx, &kinesis.ListStreamsInput{}); err != nil {
			t.Fatalf("ListStreams: %v", err)
		}
	}
	within(t, "failed calls of 200", kinds["500"]+kinds["503"], 100, 30)
	if kinds["500"] == 0 || kinds["503"] == 0 {
		t.Errorf("kinds of failure %v, want both 500 and 503", kinds)
	}
}

func TestFaultsServerErrorsAreRetriedByTheSDK(t *testing.T) {
	e := newEnv(t, kinesistest.WithFaults(kinesistest.Faults{Seed: 3, ServerErrorRate: 0.2, Operations: []string{"PutRecord"}}))
	e.createStream("retried", 1)
	kc := retryingClient(e.srv, 6)
	for i := range 30 {
		if _, err := kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("retried"), PartitionKey: aws.String("k"), Data: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("PutRecord %d with retries: %v", i, err)
		}
	}
	if n := e.srv.CallCount("PutRecord"); n <= 30 {
		t.Errorf("CallCount(PutRecord) = %d, want retries beyond 30 calls", n)
	}
	// A 5xx is injected before any work, so retries store no duplicates.
	if recs, _ := e.srv.StreamRecords("retried"); len(recs) != 30 {
		t.Errorf("stored %d records, want 30", len(recs))
	}
}

func TestFaultsFailGetRecords(t *testing.T) {
	e := newEnv(t)
	e.createStream("g", 1)
	it := e.iterator("g", sid(0), types.ShardIteratorTypeTrimHorizon)

	e.srv.SetFaults(kinesistest.Faults{Seed: 11, GetRecordsThrottleRate: 0.5})
	throttled := 0
	for range 100 {
		_, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
		var pte *types.ProvisionedThroughputExceededException
		switch {
		case err == nil:
		case errors.As(err, &pte):
			throttled++
		default:
			t.Fatalf("GetRecords: %v", err)
		}
	}
	within(t, "throttled GetRecords of 100", throttled, 50, 17)

	e.srv.SetFaults(kinesistest.Faults{ExpiredIteratorRate: 1})
	_, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantErrorType[*types.ExpiredIteratorException](t, err)

	e.srv.SetFaults(kinesistest.Faults{})
	e.getRecords(it, 0)
}

func TestFaultsDropConnections(t *testing.T) {
	e := newEnv(t, kinesistest.WithFaults(kinesistest.Faults{DropConnectionRate: 1, Operations: []string{"PutRecord"}}))
	e.createStream("drop", 1)
	put := func(kc *kinesis.Client, data string) error {
		_, err := kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("drop"), PartitionKey: aws.String("k"), Data: []byte(data)})
		return err
	}
	err := put(e.kc, "lost")
	var api smithy.APIError
	if err == nil || errors.As(err, &api) {
		t.Fatalf("dropped connection gave %v, want a transport error", err)
	}
	if recs, _ := e.srv.StreamRecords("drop"); len(recs) != 0 {
		t.Errorf("a request dropped before processing stored %d records", len(recs))
	}

	// Dropped after processing: the client sees an error, the record is kept.
	e.srv.SetFaults(kinesistest.Faults{DropAfterProcessingRate: 1, Operations: []string{"PutRecord"}})
	if err := put(e.kc, "kept"); err == nil {
		t.Fatal("dropped response gave no error")
	}
	if recs, _ := e.srv.StreamRecords("drop"); len(recs) != 1 || string(recs[0].Data) != "kept" {
		t.Errorf("after a lost response stored %+v, want the record", recs)
	}

	// The SDK retries connection errors.
	e.srv.SetFaults(kinesistest.Faults{Seed: 5, DropConnectionRate: 0.3, Operations: []string{"PutRecord"}})
	kc := retryingClient(e.srv, 8)
	for i := range 20 {
		if err := put(kc, fmt.Sprint(i)); err != nil {
			t.Fatalf("PutRecord %d with retries: %v", i, err)
		}
	}
	if recs, _ := e.srv.StreamRecords("drop"); len(recs) != 21 {
		t.Errorf("stored %d records, want 21", len(recs))
	}
}

func TestFaultsAddLatency(t *testing.T) {
	e := newEnv(t, kinesistest.WithFaults(kinesistest.Faults{Latency: 40 * time.Millisecond}))
	start := time.Now()
	if _, err := e.kc.ListStreams(e.ctx, &kinesis.ListStreamsInput{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("ListStreams took %v, want at least the 40 ms latency", d)
	}
}

func TestFaultsAreDeterministicForASeed(t *testing.T) {
	pattern := func(seed int64) string {
		e := newEnv(t, kinesistest.WithFaults(kinesistest.Faults{Seed: seed, PutEntryThrottleRate: 0.3}))
		e.createStream("det", 3)
		var b strings.Builder
		for range 3 {
			for _, r := range e.putRecords("det", entries(100, 1)).Records {
				if r.ErrorCode != nil {
					b.WriteByte('x')
				} else {
					b.WriteByte('.')
				}
			}
		}
		return b.String()
	}
	a, b, c := pattern(42), pattern(42), pattern(43)
	if a != b {
		t.Errorf("same seed, different failures:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("different seeds, same failures")
	}
}

func TestFaultsAreValidated(t *testing.T) {
	if _, err := kinesistest.Start(kinesistest.WithFaults(kinesistest.Faults{ServerErrorRate: 1.5})); err == nil ||
		!strings.Contains(err.Error(), "ServerErrorRate") {
		t.Errorf("Start with a rate of 1.5: %v, want an error naming ServerErrorRate", err)
	}
	e := newEnv(t)
	defer func() {
		if recover() == nil {
			t.Error("SetFaults with a negative rate did not panic")
		}
	}()
	e.srv.SetFaults(kinesistest.Faults{DropConnectionRate: -0.1})
}
