package kinesistest_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestOutagesFailEveryRequestUntilTheyEnd puts the server in each outage and back: while
// refusing, a client's dial is refused on the same port; while unavailable, every call is
// answered 503 ServiceUnavailable; afterwards the same client works again and the stream
// kept its records.
func TestOutagesFailEveryRequestUntilTheyEnd(t *testing.T) {
	srv, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("s", 1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	put := func() error {
		_, err := client.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("x")})
		return err
	}
	if err := put(); err != nil {
		t.Fatal(err)
	}

	if err := srv.SetOutage(kinesistest.OutageRefuse); err != nil {
		t.Fatal(err)
	}
	if got := srv.Outage(); got != kinesistest.OutageRefuse {
		t.Errorf("Outage() = %v, want refuse", got)
	}
	// A connection the client kept from before breaks; the next dial is refused.
	if err := put(); err == nil {
		t.Errorf("PutRecord while refusing succeeded")
	}
	if err := put(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("PutRecord while refusing: %v, want connection refused", err)
	}
	if err := srv.SetOutage(kinesistest.OutageUnavailable); err != nil {
		t.Fatal(err)
	}
	var ae smithy.APIError
	if err := put(); !errors.As(err, &ae) || ae.ErrorCode() != "ServiceUnavailable" {
		t.Errorf("PutRecord while unavailable: %v, want ServiceUnavailable", err)
	}
	if err := srv.SetOutage(kinesistest.NoOutage); err != nil {
		t.Fatal(err)
	}
	if err := put(); err != nil {
		t.Errorf("PutRecord after the outage: %v", err)
	}
	recs, err := srv.StreamRecords("s")
	if err != nil || len(recs) != 2 {
		t.Errorf("the stream holds %d records (%v), want the 2 stored outside the outages", len(recs), err)
	}
	// The port is the same one.
	conn, err := net.Dial("tcp", srv.URL()[len("http://"):])
	if err != nil {
		t.Fatalf("dialling the port after the outage: %v", err)
	}
	conn.Close()
}

func TestParseOutageNamesEveryOutage(t *testing.T) {
	for _, o := range []kinesistest.Outage{kinesistest.NoOutage, kinesistest.OutageRefuse, kinesistest.OutageUnavailable} {
		if got, err := kinesistest.ParseOutage(o.String()); err != nil || got != o {
			t.Errorf("ParseOutage(%q) = %v, %v", o, got, err)
		}
	}
	if _, err := kinesistest.ParseOutage("down"); err == nil {
		t.Errorf("ParseOutage(down) gave no error")
	}
}

// TestPutEntryFaultsCanBeLimitedToStreams throttles every entry written to one stream and
// none written to another.
func TestPutEntryFaultsCanBeLimitedToStreams(t *testing.T) {
	srv, err := kinesistest.Start(kinesistest.WithFaults(kinesistest.Faults{PutEntryThrottleRate: 1, PutEntryStreams: []string{"out"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, s := range []string{"in", "out"} {
		if err := srv.CreateStream(s, 1); err != nil {
			t.Fatal(err)
		}
	}
	client := srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	entries := []types.PutRecordsRequestEntry{{PartitionKey: aws.String("a"), Data: []byte("1")}, {PartitionKey: aws.String("b"), Data: []byte("2")}}
	for stream, wantFailed := range map[string]int32{"in": 0, "out": 2} {
		out, err := client.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			t.Fatalf("PutRecords to %s: %v", stream, err)
		}
		if got := aws.ToInt32(out.FailedRecordCount); got != wantFailed {
			t.Errorf("PutRecords to %s: %d entries failed, want %d", stream, got, wantFailed)
		}
	}
}
