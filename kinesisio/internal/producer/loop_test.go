package producer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// timedPuts is an API that notes when each PutRecords call leaves.
type timedPuts struct {
	API
	mu   sync.Mutex
	sent []time.Time
}

func (a *timedPuts) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	a.mu.Lock()
	a.sent = append(a.sent, time.Now())
	a.mu.Unlock()
	return a.API.PutRecords(ctx, in, optFns...)
}

func TestRecordsGoOutWhenTheirBufferedTimeIsUp(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("timed", 1))
	cfg := testConfig("timed", true)
	cfg.MaxBufferedTime = 200 * time.Millisecond
	api := &timedPuts{API: srv.Client(func(o *kinesis.Options) { o.Retryer = aws.NopRetryer{} })}
	p, err := New(api, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	start := time.Now()
	putAll(t, p, 0, 3) // far from filling an aggregate or a request
	// Wait for every record to be acknowledged or failed without calling Flush, which
	// would send them at once.
	var st Stats
	for st.UserRecords+st.Failures < 3 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("records not sent without a flush: stats %+v", st)
		}
		time.Sleep(time.Millisecond)
		st.add(p.TakeStats())
	}
	api.mu.Lock()
	sent := api.sent
	api.mu.Unlock()
	if len(sent) == 0 {
		t.Fatal("records resolved without a PutRecords call")
	}
	if d := sent[0].Sub(start); d < cfg.MaxBufferedTime {
		t.Errorf("records sent %v after the first Put, before their buffered time of %v was up", d, cfg.MaxBufferedTime)
	}
	if st.add(p.TakeStats()); st.UserRecords != 3 || st.KinesisRecords != 1 || st.PutRecordsCalls != 1 {
		t.Errorf("stats %+v, want the 3 records in one aggregate and one call", st)
	}
}

func TestRateLimiterKeepsAHealthyStreamFromThrottling(t *testing.T) {
	for _, tc := range []struct {
		percent       int
		wantThrottled bool
	}{{100, false}, {0, true}} {
		t.Run(fmt.Sprint("rate limit ", tc.percent, "%"), func(t *testing.T) {
			srv := kinesistest.StartT(t, kinesistest.WithStream("rate", 1), kinesistest.WithLimits())
			cfg := testConfig("rate", false)
			cfg.RateLimitPercent = tc.percent
			p := newProducer(t, srv, cfg)
			// 2000 records against 1000 records/s: a second's burst, then a second of
			// steady rate.
			putAll(t, p, 0, 2000)
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := p.TakeStats()
			if f := p.Failures(); !tc.wantThrottled && len(f) != 0 {
				t.Fatalf("%d failures: %s", len(f), f[0].Reason)
			}
			if (st.ThrottledEntries > 0) != tc.wantThrottled {
				t.Errorf("%d throttled entries with the rate limit at %d%%; want throttling: %v", st.ThrottledEntries, tc.percent, tc.wantThrottled)
			}
		})
	}
}

// add adds to s the counts of o that the tests above read.
func (s *Stats) add(o Stats) {
	s.UserRecords += o.UserRecords
	s.KinesisRecords += o.KinesisRecords
	s.PutRecordsCalls += o.PutRecordsCalls
	s.Failures += o.Failures
}
