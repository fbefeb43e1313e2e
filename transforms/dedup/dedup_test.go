package dedup

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*timedID)(nil)).Elem())
	register.Function2x1(parseID)
	register.Function2x0(emitTimed)
	register.Function3x0(describe)
	register.Function1x2(splitKV)
	register.Function1x1(arrivalMillis)
	register.Emitter2[beam.EventTime, string]()
	register.Emitter1[string]()
}

// TestMain runs the package's pipeline tests on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	ptest.Main(m)
}

// timedID is a test input: a record identity "shard/seq/subseq" at an event time (ms).
type timedID struct {
	AtMillis int64
	ID       string
}

func emitTimed(in timedID, emit func(beam.EventTime, string)) {
	emit(beam.EventTime(in.AtMillis), in.ID)
}

// parseID builds the record with identity "shard/seq/subseq"; its arrival time is its
// event time, so copies in different windows are distinguishable records.
func parseID(et beam.EventTime, id string) kinesisio.Record {
	parts := strings.Split(id, "/")
	sub, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		panic(fmt.Sprintf("bad test id %q: %v", id, err))
	}
	return kinesisio.Record{
		StreamName:                  "events",
		ShardID:                     parts[0],
		SequenceNumber:              parts[1],
		SubSequenceNumber:           sub,
		ApproximateArrivalTimestamp: et.ToTime().UTC(),
		Data:                        []byte(id),
	}
}

// describe names a kept record by its window start (seconds) and identity.
func describe(w beam.Window, r kinesisio.Record, emit func(string)) {
	iw := w.(window.IntervalWindow)
	emit(fmt.Sprintf("[%ds] %s/%s/%d", iw.Start.Milliseconds()/1000, r.ShardID, r.SequenceNumber, r.SubSequenceNumber))
}

// global re-windows col into the global window, which passert needs to compare it with
// its expected values.
func global(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.WindowInto(s, window.NewGlobalWindows(), col)
}

func arrivalMillis(r kinesisio.Record) int64 { return r.ApproximateArrivalTimestamp.UnixMilli() }

// splitKV turns "key=value" into a KV<string, int>.
func splitKV(kv string) (string, int) {
	k, v, _ := strings.Cut(kv, "=")
	n, err := strconv.Atoi(v)
	if err != nil {
		panic(fmt.Sprintf("bad test pair %q: %v", kv, err))
	}
	return k, n
}

// duplicatesCounted sums the duplicates counter; pr is nil on runners that do not execute
// (--runner=vet), which the callers' checks then skip.
func duplicatesCounted(t *testing.T, pr beam.PipelineResult) int64 {
	t.Helper()
	if pr == nil {
		t.Skip("runner returned no result; counters not checked")
	}
	qr := pr.Metrics().Query(func(sr metrics.SingleResult) bool {
		return sr.Namespace() == "beamkinesis.dedup" && sr.Name() == "duplicates"
	})
	var n int64
	for _, c := range qr.Counters() {
		n += c.Result()
	}
	return n
}

func TestRecordsDropsDuplicatesWithinAWindowAndKeepsThemAcrossWindows(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	inputs := beam.Create(s,
		timedID{1_000, "s0/1/0"},
		timedID{2_000, "s0/1/0"},  // duplicate in window [0s,60s)
		timedID{59_999, "s0/1/0"}, // duplicate at the window's last millisecond
		timedID{3_000, "s0/1/1"},  // another user record of the same aggregate
		timedID{4_000, "s1/1/0"},  // same sequence number, other shard
		timedID{60_000, "s0/1/0"}, // same identity, window [60s,120s)
		timedID{61_000, "s0/1/0"}, // duplicate in that window
	)
	recs := beam.ParDo(s, parseID, beam.ParDo(s, emitTimed, inputs))
	windowed := beam.WindowInto(s, window.NewFixedWindows(time.Minute), recs)
	kept := Records(s, windowed)
	passert.Equals(s, global(s, beam.ParDo(s, describe, kept)),
		"[0s] s0/1/0", "[0s] s0/1/1", "[0s] s1/1/0", "[60s] s0/1/0")
	pr := ptest.RunAndValidate(t, p)
	if got := duplicatesCounted(t, pr); got != 3 {
		t.Errorf("duplicates counter = %d, want 3", got)
	}
}

