package kinesisio

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/checkpoint"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// The held commit: positions reach the checkpoint table only once the sinks wrote the
// records before them. Graph (Commit.After):
//
//	read ──tokens──▶ Reshuffle ─▶ key by shard ─┐
//	sink output ─▶ drop every element ─▶ global ─┴▶ Flatten ─▶ heldCommitFn (state, timers)
//
// The sink's output contributes no element, only its watermark: the Flatten's watermark is
// the earlier of the tokens' and the sink output's, so an event-time timer of heldCommitFn
// at time T fires only once the sink's output watermark passed T, that is once the sink
// processed, and its bundles were committed, every window that ends by T (a GroupByKey emits
// a window's pane at the window's end and holds its output watermark there until it has;
// filesink's and kinesisio.Write's outputs carry the windows of their input). heldCommitFn
// holds each token until the end of the last window that holds its records (windowCut), then
// writes the furthest position whose tokens, and all tokens before it, are due. This is
// Beam's Wait.On idea, built from a Flatten and a timer because the Go SDK has no Wait.

func init() {
	register.DoFn5x1[context.Context, state.Provider, timers.Provider, string, commitToken, error](&heldCommitFn{})
	register.DoFn2x0[beam.X, func(string, commitToken)](&dropWrittenFn{})
	register.DoFn3x0[beam.X, beam.Y, func(string, commitToken)](&dropWrittenKVFn{})
	register.Function1x2(keyTokenByShard)
	register.Emitter2[string, commitToken]()
	beam.RegisterType(reflect.TypeOf((*windowCut)(nil)).Elem())
}

// Commit is the commit of a read built with WithCommitAfterSinks(&commit): the read fills
// it, and its After, called once the pipeline's sinks are in the graph, commits each
// position once the sinks wrote the records before it. A Commit belongs to one read.
type Commit struct {
	h *commitHandle
}

// commitHandle is the read a Commit belongs to, and whether After was called.
type commitHandle struct {
	transform string
	src       heldSource
	after     bool
}

// heldSource is a read whose commit waits for the sinks: the shard read (heldShards) or a
// second source. Commit.After checks its arguments, finds the sinks' windows, and leaves the
// rest to the source.
type heldSource interface {
	// commitAfter builds the step that commits the read's positions once the watermark of
	// every written PCollection passed the end of the last window holding their records
	// (cut), and tells the read that After was called (afterCheck). It is called once, with
	// at least one written PCollection.
	commitAfter(s beam.Scope, cut windowCut, written []beam.PCollection)
}

// WithCommitAfterSinks makes the read fill *commit, and leaves its checkpoint-table commit
// to commit.After: a position is written once the pipeline's sinks wrote every record up to
// it, not as soon as the runner committed the bundle that read it. It is for pipelines that
// keep records in runner state before their sinks (windows, GroupByKey, combines, stateful
// DoFns):
//
//	var commit kinesisio.Commit
//	recs := kinesisio.Read(s, "orders", kinesisio.WithCheckpointTable("orders-positions"),
//		kinesisio.WithCommitAfterSinks(&commit))
//	... windows, sinks ...
//	commit.After(s, written...)
//
// A job that dies without a savepoint or drain loses its runner state: without this option
// the records in its open windows are lost on a restart from the table (their positions
// were committed when they were read); with it they are read again. Without it the read
// stays right, and cheaper, for pipelines that write what they read without state.
//
// Given to ReadQueue or ReadQueueDeadLetters, it holds each record's acknowledgement the
// same way: a record is acknowledged once the sinks wrote its window, and kept invisible
// until then (see "Queues" in the package doc).
//
// The read fills *commit when it is built; a Commit filled by another read panics. Without
// a checkpoint table there is nothing to commit, and After only checks its arguments. A
// pipeline whose read was given this option but whose After was never called does not run:
// the runner is handed the pipeline (beam.Run and the like) with an error saying so, as
// nothing it read would ever be committed.
func WithCommitAfterSinks(commit *Commit) SourceOption {
	return SourceOption{option{name: "WithCommitAfterSinks", apply: func(c *config) error {
		if commit == nil {
			return fmt.Errorf("the *Commit is nil; pass the address of a kinesisio.Commit variable")
		}
		c.source.commit = commit
		return nil
	}}}
}

