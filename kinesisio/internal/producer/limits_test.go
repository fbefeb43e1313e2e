package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

// largeRecord i has n bytes of data that identify it.
func largeRecord(i, n int) kpl.UserRecord {
	data := make([]byte, n)
	copy(data, fmt.Sprintf("large %d of %d bytes ", i, n))
	for j := 32; j < n; j++ {
		data[j] = byte(i + j)
	}
	return kpl.UserRecord{PartitionKey: fmt.Sprintf("large-%d", i), Data: data}
}

func raiseMaxRecordSize(t *testing.T, srv *kinesistest.Server, stream string, kib int32) {
	t.Helper()
	if _, err := srv.Client().UpdateMaxRecordSize(context.Background(), &kinesis.UpdateMaxRecordSizeInput{
		StreamARN: aws.String(srv.StreamARN(stream)), MaxRecordSizeInKiB: aws.Int32(kib)}); err != nil {
		t.Fatal(err)
	}
}

// A stream raised to 10 MiB takes 3 and 9 MiB records among aggregated small ones, with the
// service's limits on, each exactly once; the buffer bound (4 MiB, below a single 9 MiB
// record's cost) holds everywhere except for a record alone in the buffer, and Put never
// blocks for good.
func TestLargeRecordsToARaisedStreamLandOnceUnderASmallBufferBound(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("big", 2), kinesistest.WithLimits())
	raiseMaxRecordSize(t, srv, "big", 10240)
	ctx := context.Background()
	cfg := testConfig("big", true)
	settings, err := DescribeStream(ctx, srv.Client(), "big", cfg.Retry)
	if err != nil {
		t.Fatal(err)
	}
	maxRecord := settings.MaxRecordBytes
	cfg.Limits.MaxRecordBytes, cfg.Limits.MaxRequestBytes = maxRecord, batch.RequestBytesFor(maxRecord)
	cfg.MaxBufferedBytes = 4 << 20
	cfg.Retry.Retries = 30
	p := newProducer(t, srv, cfg)

	want := make(map[string]int)
	put := func(r kpl.UserRecord, meta int) {
		t.Helper()
		if err := p.Put(ctx, r, meta); err != nil {
			t.Fatalf("Put(%s): %v", r.PartitionKey, err)
		}
		want[r.PartitionKey+"|"+string(r.Data)]++
		p.mu.Lock()
		buffered, outstanding := p.buffered, p.outstanding
		p.mu.Unlock()
		if buffered > cfg.MaxBufferedBytes && outstanding > 1 {
			t.Fatalf("buffered %d bytes in %d records, over the bound %d", buffered, outstanding, cfg.MaxBufferedBytes)
		}
	}
	sizes := []int{3 << 20, 9<<20 - 5, 3<<20 + 17}
	for i := 0; i < 200; i++ {
		put(record(i), i)
		if i%50 == 25 && i/50 < len(sizes) {
			put(largeRecord(i, sizes[i/50]), i)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if f := p.Failures(); len(f) != 0 {
		t.Fatalf("%d failures, the first: %s", len(f), f[0].Reason)
	}
	srv.SetLimits(false)
	res, err := streamcheck.Read(ctx, srv.Client(), "big")
	if err != nil {
		t.Fatal(err)
	}
	got := streamcheck.Multiset(res.Records, func(u streamcheck.UserRecord) string { return u.PartitionKey + "|" + string(u.Data) })
	if d := streamcheck.Diff(got, want, 5); d != "" {
		t.Fatal(d)
	}
	for _, u := range res.Records {
		if len(u.Data) > 1<<20 && u.Aggregated {
			t.Errorf("record %s of %d bytes went out inside an aggregate", u.PartitionKey, len(u.Data))
		}
	}
	if res.Aggregates == 0 {
		t.Error("no aggregates: the small records were not aggregated")
	}
	t.Logf("stats %+v", p.TakeStats())
}

func TestTooLargeRecordsAreRefusedNamingSizeLimitAndRemedy(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("s", 1))
	p := newProducer(t, srv, testConfig("s", true))
	err := p.Put(context.Background(), largeRecord(1, 3<<20), 1)
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Put of 3 MiB to a 1 MiB stream: %v, want an InvalidError", err)
	}
	for _, s := range []string{"3145735 bytes", "1048576 bytes", "MaxRecordSizeInKiB 1024", `"s"`, "UpdateMaxRecordSize", "10240"} {
		if !strings.Contains(inv.Reason, s) {
			t.Errorf("reason %q does not mention %q", inv.Reason, s)
		}
	}
	cfg := testConfig("s", true)
	cfg.Limits.MaxRecordBytes, cfg.Limits.MaxRequestBytes = batch.MaxRecordBytes, batch.LargeMaxRequestBytes
	p = newProducer(t, srv, cfg)
	err = p.Put(context.Background(), largeRecord(2, 10<<20), 2)
	if !errors.As(err, &inv) || !strings.Contains(inv.Reason, "no stream takes records over 10 MiB") {
		t.Fatalf("Put of 10 MiB + key to a 10 MiB stream: %v, want an InvalidError saying no stream takes it", err)
	}
}
