// Package producer sends user records to a Kinesis stream the way the KPL does: routed to
// their predicted shard, packed into per-shard aggregates and PutRecords requests, kept under
// each shard's throughput by a client-side rate limiter, sent over a bounded number of
// concurrent requests, and retried entry by entry. It is the engine behind kinesisio.Write
// and has no Beam imports, so it can be tested against a server directly.
//
// A record's way through, file by file: Put refuses a record the service would refuse (a
// bad key, or one over the stream's size limit: limits.go), waits while the buffer is full,
// and places the record by the shard map in its shard's open aggregate, or alone when it
// is too large for one or aggregation is off (reroute.go). Sealed aggregates and raw records wait in per-shard queues, from which the
// sending loop takes PutRecords requests round robin, as far as the rate limiter allows
// (loop.go). Each request is sent on its own goroutine and settles each of its entries:
// acknowledged, retried after a backoff, routed again, or given up on and returned by
// Failures (send.go). When a newer shard map is adopted (listed every ShardMapRefresh, or
// sooner when a result shows a resharding), the records held for shards it changed are
// routed again (reroute.go).
//
// New makes no calls; the caller reads the stream's settings with DescribeStream first, to
// build Config.Limits from its record size limit and to say whether the stream distributes
// records itself (distribution.go).
package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/ratelimit"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/route"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// Error codes of failures that carry no code of the service's.
const (
	// CodeCanceled is the ErrorCode of records whose request was cancelled by Close.
	CodeCanceled = "Canceled"
	// CodeInvalid is the ErrorCode of records found invalid after Put accepted them: a
	// record without a partition key once its stream no longer distributes records itself.
	// It is kinesisio.ErrorCodeInvalidMessage.
	CodeInvalid = "InvalidMessage"
)

