package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
)

// Enhanced fan-out metrics, beside the read metrics polling also counts (records, bytes,
// throttles, retries, millis_behind_latest).
var (
	// subscribeCalls counts SubscribeToShard calls, refused ones included.
	subscribeCalls = beam.NewCounter(metricsNamespace, "subscribe_calls")
	// resubscribes counts subscriptions that ended before their shard did and were renewed.
	resubscribes = beam.NewCounter(metricsNamespace, "resubscribes")
	// subscriptionsReused counts ProcessElement calls that continued the subscription a
	// previous call on this worker left open, instead of subscribing.
	subscriptionsReused = beam.NewCounter(metricsNamespace, "subscriptions_reused")
)

const (
	// subscribeInterval is the least time between two SubscribeToShard calls for one shard
	// (the service allows one per second per consumer and shard).
	subscribeInterval = time.Second
	// resubscribeWindow is how long after a successful SubscribeToShard the service refuses
	// another one for the same consumer and shard with ResourceInUseException.
	resubscribeWindow = 5 * time.Second
	// subscriptionIdleTimeout is how long a subscription left open between two
	// ProcessElement calls waits to be continued before it is closed.
	subscriptionIdleTimeout = 30 * time.Second
	// eventDeliveryMargin is how long after the service generates an event the reader
	// assumes it has surely received it. A caught-up event received at t proves that nothing
	// arrived unread before t minus this margin (or before the subscription was opened, which
	// the first event always follows); it decides when a read with an end time has ended.
	eventDeliveryMargin = time.Second
	// idleEventWait is how long an unbounded reader that is caught up waits for the next
	// event before it checkpoints, leaving the subscription open, and idleResumeDelay is
	// when it asks to be resumed. A reader that held its call for the whole
	// WithMaxFetchTime would hold back the other shards a runner puts in the same bundle:
	// Prism processes a bundle's elements one after the other, so with 4 shards in 2
	// bundles each shard was read half the time and its records waited up to a second.
	// Events that arrive while the subscription is parked wait in it for the next call.
	idleEventWait   = 10 * time.Millisecond
	idleResumeDelay = 50 * time.Millisecond
)

// subscription is one open SubscribeToShard event stream of a shard.
type subscription struct {
	shardKey string
	cancel   context.CancelFunc
	stream   *kinesis.SubscribeToShardEventStream
	// opened is when the SubscribeToShard call was sent: every event was generated later.
	opened time.Time
	// cont is the ContinuationSequenceNumber of the last event fully processed.
	cont string
	// events counts the events received.
	events int
	// caughtUp says whether the last event processed left the reader caught up.
	caughtUp bool
	// pending is the rest of an event the last call stopped inside when its record budget
	// ran out; the call that continues the subscription emits it first. received is when
	// it arrived.
	pending         *types.SubscribeToShardEvent
	pendingReceived time.Time

	// Set while parked.
	resume startKey
	owner  *shardReader
	idle   *time.Timer
}

// close ends the subscription and releases its connection.
func (s *subscription) close() {
	s.cancel()
	s.stream.Close() //nolint:errcheck // Err is read where it matters, before closing
}

// next returns the next event, or nil when the stream has ended (ended), the deadline has
// passed or ctx is done. The time is when the event was received.
func (s *subscription) next(ctx context.Context, deadline <-chan time.Time) (ev *types.SubscribeToShardEvent, received time.Time, ended bool) {
	for {
		select {
		case e, ok := <-s.stream.Events():
			if !ok {
				return nil, time.Time{}, true
			}
			if v, ok := e.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent); ok {
				s.events++
				return &v.Value, time.Now(), false
			}
			// An event type this SDK does not know: nothing to read in it.
		case <-deadline:
			return nil, time.Time{}, false
		case <-ctx.Done():
			return nil, time.Time{}, false
		}
	}
}

