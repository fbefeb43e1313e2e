package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
)

const (
	// eventDeliveryMargin is how long after the service generates an event the reader
	// assumes it has surely received it. A caught-up event received at t proves that nothing
	// arrived unread before t minus this margin (or before the subscription was opened, which
	// the first event always follows); it decides when a read with an end time has ended.
	eventDeliveryMargin = time.Second
	// idleEventWait is how long an unbounded reader that is caught up waits for the next
	// event before it checkpoints, leaving the subscription open, and idleResumeDelay is
	// when it asks to be resumed. A reader that held its call for the whole
	// WithMaxFetchTime would hold back the other shards a runner puts in the same bundle,
	// which Prism processes one after the other
	// (TestReadWithEnhancedFanOutKeepsEveryBusyShardSubscribed). Events that arrive while
	// the subscription is parked are drained into memory for the next call (or, without
	// read-ahead, wait in its connection).
	idleEventWait   = 10 * time.Millisecond
	idleResumeDelay = 50 * time.Millisecond
)

// dropSubscriptions makes every call close its subscription when it ends instead of
// leaving it open for the call that resumes it on this worker. Only tests set it.
var dropSubscriptions atomic.Bool

// subscriber is the fetcher that reads a SubscribeToShard event stream (enhanced fan-out).
// An unbounded call that checkpoints leaves its subscription open in the worker's
// subscription cache (fetch_efo_subscriptions.go) for the call that resumes at exactly that position;
// a caught-up call returns to the runner once no event follows within idleEventWait, so
// that it does not hold the other shards of its bundle. While parked, a subscription of a read
// that reads ahead drains its events into memory (fetch_efo_drain.go).
type subscriber struct {
	r   *shardReader
	st  *readState
	arn string
	// shardKey is the shard's key in the subscription cache.
	shardKey string
	// reuse says subscriptions are left open for the next call (not for bounded reads).
	reuse bool
	// start is where the shard is first subscribed: the call's start, or the trim horizon
	// after data loss (checkStart).
	start shardRestriction
	// reopened and skip are for the next batch (fetched): a subscription was opened anew,
	// and the records up to skip were claimed before it.
	reopened bool
	skip     *recordPosition

	started bool
	sub     *subscription
	// cont is the continuation of the last event fully processed, in this call or by the
	// call that left the subscription open; resubscriptions start after it.
	cont string
	// last is the event of the last batch, received when it arrived.
	last     *types.SubscribeToShardEvent
	received time.Time
	// deadline fires when an unbounded call has read for WithMaxFetchTime; idle when a
	// caught-up call has waited idleEventWait for an event.
	deadline      <-chan time.Time
	deadlineTimer *time.Timer
	idle          *time.Timer
}

// newSubscriber resolves the read's stream consumer and returns the call's subscriber.
func (r *shardReader) newSubscriber(ctx context.Context, st *readState) (*subscriber, error) {
	arn, err := r.consumer(ctx)
	if err != nil {
		return nil, err
	}
	s := &subscriber{r: r, st: st, arn: arn, shardKey: r.subscriptionKey(arn, st.d), start: st.rest, reuse: !st.bounded && !dropSubscriptions.Load()}
	if !st.bounded {
		s.deadlineTimer = time.NewTimer(r.spec.MaxFetchTime)
		s.deadline = s.deadlineTimer.C
	}
	if s.reuse {
		// Without reuse a checkpoint closes the subscription and the next call must
		// subscribe again (at most once a second): only a parked subscription makes idle
		// checkpoints cheap.
		s.idle = time.NewTimer(idleEventWait)
		s.idle.Stop()
	}
	return s, nil
}

// subscriptionKey names a shard of a consumer on an endpoint, for the subscription cache.
func (r *shardReader) subscriptionKey(arn string, d shardDescriptor) string {
	return r.spec.Client.Endpoint + "|" + r.spec.Client.Region + "|" + arn + "|" + d.ShardID
}

