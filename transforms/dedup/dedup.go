// Package dedup drops repeated copies of an element within a window, for pipelines fed by
// at-least-once sources (a Kinesis producer's retry writes the same data twice; a reader
// restarted from an older checkpoint reads records again).
//
// The first copy of a key seen in a window is emitted at once, later copies of that key in
// the same window are dropped and counted (counter beamkinesis.dedup/duplicates). "First"
// means first processed by the runner, not earliest timestamp; copies of one Kinesis
// record are identical, so which one wins does not matter for Records. The same key in
// another window is a different element and is emitted again. Memory of a key lasts until
// the watermark passes the end of its window plus the input's allowed lateness; a copy
// arriving later than that (possible only for data the runner would otherwise drop as
// late) is emitted again. Prism (v2.77) garbage-collects user state as soon as the
// watermark passes the window's end, whatever the allowed lateness, so on Prism late
// copies within the allowed lateness are emitted again too.
//
// The work is a stateful DoFn (a value state per key and window, cleared by an event-time
// timer at the window's expiry), separate from any splittable DoFn because Prism rejects
// state in a splittable DoFn. Use it on fixed or sliding windows: in the global window of
// an unbounded input, the timer never fires and state is kept for every key forever.
package dedup

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func init() {
	register.Function1x2(recordKey)
	register.DoFn7x1[context.Context, beam.Window, state.Provider, timers.Provider, string, beam.V, func(beam.V), error](&firstFn{})
	register.Emitter1[beam.V]()
}

var duplicates = beam.NewCounter("beamkinesis.dedup", "duplicates")

// Records drops repeated copies of the same Kinesis user record within each window of recs,
// a PCollection<kinesisio.Record>. Records are the same when RecordKey says so: same
// stream, shard, sequence number and sub-sequence number. The result is a
// PCollection<kinesisio.Record> in the same windows, with the same timestamps.
func Records(s beam.Scope, recs beam.PCollection) beam.PCollection {
	s = s.Scope("dedup.Records")
	return perKey(s, beam.ParDo(s, recordKey, recs))
}

// PerKey drops, within each window, every element of kvs, a PCollection<KV<string, V>>,
// whose key was already seen in that window, and returns the values of the kept elements,
// a PCollection<V> in the same windows, with the same timestamps.
func PerKey(s beam.Scope, kvs beam.PCollection) beam.PCollection {
	s = s.Scope("dedup.PerKey")
	return perKey(s, kvs)
}

func perKey(s beam.Scope, kvs beam.PCollection) beam.PCollection {
	lateness := time.Duration(kvs.WindowingStrategy().AllowedLateness) * time.Millisecond
	return beam.ParDo(s, &firstFn{
		Seen:            state.MakeValueState[bool]("seen"),
		Expiry:          timers.InEventTime("expiry"),
		AllowedLateness: lateness,
	}, kvs)
}

// RecordKey is the identity of a Kinesis user record: stream, shard, sequence number and
// sub-sequence number, encoded so that distinct identities never share a key.
func RecordKey(r kinesisio.Record) string {
	var b strings.Builder
	b.Grow(len(r.StreamName) + len(r.ShardID) + len(r.SequenceNumber) + 16)
	// Length prefixes make the encoding injective whatever the names contain.
	b.WriteString(strconv.Itoa(len(r.StreamName)))
	b.WriteByte(':')
	b.WriteString(r.StreamName)
	b.WriteString(strconv.Itoa(len(r.ShardID)))
	b.WriteByte(':')
	b.WriteString(r.ShardID)
	b.WriteString(r.SequenceNumber)
	b.WriteByte('/')
	b.WriteString(strconv.FormatInt(r.SubSequenceNumber, 10))
	return b.String()
}

func recordKey(r kinesisio.Record) (string, kinesisio.Record) {
	return RecordKey(r), r
}

// firstFn emits the first value of each key in each window and drops the rest.
type firstFn struct {
	Seen   state.Value[bool]
	Expiry timers.EventTime
	// AllowedLateness is the input's allowed lateness: state must outlive the window by it.
	AllowedLateness time.Duration
}

func (fn *firstFn) ProcessElement(ctx context.Context, w beam.Window, sp state.Provider, tp timers.Provider, key string, v beam.V, emit func(beam.V)) error {
	_, seen, err := fn.Seen.Read(sp)
	if err != nil {
		return fmt.Errorf("dedup: reading state of key %q: %w", key, err)
	}
	if seen {
		duplicates.Inc(ctx, 1)
		return nil
	}
	if err := fn.Seen.Write(sp, true); err != nil {
		return fmt.Errorf("dedup: writing state of key %q: %w", key, err)
	}
	// The timer only clears state, so it must not hold back the output watermark.
	expiry := mtime.Min(w.MaxTimestamp().Add(fn.AllowedLateness), mtime.EndOfGlobalWindowTime)
	fn.Expiry.Set(tp, expiry.ToTime(), timers.WithNoOutputTimestamp())
	emit(v)
	return nil
}

func (fn *firstFn) OnTimer(ctx context.Context, sp state.Provider, tp timers.Provider, key string, t timers.Context, emit func(beam.V)) error {
	if err := fn.Seen.Clear(sp); err != nil {
		return fmt.Errorf("dedup: clearing state of key %q: %w", key, err)
	}
	return nil
}
