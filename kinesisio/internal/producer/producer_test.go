package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

func testConfig(stream string, aggregate bool) Config {
	return Config{
		Stream: stream,
		Limits: batch.Limits{Aggregate: aggregate, MaxAggregateBytes: 51200, MaxAggregateRecords: 1 << 30,
			MaxRecordBytes: batch.DefaultMaxRecordBytes, MaxRequestEntries: batch.MaxRequestEntries, MaxRequestBytes: batch.DefaultMaxRequestBytes},
		MaxBufferedTime:  50 * time.Millisecond,
		MaxConnections:   8,
		MaxBufferedBytes: 8 << 20,
		RateLimitPercent: 100,
		Retry:            backoff.Policy{Retries: 10, Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond},
		ShardMapRefresh:  time.Minute,
		ShardMapMinGap:   10 * time.Millisecond,
	}
}

func newProducer(t *testing.T, srv *kinesistest.Server, cfg Config) *Producer {
	t.Helper()
	p, err := New(srv.Client(func(o *kinesis.Options) { o.Retryer = aws.NopRetryer{} }), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// record i has a distinct key and payload, so the read-back multiset identifies it.
func record(i int) kpl.UserRecord {
	return kpl.UserRecord{PartitionKey: fmt.Sprintf("key-%d", i), Data: fmt.Appendf(nil, "payload-%07d-%s", i, strings.Repeat("x", 80))}
}

func putAll(t *testing.T, p *Producer, from, to int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < to; i++ {
		if err := p.Put(ctx, record(i), i); err != nil {
			t.Fatalf("Put(%d): %v", i, err)
		}
	}
}

func wantMultiset(from, to int) map[string]int {
	m := make(map[string]int)
	for i := from; i < to; i++ {
		r := record(i)
		m[r.PartitionKey+"|"+string(r.Data)]++
	}
	return m
}

func userKey(u streamcheck.UserRecord) string { return u.PartitionKey + "|" + string(u.Data) }

func readBack(t *testing.T, srv *kinesistest.Server, stream string) streamcheck.Result {
	t.Helper()
	srv.SetLimits(false)
	srv.SetFaults(kinesistest.Faults{})
	res, err := streamcheck.Read(context.Background(), srv.Client(), stream)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestAggregatedRecordsLandInTheirShardsExactlyOnce(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("agg", 4), kinesistest.WithLimits())
	p := newProducer(t, srv, testConfig("agg", true))
	const n = 20000
	putAll(t, p, 0, n)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f := p.Failures(); len(f) != 0 {
		t.Fatalf("%d failures, first: %+v", len(f), f[0])
	}
	res := readBack(t, srv, "agg")
	if d := streamcheck.Diff(streamcheck.Multiset(res.Records, userKey), wantMultiset(0, n), 5); d != "" {
		t.Fatal(d)
	}
	for _, u := range res.Records {
		if !u.InRange {
			t.Fatalf("record %q in shard %s outside its range", u.PartitionKey, u.Shard)
		}
	}
	if res.KinesisRecords >= n/20 {
		t.Errorf("%d Kinesis records for %d user records: aggregation did not pack them", res.KinesisRecords, n)
	}
	st := p.TakeStats()
	if st.UserRecords != n || st.Failures != 0 || st.KinesisRecords != int64(res.KinesisRecords) {
		t.Errorf("stats %+v, want %d user records, %d Kinesis records, no failures", st, n, res.KinesisRecords)
	}
}

func TestInvalidRecordsAreRefusedWithReasons(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("inv", 1))
	p := newProducer(t, srv, testConfig("inv", true))
	for name, tc := range map[string]struct {
		rec  kpl.UserRecord
		want string
	}{
		"empty key":    {kpl.UserRecord{PartitionKey: "", Data: []byte("x")}, "empty"},
		"long key":     {kpl.UserRecord{PartitionKey: strings.Repeat("k", 257), Data: []byte("x")}, "257 characters"},
		"too large":    {kpl.UserRecord{PartitionKey: "k", Data: make([]byte, 1<<20)}, "over the stream's record size limit"},
		"bad hash key": {kpl.UserRecord{PartitionKey: "k", ExplicitHashKey: "12x", Data: []byte("x")}, "explicit hash key"},
	} {
		err := p.Put(context.Background(), tc.rec, nil)
		var invalid *InvalidError
		if !errors.As(err, &invalid) || !strings.Contains(invalid.Reason, tc.want) {
			t.Errorf("%s: Put = %v, want an InvalidError mentioning %q", name, err, tc.want)
		}
	}
	// The largest valid record: key + data = 1 MiB exactly.
	if err := p.Put(context.Background(), kpl.UserRecord{PartitionKey: "k", Data: make([]byte, 1<<20-1)}, nil); err != nil {
		t.Fatalf("Put of a record of exactly 1 MiB: %v", err)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f := p.Failures(); len(f) != 0 {
		t.Fatalf("the 1 MiB record failed: %+v", f[0].Reason)
	}
}

func TestBufferedBytesAreBounded(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("mem", 1), kinesistest.WithLimits())
	cfg := testConfig("mem", false)
	cfg.MaxBufferedBytes = 100_000
	p := newProducer(t, srv, cfg)
	ctx := context.Background()
	// 2 MB in records of 10 kB against a 1 MiB/s shard (a second beyond the burst): the
	// producer must hold back, never buffering more than 100 kB.
	for i := 0; i < 200; i++ {
		r := kpl.UserRecord{PartitionKey: fmt.Sprint(i), Data: make([]byte, 10000)}
		if err := p.Put(ctx, r, i); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		b := p.buffered
		p.mu.Unlock()
		if b > cfg.MaxBufferedBytes {
			t.Fatalf("buffered %d bytes, limit %d", b, cfg.MaxBufferedBytes)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if f := p.Failures(); len(f) != 0 {
		t.Fatalf("%d failures: %s", len(f), f[0].Reason)
	}
	if st := p.TakeStats(); st.UserRecords != 200 || st.ThrottledEntries != 0 {
		t.Errorf("stats %+v: want 200 records written without throttling (the rate limiter holds them)", st)
	}
}

func TestEmptyDataIsWrittenNotRefused(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("empty", 1))
	p := newProducer(t, srv, testConfig("empty", false))
	for _, data := range [][]byte{nil, {}} {
		if err := p.Put(context.Background(), kpl.UserRecord{PartitionKey: "k", Data: data}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f := p.Failures(); len(f) != 0 {
		t.Fatalf("%d failures: %s", len(f), f[0].Reason)
	}
	if st := p.TakeStats(); st.UserRecords != 2 {
		t.Errorf("%d records written, want 2", st.UserRecords)
	}
}