// fill makes c the commit of src, the read transform.
func (c *Commit) fill(transform string, src heldSource) {
	if c.h != nil {
		panic(fmt.Sprintf("%s: option WithCommitAfterSinks: the Commit already belongs to another %s; give each read a Commit of its own", transform, c.h.transform))
	}
	c.h = &commitHandle{transform: transform, src: src}
}

// afterCheck is carried by the DoFns of a read built WithCommitAfterSinks, which refuse to
// be serialised, or set up, until Commit.After was called: otherwise nothing they read would
// be committed. Its fields are unexported, so it travels as {}.
type afterCheck struct {
	transform string
	pending   bool
}

// err says why the read must not run, or nil.
func (a afterCheck) err() error {
	if !a.pending {
		return nil
	}
	return fmt.Errorf("%s: WithCommitAfterSinks was given but Commit.After was never called, so nothing read would be committed; call commit.After(s, <the sinks' outputs>...) once the sinks are in the pipeline", a.transform)
}

// MarshalJSON fails while After was not called: Beam serialises a DoFn when the pipeline is
// handed to a runner, so the pipeline does not start.
func (a afterCheck) MarshalJSON() ([]byte, error) {
	if err := a.err(); err != nil {
		return nil, err
	}
	return []byte("{}"), nil
}

// After commits the read's positions once the sinks whose outputs are written have
// processed the records up to them: a shard's position is written when the watermark of
// every written PCollection has passed the end of the last window holding the records up
// to the position (plus the windows' allowed lateness). written are PCollections the sinks
// output once they have stored what they were given (for example the paths filesink.Write
// returns, or kinesisio.Write's failed messages), in the windows of the records they
// stored: fixed or sliding windows, or the global window, where a position is committed
// once the sinks' output watermark passed its records (right for sinks that write as they
// go; a GroupByKey in the global window of an unbounded read holds the watermark, and the
// positions, until the read ends). Each reader call's position is cut at the records'
// window boundaries, so a restart from the table resumes a shard at the first record of a
// window the sinks had not written. For ReadBounded, a position is written once the sinks
// wrote its records (for a bounded pipeline, at its end).
//
// A window that never fires does not hold the table forever: windows fire when the
// watermark passes their end, also when empty, and the read's watermark advances on idle
// shards (WithIdleThreshold) and goes to the end of time when the read ends, so every
// held position is written by then. What holds the table is what holds the watermark: a
// shard that cannot be read, or a sink that keeps failing. Late records (behind the
// watermark) are dropped by the default trigger, table or not.
//
// After panics on a Commit no read filled, on a second call, on no written PCollection, and
// on merging windows (sessions), whose end is not known when their records are read.
func (c Commit) After(s beam.Scope, written ...beam.PCollection) {
	h := c.h
	if h == nil {
		panic("kinesisio.Commit.After: no read filled this Commit; pass its address to the read with kinesisio.WithCommitAfterSinks(&commit), before calling After")
	}
	if h.after {
		panic("kinesisio.Commit.After: called twice; pass every sink's output to one call")
	}
	h.after = true
	if len(written) == 0 {
		panic("kinesisio.Commit.After: no written PCollection; pass the outputs of the pipeline's sinks")
	}
	var cut windowCut
	for i, w := range written {
		ws := w.WindowingStrategy()
		wc, err := cutOf(ws.Fn)
		if err != nil {
			panic(fmt.Sprintf("kinesisio.Commit.After: written[%d]: %v", i, err))
		}
		wc.LatenessMs = int64(ws.AllowedLateness)
		if i > 0 && wc != cut {
			panic(fmt.Sprintf("kinesisio.Commit.After: written[%d] is in %v, written[0] in %v; the sinks' outputs must have the same windows", i, w.WindowingStrategy().Fn, written[0].WindowingStrategy().Fn))
		}
		cut = wc
	}
	h.src.commitAfter(s, cut, written)
}

// heldShards is the held commit of a shard read: the readers' commit tokens, where they are
// committed, and the reader's spec, whose Cut and AfterCheck After sets (Beam serialises the
// DoFn when the pipeline runs, after the graph is built).
type heldShards struct {
	tokens beam.PCollection
	spec   commitSpec
	read   *readSpec
}