func (s *subscriber) next(ctx context.Context) (fetched, error) {
	st, r := s.st, s.r
	if !s.started {
		s.started = true
		if s.reuse {
			s.sub = subscriptions.take(s.shardKey, st.rest.start())
		}
		if s.sub != nil {
			subscriptionsReused.Inc(ctx, 1)
			s.cont = s.sub.cont
		} else {
			if err := r.checkStart(ctx, st.d, &s.start); err != nil {
				return r.readError(ctx, st, s.arn, err)
			}
			if st.rest.Claimed == 0 && st.rest.VerifiedMs == 0 {
				log.Infof(ctx, "kinesisio: subscribing to %v at %s with consumer %s", st.d, st.rest.startString(), s.arn)
			}
		}
	}
	for {
		if s.sub == nil {
			if w := subscriptions.callWait(s.shardKey); w > 0 && !st.bounded {
				// The shard was subscribed less than a second ago. Waiting here would hold
				// the bundle's other shards, and the fetch time could pass before the new
				// subscription delivered anything: resume when the call is allowed.
				return pauseFor(w), nil
			}
			sub, wait, err := s.subscribe(ctx)
			if err != nil {
				return r.readError(ctx, st, s.arn, err)
			}
			if sub == nil {
				return pauseFor(wait), nil
			}
			s.sub = sub
		}
		sub := s.sub
		var ev *types.SubscribeToShardEvent
		var received time.Time
		var ended bool
		wait := s.deadline
		counted := sub.pending != nil
		if counted {
			ev, received, sub.pending = sub.pending, sub.pendingReceived, nil
		} else {
			if s.idle != nil && sub.caughtUp {
				s.idle.Reset(idleEventWait)
				wait = s.idle.C
			}
			ev, received, ended = sub.next(ctx, wait)
		}
		if err := ctx.Err(); err != nil {
			return fetched{}, fmt.Errorf("kinesisio: reading %v: %w", st.d, err)
		}
		if ended {
			gone, err := s.ended(ctx)
			if err != nil {
				return fetched{}, err
			}
			if gone {
				return fetched{gone: true}, nil
			}
			continue
		}
		if ev == nil {
			if wait != s.deadline {
				return pauseFor(idleResumeDelay), nil // caught up and idle
			}
			return pauseFor(0), nil // time to checkpoint, while waiting for an event
		}
		caughtUp := ev.MillisBehindLatest != nil && *ev.MillisBehindLatest == 0
		caughtUpAt := received.Add(-eventDeliveryMargin)
		if sub.opened.After(caughtUpAt) {
			caughtUpAt = sub.opened
		}
		s.last, s.received = ev, received
		// The newest event drained after ev, if any, knows more of the tip.
		held, latest := heldOf(sub)
		if latest == nil {
			latest = ev
		}
		b := fetched{
			records:  ev.Records,
			reopened: s.reopened,
			skip:     s.skip,
			counted:  counted,
			at:       received,
			held:     held,
			tip:      tip{millisBehind: ev.MillisBehindLatest, lagMs: eventLagMs(latest, time.Now()), caughtUp: caughtUp, caughtUpAt: caughtUpAt},
			shardEnd: ev.ContinuationSequenceNumber == nil,
		}
		s.reopened, s.skip = false, nil
		if b.shardEnd && len(ev.ChildShards) == 0 {
			log.Warnf(ctx, "kinesisio: the last event of %v has no continuation number and no child shards; taking it as the shard's end", st.d)
		}
		return b, nil
	}
}

// ended closes the subscription that ended. Only the shard's last event (no continuation
// number) ends a subscription for good; any other end, with an error or none (a dropped
// connection reads as a clean end), is resubscribed from where the reader stopped, unless
// the shard no longer exists (gone) or too many subscriptions in a row ended before their
// first event.
func (s *subscriber) ended(ctx context.Context) (gone bool, err error) {
	sub, st := s.sub, s.st
	serr := sub.stream.Err()
	failures := subscriptions.ended(s.shardKey, sub.events > 0)
	s.cont = sub.cont
	sub.close()
	s.sub = nil
	if isNotFound(serr) {
		// The shard expired, the consumer was deregistered or the stream deleted.
		gone, err := s.r.resourceGone(ctx, st, s.arn, fmt.Errorf("the subscription to %v ended: %w", st.d, serr))
		if gone || err != nil {
			return gone, err
		}
	}
	if failures > s.r.retry.Retries {
		subscriptions.ended(s.shardKey, true) // the retried bundle starts afresh
		return false, noRideOut{fmt.Errorf("kinesisio: %d subscriptions to %v in a row ended without an event (last error: %v)", failures, st.d, serr)}
	}
	resubscribes.Inc(ctx, 1)
	if serr != nil {
		readRetries.Inc(ctx, 1)
	}
	log.Debugf(ctx, "kinesisio: the subscription to %v ended (%v); resubscribing", st.d, serr)
	return false, nil
}

func (s *subscriber) consumed(b fetched) {
	s.sub.cont = aws.ToString(s.last.ContinuationSequenceNumber)
	s.sub.caughtUp = b.tip.caughtUp
	s.cont = s.sub.cont
}

// stopInside keeps the rest of the event with the subscription: the call that continues it
// emits that first. Without reuse, the next subscription starts at the record emitted last
// (AT_SEQUENCE_NUMBER when it is an aggregate emitted in part).
func (s *subscriber) stopInside(_ fetched, n int) {
	rest := *s.last
	rest.Records = s.last.Records[n:]
	s.sub.pending, s.sub.pendingReceived = &rest, s.received
}

