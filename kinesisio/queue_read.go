package kinesisio

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/queue"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// The queue read. Graph:
//
//	Impulse ─▶ slots ─▶ Reshuffle ─▶ queueReadFn (SDF) ─▶ QueueRecord
//	                                      └─tokens─▶ Reshuffle ─▶ queueAckFn
//
// A queue has no shards: its work is spread by the service over whoever receives. So the
// read is parallel by workers: Slots elements, spread over the workers by the Reshuffle,
// each an unbounded restriction whose calls drain the process's receiver pool
// (queue_pool.go). A call emits what the pool received, up to MaxRecordsPerCall or
// MaxCallTime, and a token with the receipt handles; then it checkpoints. The tokens cross
// a Reshuffle to the acknowledge step: a runner hands an element on only once it committed
// the bundle that emitted it, so a record is acknowledged strictly after the runner has it
// (bundle finalization is not used: the Go SDK finalizes only a plan's first bundle; see
// commit.go). With WithCommitAfterSinks the tokens go to the held commit instead
// (queue_held.go).
func init() {
	register.DoFn2x0[[]byte, func(int64)](&queueSlotsFn{})
	register.DoFn6x2[context.Context, *watermarkEstimator, *sdf.LockRTracker, int64, func(beam.EventTime, QueueRecord), func(beam.EventTime, queueToken), sdf.ProcessContinuation, error](&queueReadFn{})
	register.DoFn3x1[context.Context, queueToken, func(int64), error](&queueAckFn{})
	register.Function1x0(discardAckOutput)
	register.Emitter1[int64]()
	register.Emitter2[beam.EventTime, QueueRecord]()
}

// queueSpec is the configuration the queue read's DoFns carry.
type queueSpec struct {
	Client     clientConfig
	Retry      retryConfig
	QueueARN   string
	DeadLetter bool
	// Restore makes the acknowledge step of a dead-letter read restore the records to the
	// queue instead of discarding them.
	Restore bool
	// ReadID tells the read's pools apart from other reads' in a worker.
	ReadID string
	// Slots is how many receiver slots the read has in all; Receivers, how many receives
	// each worker's pool keeps going.
	Slots     int
	Receivers int
	// Visibility is the visibility timeout a receive asks for and an extension sets;
	// ProcessingTimeout the most time since its receive a record is kept invisible.
	Visibility        time.Duration
	ProcessingTimeout time.Duration
	Wait              time.Duration
	// MaxRecordsPerCall and MaxCallTime bound one call of a slot.
	MaxRecordsPerCall int
	MaxCallTime       time.Duration
	// StopWhenIdle, when positive, ends a slot once the queue gave it nothing for that long:
	// the read ends (for tests and backfills).
	StopWhenIdle time.Duration
	Deaggregate  bool
	// AfterCheck refuses to run a read made WithCommitAfterSinks whose Commit.After was not
	// called.
	AfterCheck afterCheck
}

// queueSlotsFn emits the read's receiver slots.
type queueSlotsFn struct {
	Slots int
}

// ProcessElement emits slots 0..Slots-1.
func (fn *queueSlotsFn) ProcessElement(_ []byte, emit func(int64)) {
	for i := range fn.Slots {
		emit(int64(i))
	}
}

// queueReadFn is a receiver slot: an unbounded SDF over a restriction that only counts its
// calls.
type queueReadFn struct {
	Spec queueSpec

	// idleSince is when the slot last emitted a record, for StopWhenIdle.
	idleSince map[int64]time.Time
}

// CreateInitialRestriction is an endless count of calls.
func (fn *queueReadFn) CreateInitialRestriction(_ int64) offsetrange.Restriction {
	return offsetrange.Restriction{Start: 0, End: math.MaxInt64}
}

// SplitRestriction keeps the restriction whole: parallelism comes from the slots.
func (fn *queueReadFn) SplitRestriction(_ int64, r offsetrange.Restriction) []offsetrange.Restriction {
	return []offsetrange.Restriction{r}
}

// RestrictionSize is a constant: slots are alike.
func (fn *queueReadFn) RestrictionSize(_ int64, _ offsetrange.Restriction) float64 { return 1 }

// CreateTracker makes a tracker that checkpoints but never splits a slot in two.
func (fn *queueReadFn) CreateTracker(r offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(&slotTracker{offsetrange.NewTracker(r)})
}

// TruncateRestriction ends a slot when the job drains: nothing is left to read.
func (fn *queueReadFn) TruncateRestriction(_ *sdf.LockRTracker, _ int64) offsetrange.Restriction {
	return offsetrange.Restriction{}
}

// InitialWatermarkEstimatorState starts the watermark at the slot element's timestamp.
func (fn *queueReadFn) InitialWatermarkEstimatorState(et beam.EventTime, _ offsetrange.Restriction, _ int64) int64 {
	return et.Milliseconds()
}