// subscriptionCache holds, for the whole worker process, the subscriptions that
// ProcessElement calls left open for the next call on the same shard, and when each shard
// was last subscribed (for the per-shard call limits).
type subscriptionCache struct {
	mu       sync.Mutex
	parked   map[string]*subscription
	lastCall map[string]time.Time
	lastOK   map[string]time.Time
	// failures counts, per shard, the subscriptions in a row that ended without delivering
	// an event, across ProcessElement calls (a call that must wait to subscribe again
	// returns to the runner).
	failures map[string]int
}

var subscriptions = &subscriptionCache{
	parked:   map[string]*subscription{},
	lastCall: map[string]time.Time{},
	lastOK:   map[string]time.Time{},
	failures: map[string]int{},
}

// take returns the parked subscription of shardKey if it continues exactly at resume, and
// removes it from the cache. A parked subscription at another position is closed.
func (c *subscriptionCache) take(shardKey string, resume startKey) *subscription {
	c.mu.Lock()
	s := c.parked[shardKey]
	if s == nil {
		c.mu.Unlock()
		return nil
	}
	delete(c.parked, shardKey)
	s.idle.Stop()
	c.mu.Unlock()
	if s.resume != resume {
		s.close()
		return nil
	}
	s.owner, s.idle = nil, nil
	return s
}

// park leaves s open for the call that resumes at resume, closing it after the idle timeout.
func (c *subscriptionCache) park(s *subscription, resume startKey, owner *shardReader) {
	s.resume, s.owner = resume, owner
	c.mu.Lock()
	old := c.parked[s.shardKey]
	c.parked[s.shardKey] = s
	s.idle = time.AfterFunc(subscriptionIdleTimeout, func() { c.expire(s) })
	c.mu.Unlock()
	if old != nil {
		old.idle.Stop()
		old.close()
	}
}

// expire closes s if it is still parked.
func (c *subscriptionCache) expire(s *subscription) {
	c.mu.Lock()
	if c.parked[s.shardKey] != s {
		c.mu.Unlock()
		return
	}
	delete(c.parked, s.shardKey)
	c.mu.Unlock()
	s.close()
}

// closeOwned closes the subscriptions owner parked.
func (c *subscriptionCache) closeOwned(owner *shardReader) {
	c.mu.Lock()
	var mine []*subscription
	for k, s := range c.parked {
		if s.owner == owner {
			delete(c.parked, k)
			s.idle.Stop()
			mine = append(mine, s)
		}
	}
	c.mu.Unlock()
	for _, s := range mine {
		s.close()
	}
}

// ended records that a subscription of shardKey ended, after delivering an event or not,
// and returns how many in a row have ended without one.
func (c *subscriptionCache) ended(shardKey string, delivered bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if delivered {
		delete(c.failures, shardKey)
		return 0
	}
	c.failures[shardKey]++
	return c.failures[shardKey]
}

// callWait is how long to wait before the next SubscribeToShard call for shardKey.
func (c *subscriptionCache) callWait(shardKey string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.lastCall[shardKey]; ok {
		return time.Until(t.Add(subscribeInterval))
	}
	return 0
}

// called records a SubscribeToShard call sent at sent, successful or not. The window of a
// successful call runs from when the service took it, which the time its answer came
// bounds from above.
func (c *subscriptionCache) called(shardKey string, sent time.Time, ok bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastCall[shardKey] = sent
	if ok {
		c.lastOK[shardKey] = now
	}
}

// inUseWait is how long to wait after a ResourceInUseException for shardKey: until the
// service's window after the last successful call ends, or the whole window when this
// process made none (another worker's subscription, or one not yet ACTIVE consumer).
func (c *subscriptionCache) inUseWait(shardKey string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	wait := resubscribeWindow
	if t, ok := c.lastOK[shardKey]; ok {
		wait = time.Until(t.Add(resubscribeWindow))
	}
	return max(wait, subscribeInterval)
}

