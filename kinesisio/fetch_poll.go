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

// poller is the fetcher that polls GetRecords. While the loop emits one response, the next
// one is already being fetched, so the reader keeps up with a plain GetRecords loop. A
// call that checkpoints leaves its shard iterator in the worker's memo (worker_state.go)
// for the call that resumes at exactly that position.
//
// After an answer larger than a shard's read rate allows in a second (large records), the
// service refuses the shard's reads until the rate has paid for it: 5 seconds after a
// 10 MiB answer. The poller waits that long after the answer arrived before it reads again
// instead of meeting the refusals (largeAnswerWait). It counts from the arrival, not from
// the call: the service starts the refusal when it answers, which is later than the call by
// the request's latency.
type poller struct {
	r   *shardReader
	st  *readState
	key shardKey

	// start is where the shard is opened: the call's start, or the trim horizon after data
	// loss (checkStart).
	start    shardRestriction
	opened   bool
	iterator string
	// reopened and skip are for the next batch (fetched): the iterator was opened anew, and
	// the records up to skip were claimed before it.
	reopened bool
	skip     *recordPosition
	// ahead is the response being fetched ahead, if any; lastCall is when the last
	// GetRecords was sent.
	ahead       chan fetchResult
	cancelAhead context.CancelFunc
	lastCall    time.Time
	// nextIterator is the NextShardIterator of the last response returned.
	nextIterator *string
	// readyAt is when the shard may be read again after a large answer.
	readyAt time.Time
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
	return &poller{r: r, st: st, key: key, start: st.rest, cancelAhead: func() {}}
}

// fetchResult is one GetRecords call, with its retries: when it was sent and when its
// answer arrived.
type fetchResult struct {
	sent, received time.Time
	out            *kinesis.GetRecordsOutput
	err            error
}

// fetch calls GetRecords with iterator. It is safe to run on another goroutine.
func (p *poller) fetch(ctx context.Context, iterator string) fetchResult {
	f := fetchResult{sent: time.Now()}
	f.out, f.err = p.r.api.GetRecords(ctx, p.st.d, iterator, p.r.spec.MaxRecordsPerRead)
	f.received = time.Now()
	return f
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
		var f fetchResult
		if p.ahead != nil {
			f, p.ahead = <-p.ahead, nil
		} else {
			if wait := time.Until(p.readyAt); wait > 0 {
				p.holdUntil(p.readyAt)
				return pauseFor(wait), nil
			}
			if spec.IdleTimeBetweenReads > 0 && !p.lastCall.IsZero() {
				if err := backoff.Sleep(ctx, time.Until(p.lastCall.Add(spec.IdleTimeBetweenReads))); err != nil {
					return fetched{}, fmt.Errorf("kinesisio: reading %v: %w", st.d, err)
				}
			}
			f = p.fetch(ctx, p.iterator)
		}
		p.lastCall = f.sent
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
				p.holdUntil(time.Now().Add(p.r.retry.Max))
				return pauseFor(p.r.retry.Max), nil
			}
			return p.r.readError(ctx, st, "", fmt.Errorf("kinesisio: reading %v: %w", st.d, f.err))
		}
		out := f.out
		caughtUp := out.MillisBehindLatest != nil && *out.MillisBehindLatest == 0
		large := largeAnswerWait(answerBytes(out.Records))
		p.readyAt = f.received.Add(large)
		if out.NextShardIterator != nil && !caughtUp && spec.IdleTimeBetweenReads == 0 && large == 0 &&
			(st.bounded || (st.emitted+int64(len(out.Records)) < spec.MaxRecordsPerFetch && !st.timeUp(spec.MaxFetchTime))) {
			p.ahead = make(chan fetchResult, 1)
			actx, cancel := context.WithCancel(ctx)
			p.cancelAhead = cancel
			go func(ch chan<- fetchResult, it string) { ch <- p.fetch(actx, it) }(p.ahead, aws.ToString(out.NextShardIterator))
		}
		p.nextIterator = out.NextShardIterator
		reopened, skip := p.reopened, p.skip
		p.reopened, p.skip = false, nil
		return fetched{
			records:  out.Records,
			reopened: reopened,
			skip:     skip,
			at:       f.sent,
			tip:      tip{millisBehind: out.MillisBehindLatest, lagMs: out.MillisBehindLatest, caughtUp: caughtUp, caughtUpAt: f.sent},
			shardEnd: out.NextShardIterator == nil,
		}, nil
	}
}

func (p *poller) consumed(fetched) { p.iterator = aws.ToString(p.nextIterator) }

// stopInside drops the iterator: the response's next iterator is past the records not
// emitted, so the call that resumes opens its own at the checkpoint.
func (p *poller) stopInside(fetched, int) { p.iterator = "" }

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
	if p.iterator != "" {
		memos.parkIterator(p.key, start, p.iterator, time.Now())
	}
}

func (p *poller) close() { p.cancelAhead() }

// open continues the iterator the last call on this worker left at exactly the call's
// start, or gets one there, once the start is checked against the trim horizon
// (checkStart).
func (p *poller) open(ctx context.Context) error {
	st := p.st
	if it, ok := memos.takeIterator(p.key, st.rest.start(), time.Now()); ok {
		p.iterator = it
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
	p.iterator, p.reopened, p.skip = it, true, p.start.skipThrough()
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
	p.iterator, p.reopened, p.skip = it, true, from.skipThrough()
	return nil
}
