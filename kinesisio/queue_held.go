package kinesisio

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/queue"
)

// The held acknowledgement of a queue read (WithCommitAfterSinks): a record is acknowledged
// only once the sinks wrote it. It is the held commit of the shard read (commit_held.go)
// with receipt handles for positions:
//
//	queueReadFn ──tokens──▶ Reshuffle ─▶ key by slot ─┐
//	sink output ─▶ drop every element ─▶ global ──────┴▶ Flatten ─▶ heldAckFn (state, timers)
//
// heldAckFn holds each token until the sinks' output watermark passed the end of the last
// window holding its records (windowCut.readyMs), then acknowledges its handles. Unlike
// positions, handles have no order: each token is acknowledged as soon as it is due. While
// a token is held, the worker that received its records keeps their visibility extended
// (internal/queue's Holder), up to WithQueueProcessingTimeout since their receive; a worker
// that dies stops extending, and its records come back after their visibility timeout.

func init() {
	register.DoFn5x1[context.Context, state.Provider, timers.Provider, string, queueToken, error](&heldAckFn{})
	register.DoFn2x0[beam.X, func(string, queueToken)](&dropWrittenQueueFn{})
	register.DoFn3x0[beam.X, beam.Y, func(string, queueToken)](&dropWrittenQueueKVFn{})
	register.Function1x2(keyQueueTokenBySlot)
	register.Emitter2[string, queueToken]()
}

// heldQueue is the held acknowledgement of a queue read: its tokens, and the read's spec,
// whose AfterCheck commitAfter clears (Beam serialises the DoFn when the pipeline runs).
type heldQueue struct {
	tokens beam.PCollection
	read   *queueSpec
}

// commitAfter implements heldSource.
func (h *heldQueue) commitAfter(s beam.Scope, cut windowCut, written []beam.PCollection) {
	h.read.AfterCheck.pending = false
	s = s.Scope("kinesisio.CommitAfter")
	keyed := beam.ParDo(s, keyQueueTokenBySlot, beam.Reshuffle(s, h.tokens))
	ins := []beam.PCollection{keyed}
	for _, w := range written {
		var sig beam.PCollection
		if typex.IsKV(w.Type()) {
			sig = beam.ParDo(s, &dropWrittenQueueKVFn{}, w)
		} else {
			sig = beam.ParDo(s, &dropWrittenQueueFn{}, w)
		}
		ins = append(ins, beam.WindowInto(s, window.NewGlobalWindows(), sig))
	}
	beam.ParDo0(s, newHeldAckFn(*h.read, cut), beam.Flatten(s, ins...))
}

// keyQueueTokenBySlot keys a token by its receiver slot, the key of heldAckFn's state.
func keyQueueTokenBySlot(tok queueToken) (string, queueToken) {
	return strconv.FormatInt(tok.Slot, 10), tok
}

// dropWrittenQueueFn outputs nothing: what matters of a sink's output is its watermark.
type dropWrittenQueueFn struct{}

// ProcessElement drops the element.
func (fn *dropWrittenQueueFn) ProcessElement(_ beam.X, _ func(string, queueToken)) {}

// dropWrittenQueueKVFn is dropWrittenQueueFn for a sink output of key-value pairs.
type dropWrittenQueueKVFn struct{}

// ProcessElement drops the element.
func (fn *dropWrittenQueueKVFn) ProcessElement(_ beam.X, _ beam.Y, _ func(string, queueToken)) {}

// heldAckFn holds the tokens of one receiver slot (its key) until their windows are
// written, and then acknowledges their records. Its state is the tokens not yet
// acknowledged and the time its timer is set to.
type heldAckFn struct {
	Spec queueSpec
	Cut  windowCut

	Held  state.Bag[queueToken]
	Next  state.Value[int64]
	Ready timers.EventTime
}

func newHeldAckFn(spec queueSpec, cut windowCut) *heldAckFn {
	return &heldAckFn{
		Spec:  spec,
		Cut:   cut,
		Held:  state.MakeBagState[queueToken]("held"),
		Next:  state.MakeValueState[int64]("next"),
		Ready: timers.InEventTime("ready"),
	}
}

// ProcessElement holds tok until the end of its last window, and sets the timer to the
// earliest end of the tokens held.
func (fn *heldAckFn) ProcessElement(_ context.Context, sp state.Provider, tp timers.Provider, key string, tok queueToken) error {
	if err := fn.Held.Add(sp, tok); err != nil {
		return fmt.Errorf("%s: holding the acknowledgement of slot %s: %w", fn.Spec.transform(), key, err)
	}
	ready := fn.Cut.readyMs(tok.MaxEventMs)
	next, ok, err := fn.Next.Read(sp)
	if err != nil {
		return fmt.Errorf("%s: reading the held acknowledgement's timer of slot %s: %w", fn.Spec.transform(), key, err)
	}
	if !ok || ready < next {
		return fn.setTimer(sp, tp, ready)
	}
	return nil
}

func (fn *heldAckFn) setTimer(sp state.Provider, tp timers.Provider, ms int64) error {
	fn.Ready.Set(tp, time.UnixMilli(ms), timers.WithNoOutputTimestamp())
	if err := fn.Next.Write(sp, ms); err != nil {
		return fmt.Errorf("%s: setting the held acknowledgement's timer: %w", fn.Spec.transform(), err)
	}
	return nil
}

// OnTimer acknowledges the held tokens that are due and keeps the rest. A queue that cannot
// be called fails the bundle; the runner retries it with the tokens still in state.
//
// The firing time is read from state: OnTimer is given the timer's output timestamp, the
// end of time for a timer set WithNoOutputTimestamp (set so that it holds no watermark).
func (fn *heldAckFn) OnTimer(ctx context.Context, _ beam.EventTime, sp state.Provider, tp timers.Provider, key string, _ timers.Context) error {
	name := fn.Spec.transform()
	due, ok, err := fn.Next.Read(sp)
	if err != nil || !ok {
		return fmt.Errorf("%s: the held acknowledgement's timer of slot %s fired without its time in state (found %v): %v", name, key, ok, err)
	}
	held, _, err := fn.Held.Read(sp)
	if err != nil {
		return fmt.Errorf("%s: reading the held acknowledgements of slot %s: %w", name, key, err)
	}
	var entries []queue.Entry
	var rest []queueToken
	next := int64(0)
	for _, tok := range held {
		ready := fn.Cut.readyMs(tok.MaxEventMs)
		if ready > due {
			rest = append(rest, tok)
			if len(rest) == 1 || ready < next {
				next = ready
			}
			continue
		}
		entries = append(entries, tok.entries()...)
	}
	if err := settleQueue(ctx, fn.Spec, entries); err != nil {
		return err
	}
	if err := fn.Held.Clear(sp); err != nil {
		return fmt.Errorf("%s: clearing the held acknowledgements of slot %s: %w", name, key, err)
	}
	if len(rest) == 0 {
		if err := fn.Next.Clear(sp); err != nil {
			return fmt.Errorf("%s: clearing the held acknowledgement's timer of slot %s: %w", name, key, err)
		}
		return nil
	}
	for _, tok := range rest {
		if err := fn.Held.Add(sp, tok); err != nil {
			return fmt.Errorf("%s: holding the acknowledgement of slot %s: %w", name, key, err)
		}
	}
	return fn.setTimer(sp, tp, next)
}
