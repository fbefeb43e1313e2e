// Package producer puts numbered JSON events into a stream of the test server, as the
// producer beside a job that a test kills and restarts: a test knows every event put and
// can say which are missing from what the jobs wrote.
package producer

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/testing/childjob"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// Events puts the events {"id":"e-00001","ts":1}, {"id":"e-00002","ts":2}, ... into a
// stream, all with partition key "k".
type Events struct {
	srv    *kinesistest.Server
	stream string
	n      atomic.Int64 // the events put so far, numbered from 1
	mu     sync.Mutex
	err    error // the first failed put
	stop   atomic.Bool
	wg     sync.WaitGroup
}

// Start puts the first count events into stream.
func Start(srv *kinesistest.Server, stream string, count int) *Events {
	e := &Events{srv: srv, stream: stream}
	e.put(count)
	return e
}

// ID is the id of the i-th event put, counting from 1.
func ID(i int64) string { return fmt.Sprintf("e-%05d", i) }

// N is the number of events put so far.
func (e *Events) N() int64 { return e.n.Load() }

// put puts the next count events.
func (e *Events) put(count int) {
	var lines []string
	for range count {
		i := e.n.Add(1)
		lines = append(lines, fmt.Sprintf(`{"id":%q,"ts":%d}`, ID(i), i))
	}
	if err := embedded.PutStrings(context.Background(), e.srv.Client(), e.stream, "k", lines...); err != nil {
		e.mu.Lock()
		e.err = cmp.Or(e.err, err)
		e.mu.Unlock()
	}
}

// Steady puts two events every 50 ms, 1,200 times at most, until Finish.
func (e *Events) Steady() {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for i := 0; !e.stop.Load() && i < 1200; i++ {
			e.put(2)
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

// Finish stops the steady puts, puts 20 events more, and fails t if a put failed.
func (e *Events) Finish(t testing.TB) {
	t.Helper()
	e.stop.Store(true)
	e.wg.Wait()
	e.put(20)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		t.Fatal(e.err)
	}
}

// Missing returns the ids of the events put that seen does not know, in order.
func (e *Events) Missing(seen func(id string) bool) []string {
	var out []string
	for i := int64(1); i <= e.N(); i++ {
		if id := ID(i); !seen(id) {
			out = append(out, id)
		}
	}
	return out
}

// KillQueueJob kills child (SIGKILL) into of the next window of size window to start, stops
// the steady puts (Finish), and lets what the killed job held of the queue at arn come back
// now, as its visibility timeout would later: the test ends it on the server clock rather
// than waiting. It returns the queue's stats at the kill and how many records came back.
func (e *Events) KillQueueJob(t testing.TB, child *childjob.Job, arn string, window, into time.Duration) (kinesistest.QueueStats, int) {
	t.Helper()
	now := time.Now()
	time.Sleep(now.Truncate(window).Add(window + into).Sub(now))
	child.Kill(t)
	e.Finish(t)
	atKill, err := e.srv.QueueStats(arn)
	if err != nil {
		t.Fatal(err)
	}
	// A long poll of the killed job that the server has not yet seen closed would take what
	// comes back into the dead connection: wait until the server saw them all go.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err = e.srv.WaitQueue(ctx, arn, func(st kinesistest.QueueStats) bool { return st.Polling == 0 })
	cancel()
	if err != nil {
		t.Fatalf("the killed job's long polls are still open on the server: %v", err)
	}
	expired, err := e.srv.ExpireQueueInFlight(arn)
	if err != nil {
		t.Fatal(err)
	}
	return atKill, expired
}