// efoState is what one enhanced fan-out ProcessElement call knows beyond the restriction.
type efoState struct {
	readState
	shardKey string
	arn      string
	// cont is the continuation of the last event fully processed, in this call or by the
	// call that left the subscription open; resubscriptions start after it.
	cont string
}

// position is where the next subscription starts: after the last continuation number, or
// else at the restriction's start moved past the records claimed in this call.
func (st *efoState) position() (types.StartingPosition, shardRestriction) {
	if st.cont != "" {
		st.skip = nil
		return types.StartingPosition{Type: types.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String(st.cont)}, st.start
	}
	from := st.start.after(st.lastClaim)
	st.skip = from.skipThrough()
	return from.startingPosition(), from
}

// subscribe opens a subscription at st's position. It returns no subscription and a wait
// when the service refuses the call for now (ResourceInUseException: the shard was
// subscribed less than 5 seconds ago, another subscription holds it, or the consumer is not
// ACTIVE yet).
func (r *shardReader) subscribe(ctx context.Context, st *efoState) (*subscription, time.Duration, error) {
	if err := backoff.Sleep(ctx, subscriptions.callWait(st.shardKey)); err != nil {
		return nil, 0, fmt.Errorf("kinesisio: subscribing to %v: %w", st.d, err)
	}
	pos, from := st.position()
	in := &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(st.arn), ShardId: aws.String(st.d.ShardID), StartingPosition: &pos}
	// The stream outlives this call, and may outlive the ProcessElement call if it is left
	// open for the next one: it gets its own context, cancelled with ctx only while the
	// call is being made.
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	out, sent, err := r.api.SubscribeToShard(ctx, sctx, st.d, in)
	subscriptions.called(st.shardKey, sent, err == nil)
	if from.latestInFuture(err) {
		in.StartingPosition = &types.StartingPosition{Type: types.ShardIteratorTypeLatest}
		out, sent, err = r.api.SubscribeToShard(ctx, sctx, st.d, in)
		subscriptions.called(st.shardKey, sent, err == nil)
	}
	stop()
	if err != nil {
		cancel()
		var inUse *types.ResourceInUseException
		if errors.As(err, &inUse) {
			wait := subscriptions.inUseWait(st.shardKey)
			log.Debugf(ctx, "kinesisio: %v cannot be subscribed yet (%v); trying again in %v", st.d, err, wait)
			return nil, wait, nil
		}
		return nil, 0, fmt.Errorf("kinesisio: subscribing to %v at %s with consumer %s: %w", st.d, startingPositionString(pos), st.arn, err)
	}
	log.Debugf(ctx, "kinesisio: subscribed to %v at %s", st.d, startingPositionString(*in.StartingPosition))
	return &subscription{shardKey: st.shardKey, cancel: cancel, stream: out.GetStream(), opened: sent}, 0, nil
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

// shardKey names a shard of a consumer on an endpoint, for the subscription cache.
func (r *shardReader) shardKey(arn string, d shardDescriptor) string {
	return r.spec.Client.Endpoint + "|" + r.spec.Client.Region + "|" + arn + "|" + d.ShardID
}

// closeSubscriptions closes the subscriptions this reader left open.
func (r *shardReader) closeSubscriptions() { subscriptions.closeOwned(r) }