// API is the part of the Kinesis client the producer uses.
type API interface {
	route.Lister
	Describer
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

// Config configures a Producer. Limits must be valid (batch.Limits.Validate).
type Config struct {
	// Stream is the stream name or ARN.
	Stream string
	// Limits bounds aggregates and requests.
	Limits batch.Limits
	// MaxBufferedTime is how long a record may wait for its aggregate or request to fill.
	MaxBufferedTime time.Duration
	// MaxConnections bounds concurrent PutRecords requests.
	MaxConnections int
	// MaxBufferedBytes bounds the memory held by user records accepted and not yet
	// resolved, as counted by memoryCost; Put blocks beyond it.
	MaxBufferedBytes int
	// RateLimitPercent is the share of each shard's write limits the producer allows
	// itself; 0 turns client-side rate limiting off.
	RateLimitPercent int
	// Retry is the policy for whole failed requests (backoff.Do) and for entries the
	// service failed individually.
	Retry backoff.Policy
	// ShardMapRefresh is how often the shard map is listed again.
	ShardMapRefresh time.Duration
	// ShardMapMinGap is the shortest time between listings caused by evidence of
	// resharding.
	ShardMapMinGap time.Duration
	// ServiceDistributed says the stream distributes records itself when the producer
	// starts (StreamSettings; distribution.go).
	ServiceDistributed bool
}

// Failure is a user record the producer gave up on.
type Failure struct {
	// Record is the user record as it was put.
	Record kpl.UserRecord
	// Meta is what the caller passed to Put with it.
	Meta any
	// Reason says what went wrong, for people.
	Reason string
	// ErrorCode is the service's error code (per entry or for the whole request),
	// "RequestError" for a failure without one (a dropped connection), or CodeCanceled.
	ErrorCode string
	// Attempts is how many PutRecords calls carried the record.
	Attempts int
}

// InvalidError is returned by Put for a record the service would refuse.
type InvalidError struct {
	Reason string
	// TooLarge says the record is over the stream's record size limit: unlike a bad key,
	// raising the stream's limit (UpdateMaxRecordSize) can make it valid.
	TooLarge bool
}

// Error returns the reason.
func (e *InvalidError) Error() string { return e.Reason }

// Stats are counts of what a producer did, since the last TakeStats.
type Stats struct {
	UserRecords      int64 // user records acknowledged by the service
	KinesisRecords   int64 // Kinesis records (aggregates or raw) acknowledged
	Bytes            int64 // bytes of acknowledged Kinesis records (partition key + data)
	PutRecordsCalls  int64 // PutRecords calls made, retries included
	ThrottledEntries int64 // entries failed with ProvisionedThroughputExceededException
	Retries          int64 // entry retries plus whole-request retries
	Failures         int64 // user records given up on after sending (Put reports invalid ones)
	WrongShard       int64 // aggregates that landed where some of their records do not belong
	Rerouted         int64 // buffered or retried user records routed again after a resharding
	ShardMapRefresh  int64 // shard maps adopted after the first
	// Unaggregated counts the user records sent as records of their own, although
	// aggregation is on, because the stream distributes records itself.
	Unaggregated int64
	// DistributionSwitches counts the switches of the stream's distribution strategy the
	// producer adopted after it started.
	DistributionSwitches int64
}

type stats struct {
	userRecords, kinesisRecords, bytes, calls, throttled, retries, failures, wrongShard, rerouted, refresh, unaggregated, switches atomic.Int64
}

// Producer writes user records to one stream. Put and Flush are called by one goroutine;
// the sending happens in the background. Close releases it.
type Producer struct {
	cfg     Config
	api     API
	router  *route.Router
	limiter *ratelimit.Limiter
	ctx     context.Context
	cancel  context.CancelFunc
	wake    chan struct{}
	done    chan struct{}
	stats   stats

	mu          sync.Mutex
	cond        *sync.Cond // broadcast when records resolve or the state changes
	m           *route.Map
	aggs        *batch.Aggregates
	queues      map[string][]*batch.Entry // ready entries per predicted shard
	order       []string                  // shards with queued entries, round robin
	queued      int                       // entries in queues
	queuedBytes int                       // their bytes
	next        int                       // round-robin start
	delayed     []*batch.Entry            // entries waiting out a retry backoff
	outstanding int                       // user records accepted and not resolved
	buffered    int                       // their bytes
	inflight    int                       // PutRecords requests running
	flushing    int                       // Flush calls waiting
	failures    []Failure
	aggSizes    []int
	closed      bool
	// auto says the stream distributes records itself; autoChecked is the generation of
	// the shard map it was last read for (distribution.go).
	auto        bool
	autoChecked uint64
}

// New starts a producer. It lists no shards until the first Put.
func New(api API, cfg Config) (*Producer, error) {
	if err := cfg.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("producer limits: %w", err)
	}
	if cfg.MaxConnections < 1 {
		cfg.MaxConnections = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Producer{
		cfg:    cfg,
		api:    api,
		router: route.NewRouter(api, cfg.Stream, cfg.ShardMapRefresh, cfg.ShardMapMinGap, cfg.Retry, nil),
		ctx:    ctx,
		cancel: cancel,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		aggs:   batch.NewAggregates(cfg.Limits),
		queues: make(map[string][]*batch.Entry),
		auto:   cfg.ServiceDistributed,
	}
	if cfg.RateLimitPercent > 0 {
		f := float64(cfg.RateLimitPercent) / 100
		p.limiter = ratelimit.New(ShardRecordsPerSecond*f, ShardBytesPerSecond*f, limiterBurst, nil)
	}
	p.cond = sync.NewCond(&p.mu)
	go p.run()
	return p, nil
}

// Put accepts a user record. It returns an *InvalidError for a record the service would
// refuse (nothing is sent), among them one larger than Limits.MaxRecordBytes, and another
// error only when the shard map cannot be listed or ctx ends. It blocks while the buffered
// bytes are over the limit, except that a record is always accepted when nothing is
// buffered, so that one record larger than the bound cannot block forever.
func (p *Producer) Put(ctx context.Context, rec kpl.UserRecord, meta any) error {
	m, err := p.router.Current(ctx)
	if err != nil {
		return err
	}
	p.checkDistributionFor(ctx, m)
	p.mu.Lock()
	auto := p.auto
	p.mu.Unlock()
	if err := validate(rec, auto); err != nil {
		return &InvalidError{Reason: err.Error()}
	}
	if rec.Data == nil {
		// Empty data is valid, but a nil slice is sent as a missing field, and the
		// service would refuse the whole request for it. (Beam decodes empty bytes as nil.)
		rec.Data = []byte{}
	}
	it := &batch.Item{Record: rec, Meta: meta}
	if size := it.Size(); size > p.cfg.Limits.MaxRecordBytes {
		return &InvalidError{Reason: tooLarge(p.cfg.Stream, rec, p.cfg.Limits.MaxRecordBytes), TooLarge: true}
	}
	h, err := rec.HashKey()
	if err != nil {
		return &InvalidError{Reason: err.Error()}
	}
	it.Hash = h

	p.mu.Lock()
	defer p.mu.Unlock()
	cost := memoryCost(it)
	if p.buffered > 0 && p.buffered+cost > p.cfg.MaxBufferedBytes {
		stop := context.AfterFunc(ctx, p.broadcast)
		defer stop()
		for p.buffered > 0 && p.buffered+cost > p.cfg.MaxBufferedBytes {
			if p.closed {
				return errors.New("producer closed")
			}
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for buffer space: %w", ctx.Err())
			}
			p.cond.Wait()
		}
	}
	if p.closed {
		return errors.New("producer closed")
	}
	p.adopt(m)
	it.Added = time.Now()
	p.outstanding++
	p.buffered += cost
	p.place(it)
	return nil
}

