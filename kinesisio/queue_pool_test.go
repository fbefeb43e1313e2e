package kinesisio

import (
	"context"
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/queue"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestQueueSlotRewindLetsGoWhatItEmittedSince calls the pool cache as a slot's calls do:
// three calls of slot 0 emit 10 records each, the first call's are acknowledged, and the
// runner then sends the slot back to call 1 (a checkpoint restored with the worker alive).
// The 20 records of calls 1 and 2, which nothing will acknowledge, are let go at once; the
// acknowledged ones stay so.
func TestQueueSlotRewindLetsGoWhatItEmittedSince(t *testing.T) {
	srv, arn, want := queueServer(t, 30, kinesistest.QueueConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := buildConfig(targetQueue, queueConnect(srv))
	spec := queueSpec{
		Client: cfg.client, Retry: cfg.retry, QueueARN: arn, ReadID: newReadID(),
		Receivers: 1, Visibility: time.Minute, ProcessingTimeout: 10 * time.Minute, Wait: time.Second,
		MaxRecordsPerCall: 10, MaxCallTime: time.Second,
	}
	p, err := pools.get(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.pool.Stop(context.Background())
		pools.mu.Lock()
		delete(pools.pools, spec.key())
		pools.mu.Unlock()
	})
	var calls [3][]queue.Entry
	for pos := range calls {
		for len(calls[pos]) < 10 {
			recs, err := p.pool.Take(ctx, 10-len(calls[pos]), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				calls[pos] = append(calls[pos], queue.Entry{Handle: r.Handle, Received: r.Received})
			}
		}
		if n := pools.rewind(ctx, p, 0, int64(pos)); n != 0 {
			t.Fatalf("call %d, the slot's next, let go %d records; want 0", pos, n)
		}
		pools.emitted(p, 0, int64(pos), calls[pos])
	}
	if err := settleQueue(ctx, spec, calls[0]); err != nil {
		t.Fatal(err)
	}
	if n := pools.rewind(ctx, p, 0, 1); n != 20 {
		t.Fatalf("back to call 1: %d records let go; want the 20 of calls 1 and 2", n)
	}
	if n := pools.rewind(ctx, p, 0, 0); n != 0 {
		t.Fatalf("back to call 0: %d records let go; want 0 (its records are acknowledged)", n)
	}
	// The receiver may have taken some of them again into the buffer, which Stop lets go.
	p.pool.Stop(ctx)
	if n := p.pool.Holder().Len(); n != 0 {
		t.Fatalf("the worker still holds %d records; want 0", n)
	}
	st, err := srv.QueueStats(arn)
	if err != nil {
		t.Fatal(err)
	}
	if st.Acked != 10 || st.InFlight != 0 || st.Visible != len(want)-10 {
		t.Fatalf("the queue: %+v; want 10 acknowledged, %d visible again, none in flight", st, len(want)-10)
	}
}
