package kinesisio

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
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
	// caughtUp reports whether the last event processed left the reader caught up.
	caughtUp bool
	// pending is the rest of an event the last call stopped inside when its record budget
	// ran out; the call that continues the subscription emits it first. received is when
	// it arrived.
	pending         *types.SubscribeToShardEvent
	pendingReceived time.Time
	// drain, when the read reads ahead, holds the events read while the subscription was
	// parked (fetch_efo_drain.go); they come before the stream's.
	drain *drain

	// Set while parked.
	resume startKey
	owner  *shardReader
	idle   *time.Timer
}

// close ends the subscription and releases its connection, dropping what it drained.
func (s *subscription) close() {
	if s.drain != nil {
		s.drain.discard()
	}
	s.cancel()
	s.stream.Close() //nolint:errcheck // Err is read where it matters, before closing
}

// next returns the next event, or nil when the stream has ended (ended), the deadline has
// passed or ctx is done. The time is when the event was received. Drained events come
// first.
func (s *subscription) next(ctx context.Context, deadline <-chan time.Time) (ev *types.SubscribeToShardEvent, received time.Time, ended bool) {
	if s.drain != nil {
		if ev, received, ok := s.drain.pop(); ok {
			return ev, received, false
		}
	}
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
	if s.drain != nil {
		s.drain.halt()
	}
	s.owner, s.idle = nil, nil
	return s
}

// park leaves s open for the call that resumes at resume, closing it after the idle timeout.
// When the read reads ahead, its events are drained meanwhile.
func (c *subscriptionCache) park(s *subscription, resume startKey, owner *shardReader) {
	s.resume, s.owner = resume, owner
	if n := owner.spec.ReadAheadBytes; n > 0 {
		startDrain(s, owner.spec.ReadID, n)
	}
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
