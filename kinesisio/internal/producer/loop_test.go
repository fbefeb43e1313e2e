package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

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
