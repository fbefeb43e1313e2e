package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
)

// The read loop: one ProcessElement call of a shard reader, for polling and enhanced fan-out
// alike. A fetcher (fetch_poll.go, fetch_efo.go) brings the shard's records in batches; the
// loop claims and emits them, keeps the backlog estimate and the watermark, notices the end
// of the shard and of the read, and checkpoints after a bounded amount of work, leaving what
// the fetcher holds (an iterator, a subscription) for the call that resumes there.

// fetcher gets one shard's records for one ProcessElement call of a shard reader.
type fetcher interface {
	// next returns the next batch. On its first call it opens the shard at the call's
	// start, or continues what an earlier call on this worker left there.
	next(ctx context.Context) (fetched, error)
	// consumed moves past b, whose records were all emitted.
	consumed(b fetched)
	// stopInside says the call stops inside b: its records from index n on are unread.
	stopInside(b fetched, n int)
	// tipWait is how long the reader waits before it reads again at the tip of the shard,
	// after b found it caught up.
	tipWait(b fetched) time.Duration
	// park leaves what the fetcher holds for the call that resumes at start.
	park(start startKey)
	// close releases what the fetcher holds and did not park.
	close()
}

// fetched is what a fetcher got: a GetRecords page, a SubscribeToShard event, or word that
// there is nothing to read for now. A fetcher says what it read and what it knows about the
// tip of the shard; the loop owns the call's position (readState) and moves it.
type fetched struct {
	records []types.Record
	// reopened says the fetcher opened the shard anew for this batch (a new iterator or
	// subscription): the records up to skip (none when nil) were claimed before it and are
	// skipped, in this batch and the next, until one after skip comes.
	reopened bool
	skip     *recordPosition
	// counted says the records were added to the shard's byte rate before: the rest of an
	// event an earlier call stopped inside.
	counted bool
	// held is the data of the records fetched ahead after the batch (read_ahead.go), part of
	// the backlog.
	held int64
	// at is when the batch was asked for or received: the processing time the watermark
	// policies see.
	at time.Time
	// tip is what the batch says about the tip of the shard.
	tip tip
	// shardEnd says the batch is the last of a closed shard; gone that the shard no longer
	// exists (resourceGone decided so and said why).
	shardEnd, gone bool
	// pause says there is nothing to read before resumeIn has passed: a bounded read waits,
	// an unbounded one checkpoints and asks to be resumed then.
	pause    bool
	resumeIn time.Duration
}

// tip is what a batch says about the tip of the shard.
type tip struct {
	// millisBehind is the MillisBehindLatest the service reported; lagMs how far behind the
	// tip the reader is after the batch, in milliseconds of arrival time, for the backlog.
	millisBehind *int64
	lagMs        *int64
	// caughtUp says the batch found the reader at the tip: every record that arrived before
	// caughtUpAt has been delivered.
	caughtUp   bool
	caughtUpAt time.Time
}

// pauseFor is a batch that says to read again after d.
func pauseFor(d time.Duration) fetched { return fetched{pause: true, resumeIn: d} }

// readState is what one ProcessElement call of a shard reader knows beyond its
// restriction. The loop writes it; fetchers only read it.
type readState struct {
	d shardDescriptor
	// streamName is the stream's name, also when the read was given its ARN.
	streamName string
	hr         hashRange
	// rest is the call's restriction.
	rest shardRestriction
	// bounded says the call reads until its restriction is done (ReadBounded).
	bounded bool
	// callStart is when the call began.
	callStart time.Time
	skip      *recordPosition // records up to here were claimed before this restriction
	lastClaim *recordClaim    // the last record claimed in this call
	emitted   int64
	// limit, when positive, is how many user records this call emits before it checkpoints
	// (WithMaxRecordsPerFetch, for the unbounded reader); the checkpoint may fall inside an
	// aggregate.
	limit int64
}

// newReadState is the state of a call that reads d from rest.
func (r *shardReader) newReadState(d shardDescriptor, rest shardRestriction, bounded bool) *readState {
	st := &readState{d: d, streamName: streamarn.Name(d.Stream), hr: d.hashRange(), rest: rest,
		skip: rest.skipThrough(), bounded: bounded, callStart: time.Now()}
	if !bounded {
		st.limit = r.spec.MaxRecordsPerFetch
	}
	return st
}

