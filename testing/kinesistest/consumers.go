package kinesistest

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Stream consumers for enhanced fan-out, and the bookkeeping of their
// SubscribeToShard subscriptions.
//
// Locking: Server.consumerMu guards every stream's consumers map, each
// consumer's fields and the server's set of open subscriptions. It is taken
// before Server.mu and stream locks, never while holding them.

// Consumer statuses as the service spells them.
const (
	consumerCreating = "CREATING"
	consumerActive   = "ACTIVE"
	consumerDeleting = "DELETING"
)

// Quotas and timings of enhanced fan-out.
const (
	maxConsumersPerStream = 20
	maxConsumersAdvantage = 50 // On-demand Advantage streams (account.go)
	maxConsumersCreating  = 5  // per account, at any one time
	// defaultResubscribeWindow is how long after a successful SubscribeToShard
	// the same consumer's next call for the same shard is refused.
	defaultResubscribeWindow = 5 * time.Second
	defaultSubLifetime       = 5 * time.Minute
	defaultSubHeartbeat      = time.Second // not documented by the service
	consumerReadBytesPerSec  = 2 << 20     // per consumer per shard
)

var (
	consumerNamePattern = streamNamePattern
	// consumerARNPattern is the model's pattern with the stream name, consumer
	// name and creation time captured.
	consumerARNPattern = regexp.MustCompile(`^arn:aws.*:kinesis:.*:\d{12}:.*stream/([a-zA-Z0-9_.-]+)/consumer/([a-zA-Z0-9_.-]+):([0-9]+)$`)
)

// consumer is one registered stream consumer.
type consumer struct {
	name      string
	stream    *stream
	createdMs int64
	activeMs  int64 // CREATING until then, on the server clock
	deleting  bool
	deletedMs int64 // when DeregisterStreamConsumer was called, if deleting
	shards    map[string]*consumerShard
}

// consumerShard is what a consumer remembers about one shard across its
// subscriptions.
type consumerShard struct {
	// lastSubMs is when the last successful SubscribeToShard started, on the
	// server clock; hasSub says whether there was one.
	lastSubMs int64
	hasSub    bool
	active    *subscription
	// pacer spends the consumer's 2 MiB/s of this shard in limits mode. It
	// outlives subscriptions so that resubscribing does not refill it.
	pacer *pacer
}

// subscription is one open SubscribeToShard stream.
type subscription struct {
	consumer *consumer
	shard    string
	arn      string // the ConsumerARN the client subscribed with
	startMs  int64  // server clock
	pacer    *pacer

	stopOnce sync.Once
	stop     chan struct{} // closed to end the subscription
	reason   *apiError     // the exception to send on stop; nil ends cleanly
}

// end asks the subscription to finish, with reason as its last frame (nil:
// end the body normally). The first call wins.
func (sub *subscription) end(reason *apiError) {
	sub.stopOnce.Do(func() {
		sub.reason = reason
		close(sub.stop)
	})
}

// statusLocked is the consumer's status at nowMs.
func (c *consumer) statusLocked(nowMs int64) string {
	switch {
	case c.deleting:
		return consumerDeleting
	case nowMs < c.activeMs:
		return consumerCreating
	}
	return consumerActive
}

// goneLocked reports whether a deregistered consumer has finished deleting.
func (c *consumer) goneLocked(nowMs int64, delay time.Duration) bool {
	return c.deleting && nowMs >= c.deletedMs+delay.Milliseconds()
}

// arn is the consumer's ARN: the stream's, then /consumer/<name>:<creation
// time in epoch seconds>, so a consumer registered again under the same name
// (at a later second) gets a new ARN.
func (c *consumer) arn(region string) string {
	return streamARN(region, c.stream.name) + "/consumer/" + c.name + ":" + strconv.FormatInt(c.createdMs/1000, 10)
}

// shardLocked returns the consumer's state for shardID, creating it.
func (c *consumer) shardLocked(shardID string) *consumerShard {
	cs := c.shards[shardID]
	if cs == nil {
		cs = &consumerShard{pacer: &pacer{b: bucket{rate: consumerReadBytesPerSec}}}
		c.shards[shardID] = cs
	}
	return cs
}

// endSubscriptionsLocked ends every open subscription of c with reason.
func (c *consumer) endSubscriptionsLocked(reason *apiError) {
	for _, cs := range c.shards {
		if cs.active != nil {
			cs.active.end(reason)
		}
	}
}

// liveConsumersLocked returns st's consumers that are not gone, forgetting
// those that are. Caller holds consumerMu.
func (s *Server) liveConsumersLocked(st *stream, nowMs int64) []*consumer {
	out := make([]*consumer, 0, len(st.consumers))
	for name, c := range st.consumers {
		if c.goneLocked(nowMs, s.consumerDelay) {
			delete(st.consumers, name)
			continue
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].createdMs != out[j].createdMs {
			return out[i].createdMs < out[j].createdMs
		}
		return out[i].name < out[j].name
	})
	return out
}

