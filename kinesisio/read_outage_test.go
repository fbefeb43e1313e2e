package kinesisio

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestReadRidesOutKinesisUnreachable makes every GetShardIterator and GetRecords fail with
// 5xx until the readers' retries have run out several times (polling, and enhanced fan-out,
// whose SubscribeToShard fails the same way), then serves again. The streaming read must not
// fail the job (on Prism a failed bundle ends it): it resumes at its last position, and
// delivers every record exactly once. Before the readers rode outages out, the job failed
// with the 5xx once the budget of WithRetries was spent.
func TestReadRidesOutKinesisUnreachable(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []string
		opts []ReadOption
	}{
		{"polling", []string{"GetShardIterator", "GetRecords"}, nil},
		{"enhanced fan-out", []string{"SubscribeToShard"}, []ReadOption{WithEnhancedFanOut("outage")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			const stream, retries = "outage", 1
			srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2), kinesistest.WithResubscribeWindow(0))
			w := newWorkload(t, "outage", 30, 3, 4)
			putAll(t, srv.Client(), stream, w.entries)
			want := expected(t, srv, stream, w.aggregates, nil)

			// Every reader's call is one attempt and one retry: the budget is spent after
			// two failing calls. Serve again once it has been spent three times per shard.
			srv.SetFaults(kinesistest.Faults{Seed: 5, ServerErrorRate: 1, Operations: c.ops})
			spent := func() bool {
				n := 0
				for _, op := range c.ops {
					n += srv.CallCount(op)
				}
				return n >= 2*3*(retries+1)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			healed := make(chan struct{})
			go func() {
				defer close(healed)
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				for !spent() {
					select {
					case <-tick.C:
					case <-ctx.Done():
						return
					}
				}
				srv.SetFaults(kinesistest.Faults{})
			}()

			p, s := beam.NewPipelineWithRoot()
			opts := append([]ReadOption{WithStartingPosition(TrimHorizon()), WithMaxReadTime(time.Second),
				WithDescribeShardInterval(100 * time.Millisecond), WithRetries(retries, 5*time.Millisecond, 20*time.Millisecond)}, c.opts...)
			recs := Read(s, stream, connect(srv, opts...)...)
			passert.Equals(s, canonical(s, recs), anys(want)...)
			if err := ptest.Run(p); err != nil {
				t.Fatalf("the read failed instead of riding out the outage: %v", err)
			}
			<-healed
			if !spent() {
				t.Errorf("the read ended before its retries ran out; the test did not test the outage")
			}
		})
	}
}
