package kinesisio

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x2(keyQueueRecordAll)
	register.DoFn4x1[context.Context, string, func(*string) bool, func(string), error](&queueWindowSinkFn{})
	register.Iter1[string]()
	register.Emitter1[string]()
}

// queueSinkServers are the test servers a queueWindowSinkFn asks what was acknowledged, per
// test.
var (
	queueSinkMu      sync.Mutex
	queueSinkServers = map[string]queueSinkTarget{}
)

type queueSinkTarget struct {
	srv *kinesistest.Server
	arn string
	// early collects the RecordIds acknowledged before the sink wrote them.
	early *sink
	// gate, when set, holds every write after the first until it opens.
	gate *sinkGate
}

// sinkGate holds a sink's writes after its first until open is closed: a test that acts
// while the job holds records (an outage) opens it once it has acted, so that nothing the
// job held was acknowledged in between, however slowly the test's goroutine runs.
type sinkGate struct {
	writes atomic.Int64
	open   chan struct{}
}

func newSinkGate() *sinkGate { return &sinkGate{open: make(chan struct{})} }

// wait waits for the gate to open, unless this is the sink's first write.
func (g *sinkGate) wait(ctx context.Context) error {
	if g == nil || g.writes.Add(1) == 1 {
		return nil
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(sinkGateTimeout):
		return fmt.Errorf("the test never opened the sink's gate (%v)", sinkGateTimeout)
	}
}

// sinkGateTimeout fails a write the test forgot to let through, instead of hanging the job.
const sinkGateTimeout = 2 * time.Minute

// keyQueueRecordAll keys every record alike, as "RecordId data", for a count per window.
func keyQueueRecordAll(r QueueRecord) (string, string) {
	return "all", r.RecordID + " " + string(r.Data)
}

// queueWindowSinkFn is a window's sink: it counts the window's records, writes their data to
// the sink named Key, and notes every record the queue acknowledged before this write. Its
// output, one count per window, is what the sink wrote.
type queueWindowSinkFn struct{ Key string }

func (fn *queueWindowSinkFn) ProcessElement(ctx context.Context, _ string, vals func(*string) bool, emit func(string)) error {
	queueSinkMu.Lock()
	tgt := queueSinkServers[fn.Key]
	queueSinkMu.Unlock()
	if err := tgt.gate.wait(ctx); err != nil {
		return err
	}
	acked, err := tgt.srv.QueueAckedRecordIDs(tgt.arn)
	if err != nil {
		return err
	}
	sinksMu.Lock()
	sk := sinks[fn.Key]
	sinksMu.Unlock()
	n := 0
	var v string
	for vals(&v) {
		id, data, _ := strings.Cut(v, " ")
		if acked[id] > 0 {
			tgt.early.mu.Lock()
			tgt.early.strs = append(tgt.early.strs, data)
			tgt.early.mu.Unlock()
		}
		sk.mu.Lock()
		sk.strs = append(sk.strs, data)
		sk.mu.Unlock()
		n++
	}
	emit(fmt.Sprint(n))
	return nil
}

// runHeldQueueCount runs a count of the queue's records in fixed windows of size whose
// records are acknowledged after the count was written, and returns what the sink wrote,
// what was acknowledged before it was written, and the pipeline's result.
func runHeldQueueCount(t *testing.T, srv *kinesistest.Server, arn string, size time.Duration, opts ...QueueOption) ([]string, []string, beam.PipelineResult) {
	t.Helper()
	return runGatedQueueCount(t, srv, arn, size, nil, opts...)
}

// runGatedQueueCount is runHeldQueueCount whose sink's writes after the first wait for gate
// to open (none when gate is nil).
func runGatedQueueCount(t *testing.T, srv *kinesistest.Server, arn string, size time.Duration, gate *sinkGate, opts ...QueueOption) ([]string, []string, beam.PipelineResult) {
	t.Helper()
	sk, early := &sink{}, &sink{}
	sinksMu.Lock()
	sinks[t.Name()] = sk
	sinksMu.Unlock()
	queueSinkMu.Lock()
	queueSinkServers[t.Name()] = queueSinkTarget{srv: srv, arn: arn, early: early, gate: gate}
	queueSinkMu.Unlock()
	p, s := beam.NewPipelineWithRoot()
	var commit Commit
	recs := ReadQueue(s, arn, queueConnect(srv, append(opts, WithCommitAfterSinks(&commit))...)...)
	windowed := beam.WindowInto(s, window.NewFixedWindows(size), beam.ParDo(s, keyQueueRecordAll, recs))
	written := beam.ParDo(s, &queueWindowSinkFn{Key: t.Name()}, beam.GroupByKey(s, windowed))
	commit.After(s, written)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	return sortedCopy(sk.get()), early.get(), res
}

