package producer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

func TestFaultsAndThrottlingLoseNothing(t *testing.T) {
	for _, aggregate := range []bool{true, false} {
		t.Run(fmt.Sprint("aggregate=", aggregate), func(t *testing.T) {
			srv := kinesistest.StartT(t, kinesistest.WithStream("faults", 2), kinesistest.WithLimits(), kinesistest.WithFaults(kinesistest.Faults{
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
			st := p.TakeStats()
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
	srv := kinesistest.StartT(t, kinesistest.WithStream("out", 2))
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
	if st := p.TakeStats(); st.Failures != int64(len(failures)) || st.UserRecords+st.Failures != n {
		t.Errorf("stats %+v: want %d failures and acknowledged + failed = %d", st, len(failures), n)
	}
}

func TestWholeRequestFailureFailsItsRecords(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("fatal", 1))
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

func TestLostResponsesDuplicateButLoseNothing(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("lost", 2), kinesistest.WithFaults(kinesistest.Faults{Seed: 4,
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
	if st := p.TakeStats(); st.Retries == 0 {
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
