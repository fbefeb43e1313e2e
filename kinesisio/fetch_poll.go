package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
)

// poller is the fetcher that polls GetRecords. Its fetches go through the shard's
// read-ahead entry (read_ahead.go): while the loop emits one answer the next is already being
// fetched, so the reader keeps up with a plain GetRecords loop, and with read-ahead the
// shard goes on fetching after the call checkpoints, for the call that resumes at exactly
// its residual's start.
//
// After an answer larger than a shard's read rate allows in a second (large records), the
// service refuses the shard's reads until the rate has paid for it: 5 seconds after a
// 10 MiB answer. The entry waits that long after the answer arrived before it reads again
// instead of meeting the refusals (largeAnswerWait). It counts from the arrival, not from
// the call: the service starts the refusal when it answers, which is later than the call by
// the request's latency.
type poller struct {
	r   *shardReader
	st  *readState
	key shardKey

	// start is where the shard is opened: the call's start, or the trim horizon after data
	// loss (checkStart).
	start  shardRestriction
	opened bool
	// e is the shard's read-ahead entry, held by this call.
	e *aheadEntry
	// reopened and skip are for the next batch (fetched): the iterator was opened anew, and
	// the records up to skip were claimed before it.
	reopened bool
	skip     *recordPosition
	// last is the page returned last; inside the rest of it when the call stopped inside it.
	last   aheadPage
	inside *aheadPage
	parked bool
}

// shardReadBytesPerSecond is a shard's read rate, shared by its polling consumers.
const shardReadBytesPerSecond = 2 << 20

// largeAnswerWait is how long after it was given an answer of size bytes keeps the shard's
// reads refused: the time the shard's read rate takes to pay for it, for answers larger
// than a second of it (smaller ones fit the rate's burst).
func largeAnswerWait(size int64) time.Duration {
	if size <= shardReadBytesPerSecond {
		return 0
	}
	return time.Duration(size * int64(time.Second) / shardReadBytesPerSecond)
}

// answerBytes is what a GetRecords answer counts against the shard's read rate: its
// records' data and partition keys.
func answerBytes(records []types.Record) int64 {
	n := dataBytes(records)
	for i := range records {
		n += int64(len(aws.ToString(records[i].PartitionKey)))
	}
	return n
}

func (r *shardReader) newPoller(st *readState, key shardKey) *poller {
	return &poller{r: r, st: st, key: key, start: st.rest}
}

// fetchResult is one GetRecords call, with its retries: when it was sent and when its
// answer arrived.
type fetchResult struct {
	sent, received time.Time
	out            *kinesis.GetRecordsOutput
	err            error
}

func (p *poller) next(ctx context.Context) (fetched, error) {
	st, spec := p.st, &p.r.spec
	if !p.opened {
		p.opened = true
		if err := p.open(ctx); err != nil {
			return p.r.readError(ctx, st, "", err)
		}
	}
	for {
		pg, pause, err := readAhead.next(ctx, p.e, st.bounded)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, errNoPage) {
				// The read-ahead's open of the iterator, which this call waited for.
				return p.r.readError(ctx, st, "", err)
			}
			return fetched{}, fmt.Errorf("kinesisio: reading %v: %w", st.d, err)
		}
		if pause > 0 {
			p.holdUntil(time.Now().Add(pause))
			return pauseFor(pause), nil
		}
		f := pg.f
		if f.err != nil {
			var expired *types.ExpiredIteratorException
			switch {
			case errors.As(f.err, &expired):
				// Iterators live five minutes; renew from the last claimed record.
				expiredIterators.Inc(ctx, 1)
				log.Debugf(ctx, "kinesisio: iterator of %v expired; renewing it", st.d)
				if err := p.renew(ctx); err != nil {
					return fetched{}, err
				}
				continue
			case backoff.Classify(f.err) == backoff.Throttled:
				log.Warnf(ctx, "kinesisio: %v still throttled after %d retries; waiting %v", st.d, p.r.retry.Retries, p.r.retry.Max)
				readAhead.restart(p.e, pg.it)
				p.holdUntil(time.Now().Add(p.r.retry.Max))
				return pauseFor(p.r.retry.Max), nil
			}
			return p.r.readError(ctx, st, "", fmt.Errorf("kinesisio: reading %v: %w", st.d, f.err))
		}
		out := f.out
		caughtUp := out.MillisBehindLatest != nil && *out.MillisBehindLatest == 0
		// Today's one-page prefetch: the next answer is asked for now unless the call reads
		// at the tip, waits between reads or after a large answer, or ends after this one.
		if out.NextShardIterator != nil && !caughtUp && spec.IdleTimeBetweenReads == 0 && largeAnswerWait(answerBytes(out.Records)) == 0 &&
			(st.bounded || (st.emitted+int64(len(out.Records)) < spec.MaxRecordsPerFetch && !st.timeUp(spec.MaxFetchTime))) {
			readAhead.prefetch(p.e)
		}
		held, newest := readAhead.heldData(p.e)
		lag := out.MillisBehindLatest
		if held > 0 && newest != nil {
			// The answers fetched ahead know more of the tip than this one.
			lag = newest
		}
		p.last = pg
		reopened, skip := p.reopened, p.skip
		p.reopened, p.skip = false, nil
		return fetched{
			records:  out.Records[pg.from:],
			reopened: reopened,
			skip:     skip,
			counted:  pg.counted,
			held:     held,
			at:       f.sent,
			tip:      tip{millisBehind: out.MillisBehindLatest, lagMs: lag, caughtUp: caughtUp, caughtUpAt: f.sent},
			shardEnd: out.NextShardIterator == nil,
		}, nil
	}
}