// Flush sends everything accepted so far and waits until every record is acknowledged or
// has failed. It returns ctx's error if ctx ends first.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	stop := context.AfterFunc(ctx, p.broadcast)
	defer stop()
	p.flushing++
	defer func() { p.flushing-- }()
	p.poke()
	for p.outstanding > 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("%d records still unacknowledged: %w", p.outstanding, ctx.Err())
		}
		if p.closed {
			return fmt.Errorf("producer closed with %d records unacknowledged", p.outstanding)
		}
		p.cond.Wait()
	}
	return nil
}

// Failures returns and forgets the records given up on since the last call.
func (p *Producer) Failures() []Failure {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.failures
	p.failures = nil
	return f
}

// AggregateSizes returns and forgets the sizes of the aggregates built since the last call.
func (p *Producer) AggregateSizes() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.aggSizes
	p.aggSizes = nil
	return s
}

// Outstanding returns the number of user records accepted and not yet resolved.
func (p *Producer) Outstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outstanding
}

// TakeStats returns the counts since the last TakeStats and starts them again from zero,
// for the caller to report as metrics: every count is returned once.
func (p *Producer) TakeStats() Stats {
	s := &p.stats
	return Stats{
		UserRecords: s.userRecords.Swap(0), KinesisRecords: s.kinesisRecords.Swap(0), Bytes: s.bytes.Swap(0),
		PutRecordsCalls: s.calls.Swap(0), ThrottledEntries: s.throttled.Swap(0), Retries: s.retries.Swap(0),
		Failures: s.failures.Swap(0), WrongShard: s.wrongShard.Swap(0), Rerouted: s.rerouted.Swap(0), ShardMapRefresh: s.refresh.Swap(0),
		Unaggregated: s.unaggregated.Swap(0), DistributionSwitches: s.switches.Swap(0),
	}
}

// Close stops the producer. Requests in flight are cancelled; records not acknowledged are
// neither reported nor retried (call Flush first).
func (p *Producer) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.cancel()
	<-p.done
}

// broadcast wakes the goroutines waiting in Put and Flush, so they look at their context.
func (p *Producer) broadcast() {
	p.mu.Lock()
	p.cond.Broadcast()
	p.mu.Unlock()
}

// poke wakes the sending loop.
func (p *Producer) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// itemOverhead is the memory a buffered user record costs beyond its key and data: the
// batch.Item, the pointers to it in the shard queue and its entry, the boxed metadata and
// the string and slice headers. Measured with a heap profile of 100-byte messages
// (testing/bench, memory row): counting key and data alone let the heap grow to about four
// times the configured bound.
const itemOverhead = 256

// memoryCost is what a buffered user record counts against MaxBufferedBytes: its key and
// data twice (the message, then its copy encoded inside an aggregate or request) plus the
// fixed overhead.
func memoryCost(it *batch.Item) int { return 2*it.Size() + itemOverhead }
