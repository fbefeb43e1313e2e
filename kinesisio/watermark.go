package kinesisio

import (
	"sync"
	"time"
)

// watermarkEstimator is the per-restriction watermark of a shard reader or of discovery. Its
// state is the watermark in Unix milliseconds; it only moves forward. Records move it through
// ObserveTimestamp (the harness calls it with each output's event time) and the reader moves
// it when a shard is idle or, under the processing-time policy, after each successful read.
// Nothing moves it when reads fail. A mutex guards it because the runner asks for the
// watermark from another goroutine when it splits.
//
// A shard reader's estimator shares its watermark with the read's other restrictions in the
// process (watermark_floor.go): CurrentWatermark, what the runner is told, is the lowest of
// them; the state, what the restriction resumes from, stays its own.
type watermarkEstimator struct {
	mu    sync.Mutex
	state int64
	// shared and key are where the estimator reports its watermark, nil if it does not.
	shared *readWatermarks
	key    streamShard
}

func newWatermarkEstimator(ms int64) *watermarkEstimator {
	return &watermarkEstimator{state: ms}
}

// CurrentWatermark returns the watermark: the lowest of the shared watermarks if the
// estimator shares its own.
func (e *watermarkEstimator) CurrentWatermark() time.Time {
	e.mu.Lock()
	ms, shared, key := e.state, e.shared, e.key
	e.mu.Unlock()
	if shared != nil {
		ms = shared.report(key, ms, watermarkMarkTTL, time.Now())
	}
	return time.UnixMilli(ms)
}

// share makes the estimator report its watermark to w as key, and hold its watermark at
// the lowest of w's.
func (e *watermarkEstimator) share(w *readWatermarks, key streamShard) {
	e.mu.Lock()
	e.shared, e.key = w, key
	ms := e.state
	e.mu.Unlock()
	w.report(key, ms, watermarkMarkTTL, time.Now())
}

// unshare withdraws the estimator's watermark: its restriction is done.
func (e *watermarkEstimator) unshare() {
	e.mu.Lock()
	shared, key := e.shared, e.key
	e.shared = nil
	e.mu.Unlock()
	if shared != nil {
		shared.drop(key)
	}
}

// ObserveTimestamp advances the watermark to t if t is later.
func (e *watermarkEstimator) ObserveTimestamp(t time.Time) {
	e.advanceMs(t.UnixMilli())
}

func (e *watermarkEstimator) advanceMs(ms int64) {
	e.mu.Lock()
	if ms > e.state {
		e.state = ms
	}
	e.mu.Unlock()
}

// stateMs returns the watermark in Unix milliseconds.
func (e *watermarkEstimator) stateMs() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

// observeCaughtUp is called after a successful GetRecords that was sent at sent, returned no
// records and reported MillisBehindLatest 0. If the shard has produced nothing for at least
// threshold (its watermark, the latest event time seen, is that old), later records can only
// arrive after sent, so the watermark advances to sent minus threshold.
func (e *watermarkEstimator) observeCaughtUp(sent time.Time, threshold time.Duration) {
	idleSince := sent.Add(-threshold).UnixMilli()
	e.mu.Lock()
	if e.state <= idleSince {
		e.state = idleSince
	}
	e.mu.Unlock()
}

// watermarkPolicy decides event times and the watermark's moves for a shard reader.
type watermarkPolicy struct {
	kind          int64
	fn            EventTimeFn
	idleThreshold time.Duration
}

// eventTime is the event time of r, read at now.
func (p watermarkPolicy) eventTime(r *Record, now time.Time) time.Time {
	switch p.kind {
	case watermarkProcessingTime:
		return now
	case watermarkCustom:
		return p.fn.EventTime(*r)
	}
	return r.ApproximateArrivalTimestamp
}

// afterRead moves the watermark after a successful GetRecords sent at sent.
func (p watermarkPolicy) afterRead(e *watermarkEstimator, sent time.Time, records int, caughtUp bool) {
	if e == nil {
		return
	}
	if p.kind == watermarkProcessingTime {
		e.advanceMs(sent.UnixMilli())
		return
	}
	if records == 0 && caughtUp {
		e.observeCaughtUp(sent, p.idleThreshold)
	}
}