// checkAckedOnce fails unless every record of want was acknowledged exactly once, and
// nothing else was.
func checkAckedOnce(t *testing.T, srv *kinesistest.Server, arn string, want int) {
	t.Helper()
	acked, err := srv.QueueAckedRecordIDs(arn)
	if err != nil {
		t.Fatal(err)
	}
	if len(acked) != want {
		t.Fatalf("%d records acknowledged, want %d", len(acked), want)
	}
	for id, n := range acked {
		if n != 1 {
			t.Fatalf("record %s acknowledged %d times, want once", id, n)
		}
	}
}

func TestReadQueueAcknowledgesOnlyAfterTheSinkWrote(t *testing.T) {
	srv, arn, want := queueServer(t, 300, kinesistest.QueueConfig{})
	got, early, res := runHeldQueueCount(t, srv, arn, 2*time.Second, WithQueueSlots(2))
	if !slices.Equal(got, want) {
		t.Fatalf("the sink wrote %d records, want %d", len(got), len(want))
	}
	if len(early) > 0 {
		t.Fatalf("%d records were acknowledged before the sink wrote them, e.g. %q", len(early), early[0])
	}
	checkAckedOnce(t, srv, arn, len(want))
	st, err := srv.QueueStats(arn)
	if err != nil {
		t.Fatal(err)
	}
	if st.InFlight != 0 || st.Visible != 0 || st.Redelivered != 0 {
		t.Fatalf("queue after the read: %+v", st)
	}
	if n := queueCounter(res, "acks"); n == 0 || n > int64(len(want)) {
		t.Fatalf("acks metric %d, want %d (fewer only when Prism dropped a bundle's metrics)", n, len(want))
	}
}

// A window longer than the visibility timeout: the records wait in it, invisible, their
// visibility extended, and come back to no one while the job lives.
func TestReadQueueKeepsAWindowLongerThanTheVisibilityTimeout(t *testing.T) {
	srv, arn, want := queueServer(t, 200, kinesistest.QueueConfig{})
	// The read stops 6 s after the queue ran dry: the records are held for at least three
	// visibility timeouts of 2 s, in a window of an hour that the end of the read fires.
	got, early, res := runHeldQueueCount(t, srv, arn, time.Hour,
		WithQueueVisibility(2*time.Second), WithQueueStopWhenIdle(6*time.Second))
	if !slices.Equal(got, want) {
		t.Fatalf("the sink wrote %d records, want %d", len(got), len(want))
	}
	if len(early) > 0 {
		t.Fatalf("%d records were acknowledged before the sink wrote them", len(early))
	}
	checkAckedOnce(t, srv, arn, len(want))
	st, err := srv.QueueStats(arn)
	if err != nil {
		t.Fatal(err)
	}
	if st.Expired != 0 || st.Redelivered != 0 || st.InFlight != 0 {
		t.Fatalf("queue after the read: %+v; want no visibility timeout run out, nothing delivered twice", st)
	}
	if n := queueCounter(res, "extensions"); n == 0 {
		t.Fatal("no visibility extensions counted")
	}
}

func TestReadQueueWithoutCommitAfterDoesNotRun(t *testing.T) {
	srv, arn, _ := queueServer(t, 1, kinesistest.QueueConfig{})
	p, s := beam.NewPipelineWithRoot()
	var commit Commit
	recs := ReadQueue(s, arn, queueConnect(srv, WithCommitAfterSinks(&commit))...)
	beam.ParDo0(s, &collectQueueFn{Key: t.Name()}, recs)
	err := ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), "Commit.After was never called") {
		t.Fatalf("run without Commit.After: %v", err)
	}
}