// commitAfter implements heldSource.
func (h *heldShards) commitAfter(s beam.Scope, cut windowCut, written []beam.PCollection) {
	h.read.AfterCheck.pending = false
	if !h.spec.Checkpoint.Enabled() {
		return
	}
	h.read.Cut = cut
	s = s.Scope("kinesisio.CommitAfter")
	keyed := beam.ParDo(s, keyTokenByShard, beam.Reshuffle(s, h.tokens))
	ins := []beam.PCollection{keyed}
	for _, w := range written {
		var sig beam.PCollection
		if typex.IsKV(w.Type()) {
			sig = beam.ParDo(s, &dropWrittenKVFn{}, w)
		} else {
			sig = beam.ParDo(s, &dropWrittenFn{}, w)
		}
		ins = append(ins, beam.WindowInto(s, window.NewGlobalWindows(), sig))
	}
	beam.ParDo0(s, newHeldCommitFn(h.spec, cut), beam.Flatten(s, ins...))
}

// keyTokenByShard keys a commit token by its stream and shard, the key of heldCommitFn's
// state.
func keyTokenByShard(tok commitToken) (string, commitToken) {
	return tok.Stream + "/" + tok.ShardID, tok
}

// dropWrittenFn outputs nothing: what matters of a sink's output is its watermark.
type dropWrittenFn struct{}

// ProcessElement drops the element.
func (fn *dropWrittenFn) ProcessElement(_ beam.X, _ func(string, commitToken)) {}

// dropWrittenKVFn is dropWrittenFn for a sink output of key-value pairs.
type dropWrittenKVFn struct{}

// ProcessElement drops the element.
func (fn *dropWrittenKVFn) ProcessElement(_ beam.X, _ beam.Y, _ func(string, commitToken)) {}

// Kinds of windowCut.
const (
	cutGlobal  = "global"
	cutFixed   = "fixed"
	cutSliding = "sliding"
)

// windowCut is the windowing of the sinks, as the held commit needs it: which window a
// record's event time falls in, and when the last window holding it ends.
type windowCut struct {
	Kind     string
	SizeMs   int64
	PeriodMs int64
	// LatenessMs is the windows' allowed lateness: late panes may follow until the window's
	// end plus it, so positions wait that long too.
	LatenessMs int64
}

// cutOf is the cut of sinks whose output is windowed by fn.
func cutOf(fn *window.Fn) (windowCut, error) {
	switch fn.Kind {
	case window.FixedWindows:
		return windowCut{Kind: cutFixed, SizeMs: fn.Size.Milliseconds(), PeriodMs: fn.Size.Milliseconds()}, nil
	case window.SlidingWindows:
		return windowCut{Kind: cutSliding, SizeMs: fn.Size.Milliseconds(), PeriodMs: fn.Period.Milliseconds()}, nil
	case window.GlobalWindows:
		return windowCut{Kind: cutGlobal}, nil
	}
	return windowCut{}, fmt.Errorf("%v windows merge, and a merged window's end is not known when its records are read; use fixed or sliding windows before the sink", fn)
}

// cuts reports whether reader calls cut their tokens at window boundaries.
func (c windowCut) cuts() bool { return c.Kind == cutFixed || c.Kind == cutSliding }

// index numbers the window (for sliding windows, the latest window) that holds event time
// ms.
func (c windowCut) index(ms int64) int64 {
	if !c.cuts() || c.PeriodMs <= 0 {
		return 0
	}
	return floorDiv(ms, c.PeriodMs)
}