// consumerLocked returns st's consumer name unless there is none or it is
// gone. Caller holds consumerMu.
func (s *Server) consumerLocked(st *stream, name string, nowMs int64) *consumer {
	c := st.consumers[name]
	if c != nil && c.goneLocked(nowMs, s.consumerDelay) {
		delete(st.consumers, name)
		return nil
	}
	return c
}

// parseConsumerARN splits a consumer ARN into stream name, consumer name and
// creation time in epoch seconds.
func parseConsumerARN(arn string) (streamName, consumerName string, epoch int64, ok bool) {
	m := consumerARNPattern.FindStringSubmatch(arn)
	if m == nil || len(m[1]) > 128 || len(m[2]) > 128 {
		return "", "", 0, false
	}
	epoch, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil {
		return "", "", 0, false
	}
	return m[1], m[2], epoch, true
}

// consumerByARNLocked finds the consumer an ARN names. Caller holds
// consumerMu.
func (s *Server) consumerByARNLocked(arn string, nowMs int64) (*consumer, error) {
	streamName, name, epoch, ok := parseConsumerARN(arn)
	if !ok {
		return nil, errorf(codeInvalidArgument, "Invalid ConsumerARN %s.", arn)
	}
	s.mu.RLock()
	st := s.streams[streamName]
	s.mu.RUnlock()
	if st == nil {
		return nil, errConsumerNotFound(arn)
	}
	c := s.consumerLocked(st, name, nowMs)
	if c == nil || c.createdMs/1000 != epoch {
		return nil, errConsumerNotFound(arn)
	}
	return c, nil
}

// streamLive reports whether st has not been deleted.
func (s *Server) streamLive(st *stream) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.streams[st.name] == st
}

func errConsumerNotFound(ref string) error {
	return errorf(codeResourceNotFound, "Consumer %s under account %s not found.", ref, AccountID)
}

// subscriptionsChangedLocked wakes everyone waiting in WaitSubscriptions.
func (s *Server) subscriptionsChangedLocked() {
	if s.subsChanged != nil {
		close(s.subsChanged)
		s.subsChanged = nil
	}
}

// Consumer is a registered stream consumer as the server holds it.
type Consumer struct {
	Name         string
	ARN          string // as a client in region us-east-1 sees it
	Status       string // CREATING, ACTIVE or DELETING
	CreationTime time.Time
}

// Subscription is an open SubscribeToShard stream.
type Subscription struct {
	Stream      string
	ConsumerARN string // as the client sent it
	ShardID     string
	StartTime   time.Time // on the server clock
}

// RegisterConsumer registers a consumer of stream as RegisterStreamConsumer
// does, but ACTIVE at once whatever WithConsumerActivationDelay says, and
// returns its ARN.
func (s *Server) RegisterConsumer(stream, name string) (string, error) {
	st, err := s.directStream(stream)
	if err == nil {
		var c *consumer
		c, err = s.addConsumer(st, name, s.clock.Now().UnixMilli(), true)
		if err == nil {
			return c.arn(Region), nil
		}
	}
	return "", fmt.Errorf("kinesistest: registering consumer %q of stream %q: %w", name, stream, err)
}

// Consumers returns the consumers of stream, oldest first, as
// DescribeStreamConsumer would describe them now.
func (s *Server) Consumers(stream string) ([]Consumer, error) {
	st, err := s.directStream(stream)
	if err != nil {
		return nil, err
	}
	nowMs := s.clock.Now().UnixMilli()
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	var out []Consumer
	for _, c := range s.liveConsumersLocked(st, nowMs) {
		out = append(out, Consumer{
			Name:         c.name,
			ARN:          c.arn(Region),
			Status:       c.statusLocked(nowMs),
			CreationTime: time.UnixMilli(c.createdMs),
		})
	}
	return out, nil
}

// Subscriptions returns the SubscribeToShard streams open now, by stream,
// consumer ARN and shard.
func (s *Server) Subscriptions() []Subscription {
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	return s.subscriptionsLocked()
}

func (s *Server) subscriptionsLocked() []Subscription {
	out := make([]Subscription, 0, len(s.subs))
	for sub := range s.subs {
		out = append(out, Subscription{
			Stream:      sub.consumer.stream.name,
			ConsumerARN: sub.arn,
			ShardID:     sub.shard,
			StartTime:   time.UnixMilli(sub.startMs),
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Stream != b.Stream {
			return a.Stream < b.Stream
		}
		if a.ConsumerARN != b.ConsumerARN {
			return a.ConsumerARN < b.ConsumerARN
		}
		return a.ShardID < b.ShardID
	})
	return out
}

// WaitSubscriptions blocks until cond, given the open subscriptions (as
// Subscriptions lists them), returns true, or ctx is done. cond is called
// again whenever a subscription opens or ends. Use it to know that a reader
// has subscribed before putting records it must see from LATEST, or that a
// subscription the client abandoned has ended on the server.
func (s *Server) WaitSubscriptions(ctx context.Context, cond func([]Subscription) bool) error {
	for {
		s.consumerMu.Lock()
		subs := s.subscriptionsLocked()
		if s.subsChanged == nil {
			s.subsChanged = make(chan struct{})
		}
		changed := s.subsChanged
		s.consumerMu.Unlock()
		if cond(subs) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("kinesistest: waiting for subscriptions (%d open): %w", len(subs), context.Cause(ctx))
		}
	}
}