// tipWait is 0: the subscription waits for the next event itself.
func (s *subscriber) tipWait(fetched) time.Duration { return 0 }

func (s *subscriber) park(start startKey) {
	if s.reuse && s.sub != nil {
		subscriptions.park(s.sub, start, s.r)
		s.sub = nil
	}
}

func (s *subscriber) close() {
	if s.deadlineTimer != nil {
		s.deadlineTimer.Stop()
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	if s.sub != nil {
		s.sub.close()
		s.sub = nil
	}
}

// position is where the next subscription starts: after the last continuation number, or
// else at the call's start moved past the records claimed in this call; skip is the last
// record it returns that was claimed before (nil: none).
func (s *subscriber) position() (from shardRestriction, skip *recordPosition) {
	from = s.start.after(s.st.lastClaim)
	if s.cont != "" {
		from.StartKind, from.StartSeq, from.StartSub, from.StartTimeMs = startAfterSequence, s.cont, 0, 0
		return from, nil
	}
	return from, from.skipThrough()
}

// subscribe opens a subscription at the reader's position. It returns no subscription and a
// wait when the service refuses the call for now (ResourceInUseException: the shard was
// subscribed less than 5 seconds ago, another subscription holds it, or the consumer is not
// ACTIVE yet).
func (s *subscriber) subscribe(ctx context.Context) (*subscription, time.Duration, error) {
	st := s.st
	if err := backoff.Sleep(ctx, subscriptions.callWait(s.shardKey)); err != nil {
		return nil, 0, fmt.Errorf("kinesisio: subscribing to %v: %w", st.d, err)
	}
	from, skip := s.position()
	pos := from.startingPosition()
	in := &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(s.arn), ShardId: aws.String(st.d.ShardID), StartingPosition: &pos}
	// The stream outlives this call, and may outlive the ProcessElement call if it is left
	// open for the next one: it gets its own context, cancelled with ctx only while the
	// call is being made.
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	out, sent, err := s.r.api.SubscribeToShard(ctx, sctx, st.d, in)
	subscriptions.called(s.shardKey, sent, err == nil)
	if from.latestInFuture(err) {
		in.StartingPosition = &types.StartingPosition{Type: types.ShardIteratorTypeLatest}
		out, sent, err = s.r.api.SubscribeToShard(ctx, sctx, st.d, in)
		subscriptions.called(s.shardKey, sent, err == nil)
	}
	stop()
	if err != nil {
		cancel()
		var inUse *types.ResourceInUseException
		if errors.As(err, &inUse) {
			wait := subscriptions.inUseWait(s.shardKey)
			log.Debugf(ctx, "kinesisio: %v cannot be subscribed yet (%v); trying again in %v", st.d, err, wait)
			return nil, wait, nil
		}
		return nil, 0, fmt.Errorf("kinesisio: subscribing to %v at %s with consumer %s: %w", st.d, startingPositionString(pos), s.arn, err)
	}
	log.Debugf(ctx, "kinesisio: subscribed to %v at %s", st.d, startingPositionString(*in.StartingPosition))
	s.reopened, s.skip = true, skip
	return &subscription{shardKey: s.shardKey, cancel: cancel, stream: out.GetStream(), opened: sent}, 0, nil
}

func startingPositionString(p types.StartingPosition) string {
	switch {
	case p.SequenceNumber != nil:
		return string(p.Type) + " " + *p.SequenceNumber
	case p.Timestamp != nil:
		return string(p.Type) + " " + p.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return string(p.Type)
}

// inFlightTolerance is how long after its last record's arrival an event sent caught up may
// be read before the reader takes itself to be behind by the events the service has sent
// and it has not read yet: more than the delivery latency and the clock skew between this
// worker and the service.
const inFlightTolerance = 500 * time.Millisecond

// eventLagMs is how far, in milliseconds of arrival time, the reader is behind the tip of
// the shard once it has read ev at now. An event reports its MillisBehindLatest when the
// service sends it. The service pushes records as they arrive, up to the client's HTTP/2
// stream window, so a reader that falls behind a producer reads events sent long before
// with MillisBehindLatest 0, and the records that arrived since are in the events sent
// after them: for such an event read more than inFlightTolerance after its last record
// arrived, the lag is that record's age on this worker's clock. An event sent while behind
// (MillisBehindLatest > 0) was sent when the reader made room for it, and its
// MillisBehindLatest stands.
func eventLagMs(ev *types.SubscribeToShardEvent, now time.Time) *int64 {
	behind := aws.ToInt64(ev.MillisBehindLatest)
	if n := len(ev.Records); n > 0 && behind == 0 {
		age := now.Sub(aws.ToTime(ev.Records[n-1].ApproximateArrivalTimestamp)).Milliseconds()
		if age > inFlightTolerance.Milliseconds() {
			behind = age
		}
	}
	return &behind
}