// processEFO is process for enhanced fan-out: it reads the shard d from the restriction in
// rt through SubscribeToShard, emitting each user record after claiming it. An unbounded
// reader (we != nil) returns after a bounded amount of work, or once it is caught up and no
// event follows within idleEventWait, leaving the subscription open for the call that
// resumes where this one stopped; a bounded one reads until its restriction is done.
func (r *shardReader) processEFO(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, d shardDescriptor, emit func(beam.EventTime, Record)) (sdf.ProcessContinuation, error) {
	bounded := we == nil
	rest := rt.GetRestriction().(shardRestriction)
	if rest.Empty {
		return sdf.StopProcessing(), nil
	}
	arn, err := r.consumer(ctx)
	if err != nil {
		return nil, err
	}
	st := &efoState{
		readState: r.newReadState(d, rest, bounded),
		shardKey:  r.shardKey(arn, d),
		arn:       arn,
	}
	var sub *subscription
	if !bounded && !r.spec.NoSubscriptionReuse {
		sub = subscriptions.take(st.shardKey, rest.start())
	}
	if sub != nil {
		subscriptionsReused.Inc(ctx, 1)
		st.cont = sub.cont
	} else {
		if err := r.checkStart(ctx, &st.readState); err != nil {
			return r.readError(ctx, rt, &st.readState, arn, err)
		}
		if rest.Claimed == 0 && rest.VerifiedMs == 0 {
			log.Infof(ctx, "kinesisio: subscribing to %v at %s with consumer %s", d, rest.startString(), arn)
		}
	}
	// A subscription is closed unless it is handed to the next call.
	defer func() {
		if sub != nil {
			sub.close()
		}
	}()

	callStart := time.Now()
	var deadline <-chan time.Time
	if !bounded {
		t := time.NewTimer(r.spec.MaxFetchTime)
		defer t.Stop()
		deadline = t.C
	}
	// The backlog is estimated as for polling (estimateBacklog), from each event's
	// MillisBehindLatest and the byte rate of the events read; checkpoint leaves it, plus
	// the bytes of an event's records not yet emitted, for the residual's RestrictionSize.
	memoKey := r.pacingKey(d)
	var backlog float64
	var pendingBytes int64
	checkpoint := func(in time.Duration) (sdf.ProcessContinuation, error) {
		if !bounded {
			memos.setBacklog(memoKey, rest.after(st.lastClaim).start(), backlog+float64(pendingBytes), time.Now())
		}
		if !r.spec.NoSubscriptionReuse {
			subscriptions.park(sub, rest.after(st.lastClaim).start(), r)
			sub = nil
		}
		return sdf.ResumeProcessingIn(in), nil
	}
	// Without reuse, a checkpoint closes the subscription and the next call must subscribe
	// again (at most once a second): only a parked subscription makes idle checkpoints cheap.
	var idle *time.Timer
	if !bounded && !r.spec.NoSubscriptionReuse {
		idle = time.NewTimer(idleEventWait)
		idle.Stop()
		defer idle.Stop()
	}
	for {
		if sub == nil {
			if w := subscriptions.callWait(st.shardKey); w > 0 && !bounded {
				// The shard was subscribed less than a second ago. Waiting here would hold
				// the bundle's other shards, and the fetch time could pass before the new
				// subscription delivered anything: resume when the call is allowed.
				return sdf.ResumeProcessingIn(w), nil
			}
			var wait time.Duration
			sub, wait, err = r.subscribe(ctx, st)
			if err != nil {
				return r.readError(ctx, rt, &st.readState, arn, err)
			}
			if sub == nil {
				if !bounded {
					return sdf.ResumeProcessingIn(wait), nil
				}
				if err := backoff.Sleep(ctx, wait); err != nil {
					return nil, fmt.Errorf("kinesisio: reading %v: %w", d, err)
				}
				continue
			}
		}
		var ev *types.SubscribeToShardEvent
		var received time.Time
		var ended bool
		wait := deadline
		resumed := sub.pending != nil
		if resumed {
			ev, received, sub.pending = sub.pending, sub.pendingReceived, nil
		} else {
			if idle != nil && sub.caughtUp {
				idle.Reset(idleEventWait)
				wait = idle.C
			}
			ev, received, ended = sub.next(ctx, wait)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("kinesisio: reading %v: %w", d, err)
		}
		if ended {
			// Only the shard's last event (no continuation number) ends a subscription for
			// good; any other end, with an error or none (a dropped connection reads as a
			// clean end), is resubscribed from where the reader stopped.
			serr := sub.stream.Err()
			failures := subscriptions.ended(st.shardKey, sub.events > 0)
			st.cont = sub.cont
			sub.close()
			sub = nil
			if isNotFound(serr) {
				// The shard expired, the consumer was deregistered or the stream deleted.
				cont, err := r.resourceGone(ctx, rt, &st.readState, arn, fmt.Errorf("the subscription to %v ended: %w", d, serr))
				if cont != nil || err != nil {
					return cont, err
				}
			}
			if failures > r.retry.Retries {
				subscriptions.ended(st.shardKey, true) // the retried bundle starts afresh
				return nil, noRideOut{fmt.Errorf("kinesisio: %d subscriptions to %v in a row ended without an event (last error: %v)", failures, d, serr)}
			}
			resubscribes.Inc(ctx, 1)
			if serr != nil {
				readRetries.Inc(ctx, 1)
			}
			log.Debugf(ctx, "kinesisio: the subscription to %v ended (%v); resubscribing", d, serr)
			continue
		}
		if ev == nil {
			if wait != deadline {
				// Caught up and idle.
				return checkpoint(idleResumeDelay)
			}
			// Time to checkpoint, in the middle of waiting for an event.
			return checkpoint(0)
		}

		if resumed {
			// Its records were counted in the byte rate when the whole event arrived; those
			// this call leaves unread again are pendingBytes.
			backlog = r.observeBacklog(ctx, rt, memoKey, nil, eventLagMs(ev, time.Now()))
		} else {
			backlog = r.observeBacklog(ctx, rt, memoKey, ev.Records, eventLagMs(ev, time.Now()))
		}
		pendingBytes = 0
		next, done, err := r.emitRecords(ctx, &st.readState, rt, ev.Records, emit)
		if err != nil || done {
			return sdf.StopProcessing(), err
		}
		if next < len(ev.Records) {
			pendingBytes = dataBytes(ev.Records[next:])
			// The call's budget ran out inside the event, perhaps inside an aggregate: the
			// rest of the event waits with the subscription for the next call, which skips
			// what was emitted. Without reuse, the next subscription starts at the record
			// emitted last (AT_SEQUENCE_NUMBER when it is an aggregate emitted in part).
			rest := *ev
			rest.Records = ev.Records[next:]
			sub.pending, sub.pendingReceived = &rest, received
			return checkpoint(0)
		}
		if ev.MillisBehindLatest != nil {
			millisBehindLatest.Set(ctx, *ev.MillisBehindLatest)
		}
		caughtUp := ev.MillisBehindLatest != nil && *ev.MillisBehindLatest == 0
		r.policy.afterRead(we, received, len(ev.Records), caughtUp)
		if ev.ContinuationSequenceNumber == nil {
			if len(ev.ChildShards) == 0 {
				log.Warnf(ctx, "kinesisio: the last event of %v has no continuation number and no child shards; taking it as the shard's end", d)
			}
			rt.TryClaim(shardEndClaim{})
			memos.forget(memoKey)
			log.Infof(ctx, "kinesisio: %v is closed and fully read", d)
			return sdf.StopProcessing(), rt.GetError()
		}
		sub.cont = aws.ToString(ev.ContinuationSequenceNumber)
		sub.caughtUp = caughtUp
		st.cont = sub.cont
		if caughtUp {
			at := received.Add(-eventDeliveryMargin)
			if sub.opened.After(at) {
				at = sub.opened
			}
			if !rt.TryClaim(caughtUpClaim{AtMs: at.Add(-r.spec.PropagationDelay).UnixMilli()}) {
				if err := rt.GetError(); err != nil {
					return nil, err
				}
				log.Infof(ctx, "kinesisio: %v has been read to the end of the read", d)
				return sdf.StopProcessing(), nil
			}
		}
		if !bounded && (st.spent() || time.Since(callStart) >= r.spec.MaxFetchTime) {
			return checkpoint(0)
		}
	}
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