// spent says the call has emitted as many records as it may.
func (st *readState) spent() bool { return st.limit > 0 && st.emitted >= st.limit }

// timeUp says an unbounded call has worked for as long as it may (WithMaxFetchTime).
func (st *readState) timeUp(max time.Duration) bool {
	return !st.bounded && time.Since(st.callStart) >= max
}

// process reads the shard d from the restriction in rt, emitting each user record after
// claiming it. An unbounded reader (we != nil) returns after a bounded amount of work or when
// caught up, asking to be resumed; a bounded one loops until its restriction is done.
//
// An unbounded reader rides out Kinesis being unreachable: a call whose retries
// (WithRetries) ran out on throttling, 5xx or a connection error returns to the runner at
// its last claimed position and is resumed later, with a warning and the unavailable
// counter, instead of failing the bundle (on Prism that would end the job). Other errors,
// and every error of a bounded read, fail the call.
func (r *shardReader) process(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, d shardDescriptor, emit func(beam.EventTime, Record)) (sdf.ProcessContinuation, error) {
	cont, err := r.processOnce(ctx, we, rt, d, emit)
	var final noRideOut
	if err == nil || we == nil || backoff.Classify(err) == backoff.Fatal || errors.As(err, &final) || rt.GetError() != nil {
		return cont, err
	}
	wait := r.retry.Max
	readUnavailable.Inc(ctx, 1)
	calls.notBefore(readsOf(r.shardKey(d)), time.Now().Add(wait))
	log.Warnf(ctx, "%v; Kinesis did not answer within the %d retries of WithRetries: reading %v again from its last position in %v", err, r.retry.Retries, d, wait)
	return sdf.ResumeProcessingIn(wait), nil
}

// noRideOut is an error the unbounded reader fails on even when its text reads as a
// transient one (the SDK classifies any error that mentions "connection reset" as
// retryable): subscriptions that keep ending before their first event.
type noRideOut struct{ error }

func (e noRideOut) Unwrap() error { return e.error }

