package kinesisio

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

// Deduplication of the queue read (WithQueueDeduplication). A queue delivers at least once:
// a record comes back when a worker dies holding it, when its visibility runs out, and "on
// rare occasions" after its acknowledgement. Every delivery has the same RecordId, so a
// stateful step keyed by RecordId (and SubIndex, for the user records of a KPL aggregate)
// passes its first delivery and drops the others for a span of event time. The state of a
// key is cleared by an event-time timer at the first delivery's event time plus the span:
// the state is bounded by the records delivered within one span.
//
//	queueReadFn ─▶ key by RecordId/SubIndex ─▶ dedupQueueFn (state, timer) ─▶ QueueRecord

func init() {
	register.Function1x2(keyQueueRecordByID)
	register.DoFn7x1[context.Context, beam.EventTime, state.Provider, timers.Provider, string, QueueRecord, func(QueueRecord), error](&dedupQueueFn{})
	register.Emitter1[QueueRecord]()
}

// dedupQueue keeps the first delivery of each record within span.
func dedupQueue(s beam.Scope, recs beam.PCollection, span time.Duration) beam.PCollection {
	s = s.Scope("dedup")
	return beam.ParDo(s, newDedupQueueFn(span), beam.ParDo(s, keyQueueRecordByID, recs))
}

// keyQueueRecordByID keys a record by its identity: RecordId, and its place in a KPL
// aggregate the queue delivered whole.
func keyQueueRecordByID(r QueueRecord) (string, QueueRecord) {
	return r.RecordID + "/" + strconv.FormatInt(r.SubIndex, 10), r
}

// dedupQueueFn passes the first delivery of a record and drops the ones that follow within
// SpanMs of event time after it.
type dedupQueueFn struct {
	SpanMs int64

	Seen   state.Value[bool]
	Expire timers.EventTime
}

func newDedupQueueFn(span time.Duration) *dedupQueueFn {
	return &dedupQueueFn{
		SpanMs: span.Milliseconds(),
		Seen:   state.MakeValueState[bool]("seen"),
		Expire: timers.InEventTime("expire"),
	}
}

// ProcessElement emits r unless its key was seen, and remembers the key until SpanMs after
// r's event time. The timer holds no watermark (WithNoOutputTimestamp): the span delays no
// window.
func (fn *dedupQueueFn) ProcessElement(ctx context.Context, et beam.EventTime, sp state.Provider, tp timers.Provider, key string, r QueueRecord, emit func(QueueRecord)) error {
	seen, _, err := fn.Seen.Read(sp)
	if err != nil {
		return fmt.Errorf("%s: deduplication of record %s: %w", targetQueue, key, err)
	}
	if seen {
		queueDuplicates.Inc(ctx, 1)
		return nil
	}
	if err := fn.Seen.Write(sp, true); err != nil {
		return fmt.Errorf("%s: deduplication of record %s: %w", targetQueue, key, err)
	}
	fn.Expire.Set(tp, time.UnixMilli(et.Milliseconds()+fn.SpanMs), timers.WithNoOutputTimestamp())
	emit(r)
	return nil
}

// OnTimer forgets the key: a delivery after the span passes again. It emits nothing; Beam
// wants ProcessElement's emitter in its signature.
func (fn *dedupQueueFn) OnTimer(_ context.Context, sp state.Provider, _ timers.Provider, key string, _ timers.Context, _ func(QueueRecord)) error {
	if err := fn.Seen.Clear(sp); err != nil {
		return fmt.Errorf("%s: deduplication of record %s: %w", targetQueue, key, err)
	}
	return nil
}