// readyMs is when a token whose records' latest event time is maxEv may be committed: the
// end of the last window that holds maxEv plus the allowed lateness. In the global window
// it is just after maxEv: the sinks' output watermark has passed the records, which a sink
// that writes as it goes (no GroupByKey in the global window) has then written.
func (c windowCut) readyMs(maxEv int64) int64 {
	if !c.cuts() || c.PeriodMs <= 0 {
		return min(maxEv+1, mtime.EndOfGlobalWindowTime.Milliseconds())
	}
	return floorDiv(maxEv, c.PeriodMs)*c.PeriodMs + c.SizeMs + c.LatenessMs
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// heldCommitFn holds the commit tokens of one shard (its key) until their windows are
// written, and then commits them: the stateful step of the held commit. Its state is the
// tokens not yet committed and the time its timer is set to.
type heldCommitFn struct {
	Spec commitSpec
	Cut  windowCut

	Held  state.Bag[commitToken]
	Next  state.Value[int64]
	Ready timers.EventTime

	cp *checkpoint.Checkpointer
}

func newHeldCommitFn(spec commitSpec, cut windowCut) *heldCommitFn {
	return &heldCommitFn{
		Spec:  spec,
		Cut:   cut,
		Held:  state.MakeBagState[commitToken]("held"),
		Next:  state.MakeValueState[int64]("next"),
		Ready: timers.InEventTime("ready"),
	}
}

// Setup opens the checkpoint table.
func (fn *heldCommitFn) Setup(ctx context.Context) error {
	return fn.Spec.open(ctx, &fn.cp)
}

// ProcessElement holds tok until the end of its last window, and sets the timer to the
// earliest end of the tokens held. A SHARD_END token first marks the shard read to its end
// (pendingCheckpoint), which lets its children be read while its last windows are open.
func (fn *heldCommitFn) ProcessElement(ctx context.Context, sp state.Provider, tp timers.Provider, _ string, tok commitToken) error {
	if err := fn.Setup(ctx); err != nil {
		return err
	}
	if tok.Seq == leasetable.ShardEnd {
		if err := fn.cp.PrepareShardEnd(ctx, tok); err != nil {
			return err
		}
		reportTable(ctx, fn.cp)
	}
	if err := fn.Held.Add(sp, tok); err != nil {
		return fmt.Errorf("kinesisio: holding the commit of shard %s: %w", tok.ShardID, err)
	}
	ready := fn.Cut.readyMs(tok.MaxEventMs)
	next, ok, err := fn.Next.Read(sp)
	if err != nil {
		return fmt.Errorf("kinesisio: reading the held commit's timer of shard %s: %w", tok.ShardID, err)
	}
	if !ok || ready < next {
		return fn.setTimer(sp, tp, ready)
	}
	return nil
}

func (fn *heldCommitFn) setTimer(sp state.Provider, tp timers.Provider, ms int64) error {
	fn.Ready.Set(tp, time.UnixMilli(ms), timers.WithNoOutputTimestamp())
	if err := fn.Next.Write(sp, ms); err != nil {
		return fmt.Errorf("kinesisio: setting the held commit's timer: %w", err)
	}
	return nil
}

// OnTimer commits the furthest held position that is due, with every held position before
// it (a token not due yet holds back the positions after it), and keeps the rest.
//
// The timer's firing time is read from state: the event time OnTimer is given is the
// timer's output timestamp, which is the end of time for a timer set
// WithNoOutputTimestamp, as this one is so that it holds no watermark.
func (fn *heldCommitFn) OnTimer(ctx context.Context, _ beam.EventTime, sp state.Provider, tp timers.Provider, key string, _ timers.Context) error {
	if err := fn.Setup(ctx); err != nil {
		return err
	}
	due, ok, err := fn.Next.Read(sp)
	if err != nil || !ok {
		return fmt.Errorf("kinesisio: the held commit's timer of %s fired without its time in state (found %v): %v", key, ok, err)
	}
	held, _, err := fn.Held.Read(sp)
	if err != nil {
		return fmt.Errorf("kinesisio: reading the held commits of %s: %w", key, err)
	}
	slices.SortStableFunc(held, func(a, b commitToken) int { return leasetable.Compare(a.Position(), b.Position()) })
	var commit commitToken
	n := 0
	for n < len(held) && fn.Cut.readyMs(held[n].MaxEventMs) <= due {
		records := commit.Records + held[n].Records
		commit = held[n]
		commit.Records = records
		n++
	}
	if n > 0 {
		if err := fn.cp.Commit(ctx, commit); err != nil {
			return fmt.Errorf("kinesisio: checkpoint table %s: the held commit failed: %w", fn.Spec.Checkpoint.Table, err)
		}
		if fn.Spec.Bounded {
			if err := fn.cp.AwaitHeld(ctx, []string{commit.ShardID}, checkpoint.HeldWaitBounded); err != nil {
				reportTable(ctx, fn.cp)
				return err
			}
		}
		reportTable(ctx, fn.cp)
	}
	rest := held[n:]
	if err := fn.Held.Clear(sp); err != nil {
		return fmt.Errorf("kinesisio: clearing the held commits of %s: %w", key, err)
	}
	if len(rest) == 0 {
		if err := fn.Next.Clear(sp); err != nil {
			return fmt.Errorf("kinesisio: clearing the held commit's timer of %s: %w", key, err)
		}
		return nil
	}
	for _, tok := range rest {
		if err := fn.Held.Add(sp, tok); err != nil {
			return fmt.Errorf("kinesisio: holding the commit of %s: %w", key, err)
		}
	}
	// The first token left is not due; the ones after it wait for it.
	return fn.setTimer(sp, tp, fn.Cut.readyMs(rest[0].MaxEventMs))
}
