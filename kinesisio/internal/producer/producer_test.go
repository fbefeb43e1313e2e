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
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamcheck"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
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

func startServer(t *testing.T, stream string, shards int, opts ...kinesistest.Option) *kinesistest.Server {
	t.Helper()
	srv, err := kinesistest.Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.CreateStream(stream, shards); err != nil {
		t.Fatal(err)
	}
	return srv
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
	srv := startServer(t, "agg", 4, kinesistest.WithLimits())
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
	st := p.Stats()
	if st.UserRecords != n || st.Failures != 0 || st.KinesisRecords != int64(res.KinesisRecords) {
		t.Errorf("stats %+v, want %d user records, %d Kinesis records, no failures", st, n, res.KinesisRecords)
	}
}

func TestFaultsAndThrottlingLoseNothing(t *testing.T) {
	for _, aggregate := range []bool{true, false} {
		t.Run(fmt.Sprint("aggregate=", aggregate), func(t *testing.T) {
			srv := startServer(t, "faults", 2, kinesistest.WithLimits(), kinesistest.WithFaults(kinesistest.Faults{
				Seed: 7, PutEntryThrottleRate: 0.15, PutEntryInternalFailureRate: 0.15, ServerErrorRate: 0.1,
				Operations: []string{"PutRecords"}}))
			cfg := testConfig("faults", aggregate)
			cfg.Retry.Retries = 30 // 30% failing entries: 30 retries make a loss a 1e-16 event
			p := newProducer(t, srv, cfg)
			const n = 3000
			putAll(t, p, 0, n)
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if f := p.Failures(); len(f) != 0 {
				t.Fatalf("%d failures, first: %+v", len(f), f[0])
			}
			st := p.Stats()
			if st.Retries == 0 || st.ThrottledEntries == 0 {
				t.Errorf("stats %+v: the faults were not exercised", st)
			}
			// A 5xx is sent before any work is done, so nothing is duplicated either.
			res := readBack(t, srv, "faults")
			if d := streamcheck.Diff(streamcheck.Multiset(res.Records, userKey), wantMultiset(0, n), 5); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestRetriesRunningOutReportEveryRecord(t *testing.T) {
	srv := startServer(t, "out", 2)
	// 80% of entries fail on every attempt; with one retry about two thirds of the
	// records run out of retries and are reported, the rest are written.
	srv.SetFaults(kinesistest.Faults{Seed: 3, PutEntryThrottleRate: 0.6, PutEntryInternalFailureRate: 0.2, Operations: []string{"PutRecords"}})
	cfg := testConfig("out", true)
	cfg.Retry = backoff.Policy{Retries: 1, Initial: time.Millisecond, Max: 2 * time.Millisecond}
	cfg.Limits.MaxAggregateRecords = 10 // many aggregates, so both outcomes occur
	p := newProducer(t, srv, cfg)
	const n = 2000
	putAll(t, p, 0, n)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	failures := p.Failures()
	if len(failures) == 0 {
		t.Fatal("no failures with 80% failing entries and one retry")
	}
	failed := make(map[string]int)
	for _, f := range failures {
		if f.Attempts != 2 {
			t.Errorf("failure after %d attempts, want 2 (one retry)", f.Attempts)
		}
		if f.ErrorCode != "ProvisionedThroughputExceededException" && f.ErrorCode != "InternalFailure" {
			t.Errorf("failure code %q, want a per-entry code", f.ErrorCode)
		}
		if !strings.Contains(f.Reason, f.ErrorCode) || !strings.Contains(f.Reason, "2 times") {
			t.Errorf("reason %q does not say the code and the attempts", f.Reason)
		}
		failed[f.Record.PartitionKey+"|"+string(f.Record.Data)]++
	}
	res := readBack(t, srv, "out")
	written := streamcheck.Multiset(res.Records, userKey)
	for k, c := range failed {
		written[k] += c
	}
	if d := streamcheck.Diff(written, wantMultiset(0, n), 5); d != "" {
		t.Fatalf("written + failed != input: %s", d)
	}
	if st := p.Stats(); st.Failures != int64(len(failures)) || st.UserRecords+st.Failures != n {
		t.Errorf("stats %+v: want %d failures and acknowledged + failed = %d", st, len(failures), n)
	}
}

func TestWholeRequestFailureFailsItsRecords(t *testing.T) {
	srv := startServer(t, "fatal", 1)
	cfg := testConfig("fatal", false)
	p := newProducer(t, srv, cfg)
	putAll(t, p, 0, 10)
	// Deleting the stream makes every PutRecords fail with ResourceNotFoundException,
	// which is not retried.
	if _, err := srv.Client().DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String("fatal")}); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := p.Failures()
	if len(f) != 10 {
		t.Fatalf("%d failures, want 10", len(f))
	}
	for _, x := range f {
		if x.ErrorCode != "ResourceNotFoundException" || x.Attempts != 1 {
			t.Errorf("failure %+v, want ResourceNotFoundException after 1 attempt", x)
		}
	}
}

func TestInvalidRecordsAreRefusedWithReasons(t *testing.T) {
	srv := startServer(t, "inv", 1)
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

func TestSplitDuringTheWriteReroutes(t *testing.T) {
	for _, tc := range []struct {
		name         string
		faults       kinesistest.Faults
		wantRerouted bool // without faults, whether any are depends on timing
	}{
		{"no faults", kinesistest.Faults{}, false},
		// Failed entries are retried after the map has changed: retried aggregates of a
		// closed shard must be re-routed.
		{"30% failing entries", kinesistest.Faults{Seed: 9, PutEntryThrottleRate: 0.15, PutEntryInternalFailureRate: 0.15, Operations: []string{"PutRecords"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, "split", 2)
			cfg := testConfig("split", true)
			cfg.Limits.MaxAggregateRecords = 20 // many aggregates, so every path is taken
			cfg.Retry.Retries = 30
			p := newProducer(t, srv, cfg)
			const n = 6000
			putAll(t, p, 0, n/2)
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Split both shards in the middle of their ranges; the producer's map is now
			// stale (it refreshes every minute) and only the writes show the change.
			c := srv.Client()
			ls, err := c.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String("split")})
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range ls.Shards {
				start, _ := kpl.ParseUint128(*sh.HashKeyRange.StartingHashKey)
				end, _ := kpl.ParseUint128(*sh.HashKeyRange.EndingHashKey)
				mid := midpoint(start, end)
				if _, err := c.SplitShard(context.Background(), &kinesis.SplitShardInput{StreamName: aws.String("split"),
					ShardToSplit: sh.ShardId, NewStartingHashKey: aws.String(mid.String())}); err != nil {
					t.Fatal(err)
				}
				waitActive(t, c, "split")
			}
			srv.SetFaults(tc.faults)
			putAll(t, p, n/2, n)
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if f := p.Failures(); len(f) != 0 {
				t.Fatalf("%d failures, first: %+v", len(f), f[0])
			}
			st := p.Stats()
			if st.ShardMapRefresh == 0 || st.WrongShard == 0 || (tc.wantRerouted && st.Rerouted == 0) {
				t.Errorf("stats %+v: want the map refreshed, wrong-shard aggregates re-sent, retried records re-routed (%v)", st, tc.wantRerouted)
			}
			res := readBack(t, srv, "split")
			kept := res.Kept()
			if d := streamcheck.Diff(streamcheck.Multiset(kept, userKey), wantMultiset(0, n), 5); d != "" {
				t.Fatalf("records a KCL consumer keeps: %s", d)
			}
			inShard := make(map[string]int)
			for _, u := range kept {
				if !u.InRange {
					t.Fatalf("record %q kept in shard %s outside its range", u.PartitionKey, u.Shard)
				}
				inShard[u.Shard]++
			}
			if len(inShard) != 6 {
				t.Errorf("records in shards %v, want 6 shards (2 parents before the split, 4 children after)", inShard)
			}
			if res.MisplacedAggregates != int(st.WrongShard) {
				t.Errorf("%d misplaced aggregates in the stream, the producer re-sent %d", res.MisplacedAggregates, st.WrongShard)
			}
		})
	}
}

func midpoint(a, b kpl.Uint128) kpl.Uint128 {
	// (a+b)/2 without overflow: a + (b-a)/2.
	dHi, dLo := b.Hi-a.Hi, b.Lo-a.Lo
	if b.Lo < a.Lo {
		dHi--
	}
	half := kpl.Uint128{Hi: dHi >> 1, Lo: dLo>>1 | dHi<<63}
	lo := a.Lo + half.Lo
	hi := a.Hi + half.Hi
	if lo < a.Lo {
		hi++
	}
	return kpl.Uint128{Hi: hi, Lo: lo}
}

func waitActive(t *testing.T, c *kinesis.Client, stream string) {
	t.Helper()
	w := kinesis.NewStreamExistsWaiter(c, func(o *kinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 50*time.Millisecond
	})
	if err := w.Wait(context.Background(), &kinesis.DescribeStreamInput{StreamName: aws.String(stream)}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	out, err := c.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	if out.StreamDescriptionSummary.StreamStatus != types.StreamStatusActive {
		t.Fatalf("stream %s is %s after the waiter", stream, out.StreamDescriptionSummary.StreamStatus)
	}
}

func TestBufferedBytesAreBounded(t *testing.T) {
	srv := startServer(t, "mem", 1, kinesistest.WithLimits())
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
	if st := p.Stats(); st.UserRecords != 200 || st.ThrottledEntries != 0 {
		t.Errorf("stats %+v: want 200 records written without throttling (the rate limiter holds them)", st)
	}
}

func TestRecordsGoOutWhenTheirBufferedTimeIsUp(t *testing.T) {
	srv := startServer(t, "timed", 1)
	cfg := testConfig("timed", true)
	cfg.MaxBufferedTime = 200 * time.Millisecond
	p := newProducer(t, srv, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	putAll(t, p, 0, 3) // far from filling an aggregate or a request
	if err := p.waitResolved(ctx); err != nil {
		t.Fatalf("records not sent without a flush: %v", err)
	}
	if elapsed := time.Since(start); elapsed < cfg.MaxBufferedTime {
		t.Errorf("records acknowledged after %v, before their buffered time of %v was up", elapsed, cfg.MaxBufferedTime)
	}
	if st := p.Stats(); st.UserRecords != 3 || st.KinesisRecords != 1 || st.PutRecordsCalls != 1 {
		t.Errorf("stats %+v, want the 3 records in one aggregate and one call", st)
	}
}

func TestRateLimiterKeepsAHealthyStreamFromThrottling(t *testing.T) {
	for _, tc := range []struct {
		percent       int
		wantThrottled bool
	}{{100, false}, {0, true}} {
		t.Run(fmt.Sprint("rate limit ", tc.percent, "%"), func(t *testing.T) {
			srv := startServer(t, "rate", 1, kinesistest.WithLimits())
			cfg := testConfig("rate", false)
			cfg.RateLimitPercent = tc.percent
			p := newProducer(t, srv, cfg)
			// 2000 records against 1000 records/s: a second's burst, then a second of
			// steady rate.
			putAll(t, p, 0, 2000)
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := p.Stats()
			if f := p.Failures(); !tc.wantThrottled && len(f) != 0 {
				t.Fatalf("%d failures: %s", len(f), f[0].Reason)
			}
			if (st.ThrottledEntries > 0) != tc.wantThrottled {
				t.Errorf("%d throttled entries with the rate limit at %d%%; want throttling: %v", st.ThrottledEntries, tc.percent, tc.wantThrottled)
			}
		})
	}
}

func TestEmptyDataIsWrittenNotRefused(t *testing.T) {
	srv := startServer(t, "empty", 1)
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
	if st := p.Stats(); st.UserRecords != 2 {
		t.Errorf("%d records written, want 2", st.UserRecords)
	}
}

func TestLostResponsesDuplicateButLoseNothing(t *testing.T) {
	srv := startServer(t, "lost", 2, kinesistest.WithFaults(kinesistest.Faults{Seed: 4,
		DropConnectionRate: 0.1, DropAfterProcessingRate: 0.1, Operations: []string{"PutRecords"}}))
	cfg := testConfig("lost", true)
	cfg.Limits.MaxAggregateRecords = 20
	cfg.Retry.Retries = 20
	p := newProducer(t, srv, cfg)
	const n = 3000
	for from := 0; from < n; from += 60 { // one call per flush, so many calls
		putAll(t, p, from, from+60)
		if err := p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if f := p.Failures(); len(f) != 0 {
		t.Fatalf("%d failures, first: %+v", len(f), f[0])
	}
	if st := p.Stats(); st.Retries == 0 {
		t.Errorf("stats %+v: no request was retried; the dropped connections were not exercised", st)
	}
	got := streamcheck.Multiset(readBack(t, srv, "lost").Records, userKey)
	for k := range wantMultiset(0, n) {
		if got[k] == 0 {
			t.Fatalf("record %q lost", k)
		}
	}
	if len(got) != n {
		t.Errorf("%d distinct records in the stream, want %d", len(got), n)
	}
}

func TestExplicitHashKeysRouteInsteadOfPartitionKeys(t *testing.T) {
	srv := startServer(t, "ehk", 4)
	p := newProducer(t, srv, testConfig("ehk", true))
	const n = 400
	for i := 0; i < n; i++ {
		// One partition key for all (MD5 routing would pick one shard); hash keys spread
		// evenly over the key space.
		ehk := kpl.Uint128{Hi: uint64(i) * (^uint64(0)/n + 1)}
		rec := kpl.UserRecord{PartitionKey: "same", ExplicitHashKey: ehk.String(), Data: fmt.Appendf(nil, "%d", i)}
		if err := p.Put(context.Background(), rec, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := readBack(t, srv, "ehk")
	perShard := make(map[string]int)
	for _, u := range res.Records {
		if !u.Aggregated || !u.InRange {
			t.Fatalf("record %s: aggregated %v, in range %v; want an aggregated record in its explicit hash key's shard", u.Data, u.Aggregated, u.InRange)
		}
		perShard[u.Shard]++
	}
	if len(res.Records) != n || len(perShard) != 4 {
		t.Fatalf("%d records over shards %v, want %d spread over 4", len(res.Records), perShard, n)
	}
	for shard, c := range perShard {
		if c != n/4 {
			t.Errorf("shard %s holds %d records, want %d", shard, c, n/4)
		}
	}
}