func TestRecordsFirstCopyWinsOnUnboundedInput(t *testing.T) {
	// TestStream makes the input unbounded and delivers the copies in separate bundles with
	// watermark advances between them, so the state must survive across bundles and be
	// cleared only when the window expires.
	cfg := teststream.NewConfig()
	steps := []error{
		cfg.AddElements(1_000, "s0/1/0", "s0/1/0", "s0/2/0", "s0/2/1"),
		cfg.AdvanceWatermark(30_000),
		cfg.AddElements(40_000, "s0/1/0", "s1/1/0"),
		cfg.AdvanceWatermark(61_000), // window [0s,60s) expires; its state is cleared
		cfg.AddElements(65_000, "s0/1/0"),
		cfg.AddElements(70_000, "s0/1/0", "s0/2/0"),
		cfg.AdvanceWatermarkToInfinity(),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("test stream step %d: %v", i, err)
		}
	}

	p, s := beam.NewPipelineWithRoot()
	recs := beam.ParDo(s, parseID, teststream.Create(s, cfg))
	windowed := beam.WindowInto(s, window.NewFixedWindows(time.Minute), recs)
	kept := Records(s, windowed)
	passert.Equals(s, global(s, beam.ParDo(s, describe, kept)),
		"[0s] s0/1/0", "[0s] s0/2/0", "[0s] s0/2/1", "[0s] s1/1/0",
		"[60s] s0/1/0", "[60s] s0/2/0")
	// The first copy processed is the one kept: within [60s,120s), the s0/1/0 record that
	// arrived at 65s, not the one at 70s.
	first := beam.ParDo(s, arrivalMillis, kept)
	passert.Equals(s, global(s, first), int64(1_000), int64(1_000), int64(1_000), int64(40_000), int64(65_000), int64(70_000))
	pr := ptest.RunAndValidate(t, p)
	if got := duplicatesCounted(t, pr); got != 3 {
		t.Errorf("duplicates counter = %d, want 3", got)
	}
}

// fakeState is a state.Provider holding value states in a map, for calling firstFn
// directly; the other kinds of state are not implemented (the embedded nil panics).
type fakeState struct {
	state.Provider
	values map[string]any
}

func (f *fakeState) ReadValueState(id string) (any, []state.Transaction, error) {
	return f.values[id], nil, nil
}

func (f *fakeState) WriteValueState(t state.Transaction) error {
	f.values[t.Key] = t.Val
	return nil
}

func (f *fakeState) ClearValueState(t state.Transaction) error {
	delete(f.values, t.Key)
	return nil
}

// fakeTimers is a timers.Provider recording the timers set.
type fakeTimers struct{ set []timers.TimerMap }

func (f *fakeTimers) Set(t timers.TimerMap) { f.set = append(f.set, t) }

func TestFirstFnKeepsStateUntilTheWindowExpiresWithItsAllowedLateness(t *testing.T) {
	// Prism (v2.77) garbage-collects user state at the end of the window whatever the
	// allowed lateness, so this part of the contract is checked on the DoFn itself.
	fn := &firstFn{Seen: state.MakeValueState[bool]("seen"), Expiry: timers.InEventTime("expiry"), AllowedLateness: time.Hour}
	sp, tp := &fakeState{values: map[string]any{}}, &fakeTimers{}
	w := window.IntervalWindow{Start: mtime.FromMilliseconds(0), End: mtime.FromMilliseconds(60_000)}
	var emitted []beam.V
	emit := func(v beam.V) { emitted = append(emitted, v) }
	process := func(v string) {
		t.Helper()
		if err := fn.ProcessElement(context.Background(), w, sp, tp, "k", v, emit); err != nil {
			t.Fatalf("ProcessElement(%q): %v", v, err)
		}
	}

	process("first")
	process("second") // a duplicate: dropped
	wantTimer := timers.TimerMap{
		Family:        "expiry",
		FireTimestamp: mtime.FromMilliseconds(59_999).Add(time.Hour), // window end + lateness
		HoldTimestamp: mtime.MaxTimestamp,                            // no watermark hold
	}
	if !reflect.DeepEqual(tp.set, []timers.TimerMap{wantTimer}) {
		t.Errorf("timers set = %+v, want exactly %+v", tp.set, wantTimer)
	}
	if err := fn.OnTimer(context.Background(), sp, tp, "k", timers.Context{Family: "expiry"}, emit); err != nil {
		t.Fatalf("OnTimer: %v", err)
	}
	if len(sp.values) != 0 {
		t.Errorf("state after the expiry timer = %v, want none", sp.values)
	}
	process("third") // state was cleared: first again
	if want := []beam.V{"first", "third"}; !reflect.DeepEqual(emitted, want) {
		t.Errorf("emitted %v, want %v", emitted, want)
	}
}

func TestPerKeyKeepsOneValuePerKeyInTheGlobalWindow(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	kvs := beam.ParDo(s, splitKV, beam.Create(s, "a=1", "b=2", "a=1", "c=3", "b=2", "a=1"))
	passert.Equals(s, PerKey(s, kvs), 1, 2, 3)
	pr := ptest.RunAndValidate(t, p)
	if got := duplicatesCounted(t, pr); got != 3 {
		t.Errorf("duplicates counter = %d, want 3", got)
	}
}
