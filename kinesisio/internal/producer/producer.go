// Package producer sends user records to a Kinesis stream the way the KPL does: routed to
// their predicted shard, packed into per-shard aggregates and PutRecords requests, kept under
// each shard's throughput by a client-side rate limiter, sent over a bounded number of
// concurrent requests, and retried entry by entry. It is the engine behind kinesisio.Write
// and has no Beam imports, so it can be tested against a server directly.
package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/ratelimit"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/route"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
)

// Per-shard write limits of the service (kinesis-protocol-notes §2.1).
const (
	ShardRecordsPerSecond = 1000
	ShardBytesPerSecond   = 1 << 20
)

// limiterBurst is the burst the rate limiter allows each shard. The service's bucket holds
// one second; ours holds a little less because it is charged when a request leaves and the
// service's when it arrives: the margin absorbs the difference in latency between
// requests (a first request also opens its connection), which would otherwise show up as
// throttled entries at the start of a write and after every pause.
const limiterBurst = 950 * time.Millisecond

// minBatchWait is the shortest wait for rate-limiter tokens: without it a writer held at
// 1000 records/s would send a request per record as each token arrives.
const minBatchWait = 20 * time.Millisecond

// CodeCanceled is the ErrorCode of records whose request was cancelled by Close.
const CodeCanceled = "Canceled"

// API is the part of the Kinesis client the producer uses.
type API interface {
	route.Lister
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

// Stats are cumulative counts since the producer started.
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
}

