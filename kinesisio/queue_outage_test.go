package kinesisio

import (
	"context"
	"flag"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// queueOutage is how long TestReadQueueRidesOutAQueueOutage keeps the queue endpoint down,
// in real time, on the server's own clock. Zero, the default, keeps it down for
// shortQueueOutage of real time and moves the server clock on by two minutes meanwhile.
var queueOutage = flag.Duration("queue_outage", 0, "TestReadQueueRidesOutAQueueOutage: a real outage this long (e.g. 2m) instead of the short one with a 2-minute jump of the server clock")

// shortQueueOutage is the real time of the default outage: several times the retry budget
// of queueConnect's reads (20 retries of at most 50 ms), so every call of the read runs out
// of its retries in it.
const shortQueueOutage = 6 * time.Second

// jumpClock is the wall clock, moved on by what jump added.
type jumpClock struct{ off atomic.Int64 }

func (c *jumpClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *jumpClock) jump(d time.Duration) { c.off.Add(int64(d)) }

// The queue endpoint unreachable for two minutes during a streaming read whose records are
// acknowledged after the sink wrote their 2 s windows: the server refuses connections, or
// answers every request with 503. The read rides it out: what it held when the outage began
// had its visibility run out on the server (extensions failed), comes back once the queue
// answers, and deduplication drops the second delivery; the acknowledgements of the old
// handles fail, counted. The sink must write every record put exactly once, nothing
// acknowledged before it was written, and the queue end empty.
//
// Two minutes of real time per outage would cost four minutes of CI. By default the outage
// lasts shortQueueOutage of real time, longer than the read's retry budget, which is real
// time, while the server clock, on which every visibility timeout runs, jumps two minutes:
// for the queue two minutes pass, for the client's retries and backoff six seconds.
// -queue_outage=2m runs the real two minutes instead, on the wall clock.
func TestReadQueueRidesOutAQueueOutage(t *testing.T) {
	wall, jump := shortQueueOutage, 2*time.Minute
	if *queueOutage > 0 {
		wall, jump = *queueOutage, 0
	}
	for _, outage := range []kinesistest.Outage{kinesistest.OutageRefuse, kinesistest.OutageUnavailable} {
		t.Run(outage.String(), func(t *testing.T) {
			clock := &jumpClock{}
			srv := kinesistest.StartT(t, kinesistest.WithOnDemandStream("s", 2, ""), kinesistest.WithClock(clock))
			arn, err := srv.CreateQueue("q", "s", kinesistest.QueueConfig{})
			if err != nil {
				t.Fatal(err)
			}
			want := putQueueRecords(t, srv, "before", 100)
			var atOutage kinesistest.QueueStats
			// The outage begins once the job wrote a window, while it holds records; once it
			// ends, more records are put. The sink's later windows wait for the outage to
			// begin: what the job holds then is still unacknowledged when it does.
			gate := newSinkGate()
			var opened sync.Once
			openGate := func() { opened.Do(func() { close(gate.open) }) }
			bg := inBackground(func(ctx context.Context) error {
				defer openGate()
				if err := srv.WaitQueue(ctx, arn, func(st kinesistest.QueueStats) bool {
					atOutage = st
					return st.Acked > 0 && st.InFlight > 0
				}); err != nil {
					return err
				}
				if err := srv.SetOutage(outage); err != nil {
					return err
				}
				openGate()
				clock.jump(jump)
				time.Sleep(wall)
				if err := srv.SetOutage(kinesistest.NoOutage); err != nil {
					return err
				}
				more, err := putQueueData(srv, "after", 100)
				want = append(want, more...)
				return err
			})
			// A failed read ends the test while the outage goes on: the server closes after it.
			var bgErr error
			ended := make(chan struct{})
			go func() { bgErr = <-bg; close(ended) }()
			t.Cleanup(func() { <-ended })
			// The read ends once the queue gave nothing for longer than the outage.
			got, early, res := runGatedQueueCount(t, srv, arn, 2*time.Second, gate,
				WithQueueDeduplication(10*time.Minute), WithQueueStopWhenIdle(wall+4*time.Second))
			<-ended
			if bgErr != nil {
				t.Fatal(bgErr)
			}
			want = sortedCopy(want)
			st, err := srv.QueueStats(arn)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("outage %v of %v real time (server clock moved on %v): %d records put, the sink wrote %d; at the outage %d acknowledged, %d in flight; queue after: %+v; duplicates dropped (metric) %d",
				outage, wall, wall+jump, len(want), len(got), atOutage.Acked, atOutage.InFlight, st, queueCounter(res, "duplicates"))
			if !slices.Equal(got, want) {
				t.Fatalf("the sink wrote %d records, want each of the %d put once", len(got), len(want))
			}
			if len(early) > 0 {
				t.Fatalf("%d records were acknowledged before the sink wrote them", len(early))
			}
			checkAckedOnce(t, srv, arn, len(want))
			if st.InFlight != 0 || st.Visible != 0 {
				t.Fatalf("the queue still holds records: %+v", st)
			}
			if st.Redelivered == 0 {
				t.Fatalf("nothing the read held came back after the outage: %+v; the outage was not felt", st)
			}
		})
	}
}