// processOnce is process without riding out an unreachable Kinesis: the read loop.
func (r *shardReader) processOnce(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, d shardDescriptor, emit func(beam.EventTime, Record)) (sdf.ProcessContinuation, error) {
	key := r.shardKey(d)
	defer func() { r.report(ctx, key.read) }()
	bounded := we == nil
	rest := rt.GetRestriction().(shardRestriction)
	if rest.Empty {
		forgetShard(key)
		return sdf.StopProcessing(), nil
	}
	// A call that comes before the shard's next read is due (the runner did not wait as
	// asked) waits, or is resumed later, before it calls Kinesis; pages the read-ahead holds
	// at the call's start are read at once.
	if !readAhead.hasPages(key, rest.start()) {
		if wait := calls.wait(readsOf(key), time.Now()); bounded {
			if err := backoff.Sleep(ctx, wait); err != nil {
				return nil, fmt.Errorf("kinesisio: reading %v: %w", d, err)
			}
		} else if cont, held, err := holdOff(ctx, wait); held || err != nil {
			return cont, err
		}
	}
	st := r.newReadState(d, rest, bounded)
	f, err := r.newFetcher(ctx, st, key)
	if err != nil {
		return nil, err
	}
	defer f.close()

	// checkpoint ends an unbounded call: it leaves what the fetcher holds and the backlog
	// (plus unread, the bytes of records fetched and not emitted) for the call that resumes
	// where this one stopped, and asks to be resumed after wait.
	var backlog float64
	checkpoint := func(wait time.Duration, unread int64) (sdf.ProcessContinuation, error) {
		at := rest.after(st.lastClaim).start()
		f.park(at)
		memos.setBacklog(key, at, backlog+float64(unread), time.Now())
		if c := st.lastClaim; c != nil && !c.Last {
			checkpointsInsideAggregates.Inc(ctx, 1)
		}
		return sdf.ResumeProcessingIn(wait), nil
	}
	for {
		b, err := f.next(ctx)
		switch {
		case err != nil:
			return nil, err
		case b.pause && bounded:
			if err := backoff.Sleep(ctx, b.resumeIn); err != nil {
				return nil, fmt.Errorf("kinesisio: reading %v: %w", d, err)
			}
			continue
		case b.pause:
			return checkpoint(b.resumeIn, 0)
		case b.gone:
			rt.TryClaim(shardEndClaim{})
			forgetShard(key)
			return sdf.StopProcessing(), rt.GetError()
		}
		if b.reopened {
			st.skip = b.skip
		}
		records := b.records
		if b.counted {
			records = nil
		}
		backlog = r.observeBacklog(ctx, rt, key, records, b.tip.lagMs, b.held)

		next, done, err := r.emitRecords(ctx, st, rt, b.records, emit)
		if err != nil || done {
			return sdf.StopProcessing(), err
		}
		if next < len(b.records) {
			// The call's budget ran out inside the batch, perhaps inside an aggregate:
			// checkpoint after the last record emitted.
			f.stopInside(b, next)
			return checkpoint(0, dataBytes(b.records[next:]))
		}
		if b.tip.millisBehind != nil {
			millisBehindLatest.Set(ctx, *b.tip.millisBehind)
		}
		r.policy.afterRead(we, b.at, len(b.records), b.tip.caughtUp)
		if b.shardEnd {
			rt.TryClaim(shardEndClaim{})
			forgetShard(key)
			log.Infof(ctx, "kinesisio: %v is closed and fully read", d)
			return sdf.StopProcessing(), rt.GetError()
		}
		f.consumed(b)
		if b.tip.caughtUp {
			if !rt.TryClaim(caughtUpClaim{AtMs: b.tip.caughtUpAt.Add(-r.spec.PropagationDelay).UnixMilli()}) {
				if err := rt.GetError(); err != nil {
					return nil, err
				}
				forgetShard(key)
				log.Infof(ctx, "kinesisio: %v has been read to the end of the read", d)
				return sdf.StopProcessing(), nil
			}
			if wait := f.tipWait(b); wait > 0 {
				if !bounded {
					return checkpoint(wait, 0)
				}
				if err := backoff.Sleep(ctx, wait); err != nil {
					return nil, fmt.Errorf("kinesisio: reading %v: %w", d, err)
				}
				continue
			}
		}
		if st.spent() || st.timeUp(r.spec.MaxFetchTime) {
			return checkpoint(0, 0)
		}
	}
}

// newFetcher returns the fetcher of the call st: a subscriber with enhanced fan-out, a
// poller otherwise.
func (r *shardReader) newFetcher(ctx context.Context, st *readState, key shardKey) (fetcher, error) {
	if r.spec.enhancedFanOut() {
		return r.newSubscriber(ctx, st)
	}
	return r.newPoller(st, key), nil
}

// forgetShard drops what the worker keeps of a shard (its pacing and its memo) once the
// call found the shard, or its part of the read, done.
func forgetShard(key shardKey) {
	calls.forget(readsOf(key))
	memos.forget(key)
	readAhead.forget(key)
}

// report adds the calls of this reader's client and what the read's read-ahead did in this
// worker since the last report to the metrics.
func (r *shardReader) report(ctx context.Context, read string) {
	s, held := readAhead.takeStats(read)
	if aheadReported != nil {
		aheadReported(read, s)
	}
	reportCalls(ctx, r.api.TakeStats().Add(s.api))
	inc(ctx, readAheadPages, s.pages)
	inc(ctx, readAheadDroppedPages, s.droppedPages)
	inc(ctx, readAheadDroppedBytes, s.droppedBytes)
	inc(ctx, readAheadDroppedCalls, s.droppedCalls)
	inc(ctx, readAheadExpired, s.expired)
	readAheadHeldBytes.Set(ctx, held)
}

// aheadReported, when set, sees every read-ahead report of a call with its read's ID. Only
// tests set it, to observe what the read-ahead did beside the metrics.
var aheadReported func(read string, s aheadStats)

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