type stats struct {
	userRecords, kinesisRecords, bytes, calls, throttled, retries, failures, wrongShard, rerouted, refresh atomic.Int64
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
	if err := rec.Validate(); err != nil {
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
	m, err := p.router.Current(ctx)
	if err != nil {
		return err
	}

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

// waitResolved waits until every accepted record is resolved, without hurrying them as
// Flush does: records go out only when their buffers fill or their time is up.
func (p *Producer) waitResolved(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	stop := context.AfterFunc(ctx, p.broadcast)
	defer stop()
	for p.outstanding > 0 {
		if ctx.Err() != nil {
			return ctx.Err()
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

// Stats returns the cumulative counts.
func (p *Producer) Stats() Stats {
	s := &p.stats
	return Stats{
		UserRecords: s.userRecords.Load(), KinesisRecords: s.kinesisRecords.Load(), Bytes: s.bytes.Load(),
		PutRecordsCalls: s.calls.Load(), ThrottledEntries: s.throttled.Load(), Retries: s.retries.Load(),
		Failures: s.failures.Load(), WrongShard: s.wrongShard.Load(), Rerouted: s.rerouted.Load(), ShardMapRefresh: s.refresh.Load(),
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

// adopt switches to map m if it is newer than the one in use, re-routing the records held
// for shards that m no longer has (or whose range changed). p.mu is held.
func (p *Producer) adopt(m *route.Map) {
	if p.m != nil && m.Generation() <= p.m.Generation() {
		return
	}
	first := p.m == nil
	old := p.m
	p.m = m
	if first {
		return
	}
	p.stats.refresh.Add(1)
	gone := func(shard string) bool {
		was, _ := old.Shard(shard)
		now, ok := m.Shard(shard)
		return !ok || now != was
	}
	items := p.aggs.Dissolve(gone)
	for shard, q := range p.queues {
		if !gone(shard) {
			continue
		}
		kept := q[:0]
		for _, e := range q {
			if e.Aggregated() {
				items = append(items, e.Items...)
				p.queued--
				p.queuedBytes -= e.Size()
				continue
			}
			kept = append(kept, e) // a raw record routes itself by its own key
		}
		p.queues[shard] = kept
	}
	p.stats.rerouted.Add(int64(len(items)))
	for _, it := range items {
		p.place(it)
	}
	if p.limiter != nil {
		p.limiter.Forget(func(shard string) bool { _, ok := m.Shard(shard); return ok })
	}
}

// place routes it to its shard's aggregate or queue. p.mu is held.
func (p *Producer) place(it *batch.Item) {
	s, ok := p.m.Lookup(it.Hash)
	if !ok {
		// A gap in a map taken mid-resharding: send the record alone (an aggregate must
		// hold one shard's records) and let the service route it by its own key.
		p.router.Invalidate()
		p.enqueue(batch.Raw("", it))
		return
	}
	opened := !p.aggs.IsOpen(s.ID)
	for _, e := range p.aggs.Add(s.ID, it) {
		p.enqueue(e)
	}
	if opened && p.aggs.IsOpen(s.ID) {
		p.poke() // a new buffering deadline for the loop's timer
	}
}

// enqueue makes e ready to send. p.mu is held.
func (p *Producer) enqueue(e *batch.Entry) {
	if e.Aggregated() && e.Attempts == 0 {
		p.aggSizes = append(p.aggSizes, e.Size())
	}
	q, ok := p.queues[e.Shard]
	if !ok {
		p.order = append(p.order, e.Shard)
	}
	p.queues[e.Shard] = append(q, e)
	p.queued++
	p.queuedBytes += e.Size()
	// The loop needs waking only for a first entry (a new deadline) or when a request can
	// be filled; otherwise its timer already covers what is queued.
	if p.queued == 1 || p.queued >= p.cfg.Limits.MaxRequestEntries || p.queuedBytes >= p.cfg.Limits.MaxRequestBytes {
		p.poke()
	}
}

// run is the sending loop: it seals aggregates that are due, assembles requests from the
// ready entries within the rate limits, and starts them on free connections.
func (p *Producer) run() {
	defer close(p.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		var wait time.Duration
		for {
			req, w := p.assemble(time.Now())
			if req == nil {
				wait = w
				break
			}
			p.inflight++
			go p.send(req)
		}
		p.mu.Unlock()

		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-p.wake:
		case <-timer.C:
		case <-p.ctx.Done():
		}
	}
}

// assemble returns the next request to send now, or nil and how long until one might be
// due (0: nothing pending until woken). p.mu is held.
func (p *Producer) assemble(now time.Time) (*batch.Request, time.Duration) {
	var wait time.Duration
	soonest := func(d time.Duration) {
		if d > 0 && (wait == 0 || d < wait) {
			wait = d
		}
	}
	// Retries whose backoff has passed rejoin their shard's queue (re-routed if the
	// shard is gone).
	kept := p.delayed[:0]
	for _, e := range p.delayed {
		if d := e.NotBefore.Sub(now); d > 0 {
			soonest(d)
			kept = append(kept, e)
			continue
		}
		p.requeue(e)
	}
	clear(p.delayed[len(kept):])
	p.delayed = kept

	// Seal the aggregates that are due.
	flushing := p.flushing > 0
	if flushing {
		for _, e := range p.aggs.SealAll() {
			p.enqueue(e)
		}
	} else {
		for _, e := range p.aggs.SealDue(now.Add(-p.cfg.MaxBufferedTime)) {
			p.enqueue(e)
		}
		if oldest, ok := p.aggs.Oldest(); ok {
			soonest(oldest.Add(p.cfg.MaxBufferedTime).Sub(now) + time.Millisecond)
		}
	}
	if p.inflight >= p.cfg.MaxConnections || len(p.order) == 0 {
		return nil, wait // a finishing request wakes the loop
	}

	// Take entries shard by shard, round robin, as far as the rate limits allow.
	req := &batch.Request{}
	due := flushing
	type taken struct {
		shard          string
		records, bytes int
	}
	var takes []taken
	n := len(p.order)
	for i := 0; i < n && !req.Full(p.cfg.Limits); i++ {
		shard := p.order[(p.next+i)%n]
		q := p.queues[shard]
		j := 0
		for ; j < len(q); j++ {
			e := q[j]
			if !req.Fits(e, p.cfg.Limits) {
				break
			}
			if p.limiter != nil {
				ok, w := p.limiter.TryTake(shard, 1, e.Size())
				if !ok {
					soonest(max(w, minBatchWait))
					break
				}
				takes = append(takes, taken{shard, 1, e.Size()})
			}
			req.Add(e)
			if !e.Oldest.Add(p.cfg.MaxBufferedTime).After(now) {
				due = true
			} else {
				soonest(e.Oldest.Add(p.cfg.MaxBufferedTime).Sub(now))
			}
		}
		for _, e := range q[:j] {
			p.queued--
			p.queuedBytes -= e.Size()
		}
		clear(q[:j]) // let sent entries go even while the queue's array lives on
		p.queues[shard] = q[j:]
	}
	if len(req.Entries) == 0 {
		return nil, wait
	}
	if !due && !req.Full(p.cfg.Limits) && !p.moreQueued(req) {
		// Not worth a call yet: put everything back and wait for more or the deadline.
		p.putBack(req)
		if p.limiter != nil {
			for _, t := range takes {
				p.limiter.Give(t.shard, t.records, t.bytes)
			}
		}
		return nil, wait
	}
	p.compact()
	return req, 0
}

// moreQueued reports whether entries are still queued that did not fit in req (so req is
// as full as it gets). p.mu is held.
func (p *Producer) moreQueued(req *batch.Request) bool {
	for _, q := range p.queues {
		if len(q) > 0 && !req.Fits(q[0], p.cfg.Limits) {
			return true
		}
	}
	return false
}

// putBack returns req's entries to the front of their queues, in order. p.mu is held.
func (p *Producer) putBack(req *batch.Request) {
	byShard := make(map[string][]*batch.Entry)
	for _, e := range req.Entries {
		byShard[e.Shard] = append(byShard[e.Shard], e)
	}
	for shard, es := range byShard {
		p.queues[shard] = append(es, p.queues[shard]...)
	}
	p.queued += len(req.Entries)
	p.queuedBytes += req.Bytes
}

// compact drops empty queues from the round robin and moves its start on. p.mu is held.
func (p *Producer) compact() {
	order := p.order[:0]
	for _, s := range p.order {
		if len(p.queues[s]) > 0 {
			order = append(order, s)
		} else {
			delete(p.queues, s)
		}
	}
	clear(p.order[len(order):])
	p.order = order
	if len(order) > 0 {
		p.next = (p.next + 1) % len(order)
	} else {
		p.next = 0
	}
}

// requeue puts a retried entry back: into its queue when its shard is still current, or,
// for an aggregate whose shard is gone, as user records routed afresh. p.mu is held.
func (p *Producer) requeue(e *batch.Entry) {
	if _, ok := p.m.Shard(e.Shard); ok || !e.Aggregated() {
		if !e.Aggregated() {
			if s, ok := p.m.Lookup(e.Items[0].Hash); ok {
				e.Shard = s.ID
			}
		}
		p.enqueue(e)
		return
	}
	p.stats.rerouted.Add(int64(len(e.Items)))
	for _, it := range e.Items {
		p.place(it)
	}
}

// send makes one PutRecords call for req, retrying whole-request failures, and settles
// every entry: acknowledged, retried, re-routed or failed.
func (p *Producer) send(req *batch.Request) {
	in := &kinesis.PutRecordsInput{Records: make([]types.PutRecordsRequestEntry, len(req.Entries))}
	in.StreamName, in.StreamARN = streamarn.Input(p.cfg.Stream)
	for i, e := range req.Entries {
		e.Attempts++
		for _, it := range e.Items {
			it.Attempts++
		}
		in.Records[i] = types.PutRecordsRequestEntry{Data: e.Record.Data, PartitionKey: aws.String(e.Record.PartitionKey)}
		if e.Record.ExplicitHashKey != "" {
			in.Records[i].ExplicitHashKey = aws.String(e.Record.ExplicitHashKey)
		}
	}
	var out *kinesis.PutRecordsOutput
	sent := time.Now()
	err := backoff.Do(p.ctx, p.cfg.Retry, func(ctx context.Context) error {
		p.stats.calls.Add(1)
		var err error
		out, err = p.api.PutRecords(ctx, in)
		if err == nil && len(out.Records) != len(in.Records) {
			err = fmt.Errorf("PutRecords answered %d results for %d records", len(out.Records), len(in.Records))
		}
		return err
	}, func(int, error, backoff.Class, time.Duration) { p.stats.retries.Add(1) })

	if p.limiter != nil && err == nil {
		// Large records were charged when they left; the service counted them on arrival.
		inFlight := time.Since(sent)
		for _, e := range req.Entries {
			p.limiter.Answered(e.Shard, e.Size(), inFlight)
		}
	}

	// Evidence of resharding needs a fresh map before deciding where records belong.
	var m *route.Map
	if err == nil {
		m = p.mapForResults(req, out)
	}

	p.mu.Lock()
	defer func() {
		p.inflight--
		p.cond.Broadcast()
		p.mu.Unlock()
		p.poke()
	}()
	if m != nil {
		p.adopt(m)
	}
	if err != nil {
		code, reason := describe(err)
		for _, e := range req.Entries {
			p.fail(e.Items, code, fmt.Sprintf("PutRecords failed: %s", reason))
		}
		return
	}
	now := time.Now()
	for i, e := range req.Entries {
		res := out.Records[i]
		if res.ErrorCode != nil {
			p.retryOrFail(e, aws.ToString(res.ErrorCode), aws.ToString(res.ErrorMessage), now)
			continue
		}
		landed := aws.ToString(res.ShardId)
		if e.Aggregated() && landed != e.Shard && !p.belongs(landed, e) {
			// The KPL's "wrong shard": readers that check hash ranges drop this aggregate,
			// so its records are routed and sent again.
			p.stats.wrongShard.Add(1)
			p.router.Invalidate()
			for _, it := range e.Items {
				p.place(it)
			}
			continue
		}
		p.stats.kinesisRecords.Add(1)
		p.stats.bytes.Add(int64(e.Size()))
		p.stats.userRecords.Add(int64(len(e.Items)))
		p.resolve(e.Items)
	}
}

// mapForResults returns a fresh shard map when a result shows a record on a shard the
// current map does not know (a resharding), nil otherwise.
func (p *Producer) mapForResults(req *batch.Request, out *kinesis.PutRecordsOutput) *route.Map {
	p.mu.Lock()
	cur := p.m
	p.mu.Unlock()
	evidence := false
	for i, e := range req.Entries {
		res := out.Records[i]
		if res.ErrorCode != nil || aws.ToString(res.ShardId) == e.Shard {
			continue
		}
		if _, ok := cur.Shard(aws.ToString(res.ShardId)); !ok {
			evidence = true
			break
		}
	}
	if !evidence {
		return nil
	}
	p.router.Invalidate()
	m, err := p.router.Current(p.ctx)
	if err != nil {
		return nil
	}
	return m
}

// belongs reports whether every record of e lies in the range of shard landed, by the
// map in use (refreshed before when the results showed an unknown shard). p.mu is held.
func (p *Producer) belongs(landed string, e *batch.Entry) bool {
	s, ok := p.m.Shard(landed)
	if !ok {
		return false
	}
	for _, it := range e.Items {
		if !s.Contains(it.Hash) {
			return false
		}
	}
	return true
}

// retryOrFail schedules e for another attempt after a per-entry failure, or fails its
// records when the retries are used up. p.mu is held.
func (p *Producer) retryOrFail(e *batch.Entry, code, msg string, now time.Time) {
	class := backoff.Retryable
	if code == "ProvisionedThroughputExceededException" {
		p.stats.throttled.Add(1)
		class = backoff.Throttled
	}
	if e.Attempts > p.cfg.Retry.Retries {
		p.fail(e.Items, code, fmt.Sprintf("PutRecords failed the record %d times, last with %s: %s", e.Attempts, code, msg))
		return
	}
	p.stats.retries.Add(1)
	e.NotBefore = now.Add(p.cfg.Retry.Delay(e.Attempts-1, class))
	p.delayed = append(p.delayed, e)
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

// resolve marks items acknowledged. p.mu is held.
func (p *Producer) resolve(items []*batch.Item) {
	for _, it := range items {
		p.outstanding--
		p.buffered -= memoryCost(it)
	}
}

// fail reports items as failed. p.mu is held.
func (p *Producer) fail(items []*batch.Item, code, reason string) {
	for _, it := range items {
		p.failures = append(p.failures, Failure{Record: it.Record, Meta: it.Meta, Reason: reason, ErrorCode: code, Attempts: it.Attempts})
	}
	p.stats.failures.Add(int64(len(items)))
	p.resolve(items)
}

// tooLarge explains why rec cannot be written to a stream whose record size limit is
// limit, and what to do about it.
func tooLarge(stream string, rec kpl.UserRecord, limit int) string {
	size := len(rec.PartitionKey) + len(rec.Data)
	reason := fmt.Sprintf("record of %d bytes (partition key %d + data %d) is over the stream's record size limit of %d bytes (stream %q, MaxRecordSizeInKiB %d)",
		size, len(rec.PartitionKey), len(rec.Data), limit, stream, limit>>10)
	if size <= batch.MaxRecordBytes {
		return reason + fmt.Sprintf("; raise the stream's limit with UpdateMaxRecordSize (MaxRecordSizeInKiB up to %d, 10 MiB) and restart the pipeline (writers read the limit when they start), or make the message smaller",
			batch.MaxRecordBytes>>10)
	}
	return reason + "; no stream takes records over 10 MiB (partition key included): split the message, or store the payload elsewhere (such as S3) and write a reference to it"
}

// Describer is the part of the Kinesis client StreamMaxRecordBytes uses.
type Describer interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// StreamMaxRecordBytes returns stream's record size limit in bytes (partition key + data)
// as DescribeStreamSummary reports it in MaxRecordSizeInKiB, retrying by policy. A summary
// without the field (a service or emulator that predates large records) means the default
// 1 MiB.
func StreamMaxRecordBytes(ctx context.Context, api Describer, stream string, policy backoff.Policy) (int, error) {
	var out *kinesis.DescribeStreamSummaryOutput
	err := backoff.Do(ctx, policy, func(ctx context.Context) error {
		var err error
		out, err = api.DescribeStreamSummary(ctx, streamarn.SummaryInput(stream))
		return err
	}, nil)
	if err != nil {
		return 0, err
	}
	if out.StreamDescriptionSummary == nil || out.StreamDescriptionSummary.MaxRecordSizeInKiB == nil {
		return batch.DefaultMaxRecordBytes, nil
	}
	kib := int(*out.StreamDescriptionSummary.MaxRecordSizeInKiB)
	// Clamp to what the service documents (1024..10240 KiB), so a stray value can neither
	// refuse every record nor make requests the service would reject whole.
	return min(max(kib<<10, batch.DefaultMaxRecordBytes), batch.MaxRecordBytes), nil
}

// describe returns an error's service code (or a generic one) and a message.
func describe(err error) (code, reason string) {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode(), err.Error()
	}
	if errors.Is(err, context.Canceled) {
		return CodeCanceled, err.Error()
	}
	return "RequestError", err.Error()
}