func (p *poller) consumed(fetched) {}

// stopInside keeps the records of the page from index n on for the call that resumes.
func (p *poller) stopInside(_ fetched, n int) {
	rest := p.last
	rest.from += n
	rest.counted = true
	rest.data = dataBytes(rest.f.out.Records[rest.from:])
	p.inside = &rest
}

// tipWait spreads the reads at the tip of the shard within its read budget: after records,
// read again at once; after an empty answer, wait the poll interval; never more often than
// the caught-up budget allows (worker_state.go).
func (p *poller) tipWait(b fetched) time.Duration {
	calls.tipRead(p.key, b.at)
	due := calls.nextTipRead(p.key)
	if len(b.records) == 0 {
		due = maxTime(due, b.at.Add(p.r.spec.PollInterval))
	}
	wait := time.Until(due)
	if wait > 0 {
		p.holdUntil(due)
	}
	return wait
}

// holdUntil tells the worker's pacer that the shard's next call is not due before t, so
// that the runner does not resume an unbounded read early; a bounded read waits in its
// own call instead.
func (p *poller) holdUntil(t time.Time) {
	if !p.st.bounded {
		calls.notBefore(readsOf(p.key), t)
	}
}

func (p *poller) park(start startKey) {
	if p.e != nil {
		p.parked = true
		readAhead.park(p.e, start, p.inside)
	}
}

func (p *poller) close() {
	if p.e != nil && !p.parked {
		readAhead.drop(p.e)
	}
}

// open continues the iterator the last call on this worker left at exactly the call's
// start, or gets one there, once the start is checked against the trim horizon
// (checkStart).
func (p *poller) open(ctx context.Context) error {
	st := p.st
	if e, ok := readAhead.take(p.key, st.rest.start(), time.Now()); ok {
		p.e = e
		iteratorsReused.Inc(ctx, 1)
		return nil
	}
	if err := p.r.checkStart(ctx, st.d, &p.start); err != nil {
		return err
	}
	it, err := p.r.api.ShardIterator(ctx, st.d, p.start.iteratorInput(st.d))
	if p.start.latestInFuture(err) {
		in := p.start.iteratorInput(st.d)
		in.ShardIteratorType, in.Timestamp = types.ShardIteratorTypeLatest, nil
		it, err = p.r.api.ShardIterator(ctx, st.d, in)
	}
	var invalid *types.InvalidArgumentException
	if _, ok := p.start.sequenceStart(); ok && errors.As(err, &invalid) {
		// Some servers refuse an iterator at a trimmed sequence number.
		if lost, perr := p.r.startTrimmed(ctx, st.d, p.start.StartSeq); perr == nil && lost != "" {
			if err := p.r.onDataLoss(ctx, st.d, &p.start, lost); err != nil {
				return err
			}
			it, err = p.r.api.ShardIterator(ctx, st.d, p.start.iteratorInput(st.d))
		}
	}
	if err != nil {
		return fmt.Errorf("kinesisio: opening %v at %s: %w", st.d, p.start.startString(), err)
	}
	p.e = readAhead.owned(p.key, st.d, p.r, st.rest.start(), it)
	p.reopened, p.skip = true, p.start.skipThrough()
	if st.rest.Claimed == 0 && st.rest.VerifiedMs == 0 {
		log.Infof(ctx, "kinesisio: opened %v at %s", st.d, st.rest.startString())
	} else {
		log.Debugf(ctx, "kinesisio: resumed %v at %s", st.d, st.rest.startString())
	}
	return nil
}

// renew replaces an expired iterator, resuming after the last record claimed in this call
// or, if none was, where the iterator was first opened.
func (p *poller) renew(ctx context.Context) error {
	st := p.st
	from := p.start.after(st.lastClaim)
	it, err := p.r.api.ShardIterator(ctx, st.d, from.iteratorInput(st.d))
	if err != nil {
		return fmt.Errorf("kinesisio: renewing the iterator of %v at %s: %w", st.d, from.startString(), err)
	}
	readAhead.restart(p.e, it)
	p.reopened, p.skip = true, from.skipThrough()
	return nil
}