// addConsumer registers consumer name of st at nowMs; active skips CREATING.
func (s *Server) addConsumer(st *stream, name string, nowMs int64, active bool) (*consumer, error) {
	var v violations
	validateConsumerName(name, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	if !s.streamLive(st) {
		return nil, errStreamNotFound(st.name)
	}
	if c := s.consumerLocked(st, name, nowMs); c != nil {
		return nil, errorf(codeResourceInUse, "Consumer %s under stream %s for account %s already exists.", name, st.name, AccountID)
	}
	// Queues take registered-consumer slots too (queue.go).
	s.queues.mu.Lock()
	queues := s.queues.countOnLocked(st, nowMs)
	s.queues.mu.Unlock()
	if n := len(s.liveConsumersLocked(st, nowMs)) + queues; n >= s.consumerLimit(st, nowMs) {
		return nil, errorf(codeLimitExceeded, "Stream %s under account %s already has %d consumers, the maximum.", st.name, AccountID, n)
	}
	activeMs := nowMs
	if !active {
		if s.creatingConsumersLocked(nowMs) >= maxConsumersCreating {
			return nil, errorf(codeLimitExceeded, "Account %s already has %d consumers in CREATING status, the maximum.", AccountID, maxConsumersCreating)
		}
		activeMs += s.consumerDelay.Milliseconds()
	}
	c := &consumer{name: name, stream: st, createdMs: nowMs, activeMs: activeMs, shards: make(map[string]*consumerShard)}
	if st.consumers == nil {
		st.consumers = make(map[string]*consumer)
	}
	st.consumers[name] = c
	return c, nil
}

// creatingConsumersLocked counts the account's consumers in CREATING.
func (s *Server) creatingConsumersLocked(nowMs int64) int {
	s.mu.RLock()
	streams := make([]*stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.RUnlock()
	n := 0
	for _, st := range streams {
		for _, c := range st.consumers {
			if c.statusLocked(nowMs) == consumerCreating {
				n++
			}
		}
	}
	return n
}

// removeConsumerLocked starts deregistering c and ends its subscriptions.
func (s *Server) removeConsumerLocked(c *consumer, nowMs int64, why string) {
	c.deleting = true
	c.deletedMs = nowMs
	c.endSubscriptionsLocked(errorf(codeResourceNotFound, "%s", why))
	if c.goneLocked(nowMs, s.consumerDelay) {
		delete(c.stream.consumers, c.name)
	}
}

// dropStreamConsumers deregisters every consumer of a deleted stream.
func (s *Server) dropStreamConsumers(st *stream, nowMs int64) {
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	for _, c := range st.consumers {
		s.removeConsumerLocked(c, nowMs, fmt.Sprintf("Stream %s under account %s was deleted.", st.name, AccountID))
	}
	clear(st.consumers)
}

// consumerCount is what DescribeStreamSummary reports as ConsumerCount.
func (s *Server) consumerCount(st *stream, nowMs int64) int {
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	return len(s.liveConsumersLocked(st, nowMs))
}

func validateConsumerName(name string, v *violations) {
	if len(name) < 1 || len(name) > 128 {
		v.add(name, "consumerName", "have length between 1 and 128")
	} else if !consumerNamePattern.MatchString(name) {
		v.add(name, "consumerName", "satisfy regular expression pattern: [a-zA-Z0-9_.-]+")
	}
}

// pacer spends a consumer's read throughput of one shard in real time:
// SubscribeToShard pushes data no faster than 2 MiB/s, so unlike GetRecords'
// limits (on the server clock, answered with throttling errors) it delays
// events, and a test on a ManualClock is not stuck.
type pacer struct {
	mu sync.Mutex
	b  bucket
}

// reserve spends n bytes and returns how long to wait before sending them:
// until the bucket would have held them (or, for more than a second's worth,
// been full). Spending at once, before the wait, makes the next reservation
// queue behind this one.
func (p *pacer) reserve(n int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.b.refill(time.Now().UnixMilli())
	need := min(float64(n), p.b.rate)
	var wait time.Duration
	if p.b.tokens < need {
		wait = time.Duration((need - p.b.tokens) / p.b.rate * float64(time.Second))
	}
	p.b.charge(float64(n))
	return wait
}