// CreateWatermarkEstimator makes the slot's estimator.
func (fn *queueReadFn) CreateWatermarkEstimator(ms int64) *watermarkEstimator {
	return newWatermarkEstimator(ms)
}

// WatermarkEstimatorState is the slot's watermark.
func (fn *queueReadFn) WatermarkEstimatorState(e *watermarkEstimator) int64 { return e.stateMs() }

// Setup refuses a read whose Commit.After was not called; the pool is made on first use.
func (fn *queueReadFn) Setup() error {
	fn.idleSince = map[int64]time.Time{}
	return fn.Spec.AfterCheck.err()
}

// ProcessElement emits what the worker's pool received, up to the call's bounds, with the
// token of its receipt handles, and checkpoints.
//
// A record's event time is when the call hands it to the pipeline (receive time, within the
// pool's buffering): later than every event time the slot emitted before, so the watermark,
// advanced to the call's start, never makes a record late, a redelivered one included.
func (fn *queueReadFn) ProcessElement(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, slot int64, emit func(beam.EventTime, QueueRecord), emitToken func(beam.EventTime, queueToken)) (sdf.ProcessContinuation, error) {
	if fn.idleSince == nil {
		if err := fn.Setup(); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	pos := rt.GetRestriction().(offsetrange.Restriction).Start
	if !rt.TryClaim(pos) {
		return sdf.StopProcessing(), rt.GetError()
	}
	p, err := pools.get(ctx, fn.Spec)
	if err != nil {
		return nil, err
	}
	pools.join(fn.Spec, slot)
	defer p.pool.Call()()
	if n := pools.rewind(ctx, p, slot, pos); n > 0 {
		log.Infof(ctx, "%s: slot %d went back to call %d (the runner restored a checkpoint): %d records it emitted since were let go to the queue, to be delivered again", fn.Spec.transform(), slot, pos, n)
	}
	tok := queueToken{Slot: slot, Handles: []string{}, ReceivedMs: []int64{}}
	n := 0
	deadline := start.Add(fn.Spec.MaxCallTime)
	for n < fn.Spec.MaxRecordsPerCall {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		if n > 0 {
			wait = min(wait, callLinger)
		}
		recs, err := p.pool.Take(ctx, fn.Spec.MaxRecordsPerCall-n, wait)
		if err != nil {
			fn.emitToken(emitToken, tok)
			pools.emitted(p, slot, pos, tok.entries())
			fn.report(ctx, p)
			return nil, fmt.Errorf("kinesisio.ReadQueue: %w", err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			et := time.Now()
			for _, qr := range fn.split(r, et) {
				emit(mtime.FromTime(et), qr)
				n++
			}
			tok.Handles = append(tok.Handles, r.Handle)
			tok.ReceivedMs = append(tok.ReceivedMs, r.Received.UnixMilli())
			tok.MaxEventMs = et.UnixMilli()
		}
	}
	fn.emitToken(emitToken, tok)
	pools.emitted(p, slot, pos, tok.entries())
	fn.report(ctx, p)
	we.advanceMs(start.UnixMilli())
	if n > 0 {
		fn.idleSince[slot] = time.Now()
	} else if _, ok := fn.idleSince[slot]; !ok {
		fn.idleSince[slot] = start
	}
	if fn.Spec.StopWhenIdle > 0 && time.Since(fn.idleSince[slot]) >= fn.Spec.StopWhenIdle {
		rt.TryClaim(int64(math.MaxInt64))
		pools.leave(ctx, fn.Spec, slot)
		return sdf.StopProcessing(), nil
	}
	return sdf.ResumeProcessingIn(0), nil
}

// callLinger is how long a call that emitted records waits for more before it ends: the
// receivers' answers come some milliseconds apart, and a call that ended whenever the
// buffer was empty for a moment paid the runner's resume (on Flink about 120 ms, a
// bundle's time) every few hundred records (bench row 17: 0.30× of the SDK's loop at
// parallelism 1, 0.93× with the linger and 10,000 records a call). A record waits at
// most MaxCallTime in its call either way.
const callLinger = 20 * time.Millisecond

func (fn *queueReadFn) emitToken(emit func(beam.EventTime, queueToken), tok queueToken) {
	if len(tok.Handles) > 0 {
		emit(mtime.FromMilliseconds(tok.MaxEventMs), tok)
	}
}

// split is the QueueRecords of one delivery: the user records of a KPL aggregate, or the
// record as it is.
func (fn *queueReadFn) split(r queue.Record, et time.Time) []QueueRecord {
	base := QueueRecord{
		QueueARN: fn.Spec.QueueARN, RecordID: r.RecordID, PartitionKey: r.PartitionKey, Data: orEmpty(r.Data),
		ApproximateArrivalTimestamp: r.Arrival, ReceiveTimestamp: r.Received,
		ReceiveCount: int64(r.ReceiveCount), DeadLetter: fn.Spec.DeadLetter,
	}
	if !fn.Spec.Deaggregate {
		return []QueueRecord{base}
	}
	users, agg, err := kpl.Deaggregate(r.Data)
	if !agg || err != nil {
		// Not an aggregate, or one that cannot be split: passed through whole (KCL's rule).
		return []QueueRecord{base}
	}
	out := make([]QueueRecord, len(users))
	for i, u := range users {
		q := base
		q.PartitionKey, q.ExplicitHashKey, q.Data = u.PartitionKey, u.ExplicitHashKey, orEmpty(u.Data)
		q.Aggregated, q.SubIndex = true, int64(i)
		out[i] = q
	}
	return out
}

// report adds what the pool did since the last report to the metrics.
func (fn *queueReadFn) report(ctx context.Context, p *pooled) {
	reportQueue(ctx, p.pool.TakeStats())
	queueInFlight.Set(ctx, int64(p.pool.Holder().Len()))
}

// slotTracker is an offset-range tracker that refuses splits other than checkpoints: a
// split slot would be a second reader of the same queue, which the Slots option decides.
type slotTracker struct {
	*offsetrange.Tracker
}

// TrySplit checkpoints (fraction 0) and refuses every other split.
func (t *slotTracker) TrySplit(fraction float64) (any, any, error) {
	if fraction > 0 {
		return t.GetRestriction(), nil, nil
	}
	return t.Tracker.TrySplit(fraction)
}

// IsBounded is false: a slot reads until the job ends.
func (t *slotTracker) IsBounded() bool { return false }

// queueAckFn acknowledges the records of the tokens it is given, once per bundle: it runs
// behind a Reshuffle, so after the runner committed the bundles that emitted them. For a
// dead-letter read it discards them, or restores them with Restore.
type queueAckFn struct {
	Spec queueSpec

	pending []queue.Entry
}

// ProcessElement adds tok's handles to the bundle's. It emits nothing: the output only
// keeps Prism from polling the step (ackStep).
func (fn *queueAckFn) ProcessElement(_ context.Context, tok queueToken, _ func(int64)) error {
	fn.pending = append(fn.pending, tok.entries()...)
	return nil
}

// FinishBundle settles the bundle's records. A handle that no longer works is counted (its
// record comes back, and the pipeline sees it again); a queue that cannot be called fails
// the bundle, which the runner retries.
func (fn *queueAckFn) FinishBundle(ctx context.Context, _ func(int64)) error {
	entries := fn.pending
	fn.pending = nil
	return settleQueue(ctx, fn.Spec, entries)
}

// ackStep applies the acknowledge step fn to tokens, which crossed a fusion break, and gives
// it an output, to which fn emits nothing, consumed behind another: Prism busy-polls a
// stage that has neither an output nor a timer for as long as each of its bundles runs
// (stage.Execute selects on a data channel closed from the start), and this step's bundles
// wait on settle calls. Polled, it took most of a core from the receivers and the read
// (bench row 16). Other runners pay nothing for the empty PCollection.
func ackStep(s beam.Scope, fn any, tokens beam.PCollection) {
	beam.ParDo0(s, discardAckOutput, beam.Reshuffle(s, beam.ParDo(s, fn, tokens)))
}

// discardAckOutput consumes the acknowledge step's empty output.
func discardAckOutput(int64) {}

// settleQueue acknowledges entries (discards or restores them, for a dead-letter read) and
// reports what it did: the acknowledgements are counted by the step that made them, exactly
// once, and never by the receiver slots that share the worker's Settler.
func settleQueue(ctx context.Context, spec queueSpec, entries []queue.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	settler, holder, err := pools.settlerFor(ctx, spec)
	if err != nil {
		return err
	}
	handles := make([]string, len(entries))
	for i, e := range entries {
		handles[i] = e.Handle
	}
	var done queue.Settled
	if spec.DeadLetter && spec.Restore {
		done, err = settler.Restore(ctx, entries)
	} else {
		done, err = settler.Ack(ctx, entries)
	}
	reportQueue(ctx, done.Stats)
	if err != nil {
		return fmt.Errorf("%s: settling %d records: %w", spec.transform(), len(entries), err)
	}
	holder.Drop(handles)
	if len(done.Lost) > 0 {
		log.Debugf(ctx, "%s: %d of %d handles could not be settled; their records will be delivered again", spec.transform(), len(done.Lost), len(entries))
	}
	return nil
}

// transform names the read, for errors and logs.
func (s queueSpec) transform() string {
	if s.DeadLetter {
		return targetQueueDeadLetters.String()
	}
	return targetQueue.String()
}
