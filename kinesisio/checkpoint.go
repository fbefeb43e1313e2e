package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// Checkpoint table metrics: commits written, DynamoDB calls, latency of a commit's write,
// lag from the end of the reader call that reached a position to its committed write,
// SHARD_END commits, leases lost to another owner, lease renewals, commits held because the
// table was unreachable (unreachable.go). Per shard,
// checkpoint_committed_records_<shard id> counts the user records the committed positions
// cover. They are reported by the commit step's bundles.
var (
	tableCommits    = beam.NewCounter(metricsNamespace, "checkpoint_commits")
	tableCalls      = beam.NewCounter(metricsNamespace, "checkpoint_dynamodb_calls")
	tableLatencyMs  = beam.NewDistribution(metricsNamespace, "checkpoint_commit_latency_ms")
	tableLagMs      = beam.NewDistribution(metricsNamespace, "checkpoint_commit_lag_ms")
	tableShardEnds  = beam.NewCounter(metricsNamespace, "checkpoint_shard_ends")
	tableLostLeases = beam.NewCounter(metricsNamespace, "checkpoint_leases_lost")
	tableRenewals   = beam.NewCounter(metricsNamespace, "checkpoint_lease_renewals")
	// tableUnavailable counts the commits (and SHARD_END preparations) the table could not
	// take when they were made; the checkpointer holds and retries them.
	tableUnavailable = beam.NewCounter(metricsNamespace, "checkpoint_table_unavailable")
)

// committedRecordsMetric is the name of the per-shard counter of committed records.
func committedRecordsMetric(shardID string) string { return "checkpoint_committed_records_" + shardID }

// commitAttempts is how often the DynamoDB client tries one request.
const commitAttempts = 8

// commitTimeout bounds one commit.
const commitTimeout = 30 * time.Second

// defaultLeaseDuration is KCL's default failoverTimeMillis: a lease whose counter has not
// moved for this long belongs to a dead owner.
const defaultLeaseDuration = 10 * time.Second

// checkpointSpec names the checkpoint table of a read, and the owner its leases are held by:
// one owner per pipeline construction, shared by all its workers. Empty Table means none.
// Takeover and LeaseDuration are WithCheckpointTakeover and WithCheckpointLeaseDuration.
type checkpointSpec struct {
	Table         string
	Endpoint      string
	Owner         string
	Takeover      bool
	LeaseDuration time.Duration
}

func newCheckpointSpec(cfg config) checkpointSpec {
	if cfg.read.checkpointTable == "" {
		return checkpointSpec{}
	}
	d := cfg.read.leaseDuration
	if d <= 0 {
		d = defaultLeaseDuration
	}
	return checkpointSpec{
		Table:         cfg.read.checkpointTable,
		Endpoint:      cfg.read.checkpointEndpoint,
		Owner:         "beamkinesis-" + cfg.read.readID,
		Takeover:      cfg.read.checkpointTakeover,
		LeaseDuration: d,
	}
}

func (s checkpointSpec) enabled() bool { return s.Table != "" }

// checkpointer is a worker's handle on a checkpoint table: the leases it last saw and the
// shards whose lease another owner took. One per (client, table, owner) in a process.
type checkpointer struct {
	spec  checkpointSpec
	table *leasetable.Table

	mu     sync.Mutex
	shards map[string]*shardLease
	// parentsDone holds the shards whose parents were seen at SHARD_END; parentsFailing
	// those whose last check of their parents failed (the table did not answer).
	parentsDone, parentsFailing map[string]bool
	// renewing says the lease renewer runs (lease.go).
	renewing bool
	// children finds a closed shard's children for its SHARD_END item (checkpoint_kcl.go).
	children childLister
	// retrying says the retrier of held positions runs (unreachable.go).
	retrying bool
	// renewFailing is when the lease renewals began to fail, zero once a renewal or a
	// commit succeeds; the renewer warns once per outage (lease.go). renewMu guards it and
	// is taken inside a shard's mu.
	renewMu      sync.Mutex
	renewFailing time.Time

	stats checkpointStats
}

// shardLease serialises the writes of one shard and remembers its lease as last written.
type shardLease struct {
	mu    sync.Mutex
	lease leasetable.Lease
	lost  *leasetable.LostError
	// stream is the shard's stream, for log lines.
	stream string
	// held is the furthest position the table could not take (unreachable), heldPrepare a
	// SHARD_END preparation it could not take; heldSince when the first of them failed.
	// refused is a held write the table answered with a refusal: the next commit returns it.
	held        *commitToken
	heldPrepare bool
	heldSince   time.Time
	refused     error
	// written is when this worker last wrote the lease (commit or renewal); calls counts the
	// reader calls on the shard running now, seen when the last one ended (lease.go).
	written time.Time
	calls   int
	seen    time.Time
}

// checkpointStats are counted on any goroutine and moved into Beam metrics by flush.
type checkpointStats struct {
	commits, calls, shardEnds, lost, renewals, unavailable atomic.Int64
	latency, lag                                           statQueue

	mu sync.Mutex
	// records holds, per shard, the user records covered by commits not yet reported.
	records map[string]int64
}

// statQueue holds samples until a ProcessElement call reports them.
type statQueue struct {
	mu sync.Mutex
	ms []int64
}

func (q *statQueue) add(ms int64) {
	q.mu.Lock()
	if len(q.ms) < 10000 {
		q.ms = append(q.ms, ms)
	}
	q.mu.Unlock()
}

func (q *statQueue) take() []int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.ms
	q.ms = nil
	return out
}

var (
	checkpointersMu sync.Mutex
	checkpointers   = map[string]*checkpointer{}
)

// Process-wide totals of every checkpointer, for tests and benchmarks: DynamoDB calls,
// commits written, the sum and maximum of their lags (reader call end to written), and the
// lags themselves (for percentiles).
var (
	tableCallsTotal   atomic.Int64
	tableCommitsTotal atomic.Int64
	tableLagSumMs     atomic.Int64
	tableLagMaxMs     atomic.Int64
	tableLostTotal    atomic.Int64
	tableLags         statQueue
)

// openCheckpointer returns the process's checkpointer for spec, creating the table if it is
// missing.
func openCheckpointer(ctx context.Context, client clientConfig, spec checkpointSpec) (*checkpointer, error) {
	key := client.Region + "|" + client.Endpoint + "|" + spec.Endpoint + "|" + spec.Table + "|" + spec.Owner
	checkpointersMu.Lock()
	defer checkpointersMu.Unlock()
	if c := checkpointers[key]; c != nil {
		return c, nil
	}
	awsCfg, err := loadAWSConfig(ctx, client)
	if err != nil {
		return nil, err
	}
	c := &checkpointer{spec: spec, shards: map[string]*shardLease{}, parentsDone: map[string]bool{}, parentsFailing: map[string]bool{}, children: childLister{cfg: client}}
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if spec.Endpoint != "" {
			o.BaseEndpoint = aws.String(spec.Endpoint)
		}
		o.APIOptions = append(o.APIOptions, countCalls(&c.stats.calls))
		// Ride out throttling and 5xx within one commit: a commit that still fails fails
		// the commit step's bundle, which the runner retries.
		o.RetryMaxAttempts = commitAttempts
	})
	c.table = leasetable.New(db, spec.Table)
	created, err := c.table.Ensure(ctx)
	if err != nil {
		return nil, fmt.Errorf("kinesisio: checkpoint table: %w", err)
	}
	if created {
		log.Infof(ctx, "kinesisio: created the checkpoint table %s (on-demand, with index %s)", spec.Table, leasetable.OwnerIndex)
	}
	checkpointers[key] = c
	return c, nil
}

func (c *checkpointer) shard(id string) *shardLease {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shards[id]
	if s == nil {
		s = &shardLease{}
		c.shards[id] = s
	}
	return s
}

// commit writes tok's position (or SHARD_END) as its shard's checkpoint. commitFn calls it
// once the runner handed it the token: after the runner committed the bundle that read up
// to it. A lease another owner took is logged and ends the shard's commits (nil). A write
// the table cannot take because it is unreachable is held and retried (unreachable.go):
// the token may be the shard's last (its SHARD_END, which its children wait for, or a
// bounded read's end), so it is never dropped. A write the table refuses is returned.
func (c *checkpointer) commit(ctx context.Context, tok commitToken) error {
	s := c.shard(tok.ShardID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil {
		return nil
	}
	if err := s.refused; err != nil {
		return err
	}
	if s.lease.ShardID == "" {
		s.lease.ShardID, s.stream = tok.ShardID, tok.Stream
	}
	if s.held != nil {
		// The table is unreachable: the retrier writes the furthest position once it answers.
		c.holdLocked(ctx, s, tok, nil)
		return nil
	}
	err := c.writeLocked(ctx, s, tok)
	if err != nil && tableUnreachable(err) {
		c.holdLocked(ctx, s, tok, err)
		return nil
	}
	return err
}

// writeLocked writes tok's position to s's lease. s.mu is held.
func (c *checkpointer) writeLocked(ctx context.Context, s *shardLease, tok commitToken) error {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	var children []string
	if tok.Seq == leasetable.ShardEnd && s.lease.Checkpoint != leasetable.ShardEnd {
		children = c.childrenOf(ctx, tok.Stream, tok.ShardID)
	}
	start := time.Now()
	l, err := c.table.Commit(ctx, s.lease, c.spec.Owner, tok.position(), children)
	var lost *leasetable.LostError
	switch {
	case errors.As(err, &lost):
		c.loseLocked(ctx, s, lost, tok.Stream)
		return nil
	case err != nil:
		return fmt.Errorf("committing shard %s of stream %s at %s/%d: %w", tok.ShardID, tok.Stream, tok.Seq, tok.Sub, err)
	}
	s.lease, s.written = l, time.Now()
	now := s.written
	if d := c.renewalSucceeded(); d > 0 {
		log.Infof(ctx, "kinesisio: checkpoint table %s takes writes again after %v of failed lease renewals", c.spec.Table, d.Round(time.Second))
	}
	c.stats.commits.Add(1)
	c.stats.latency.add(now.Sub(start).Milliseconds())
	lag := now.UnixMilli() - tok.EndMs
	c.stats.lag.add(lag)
	c.stats.mu.Lock()
	if c.stats.records == nil {
		c.stats.records = map[string]int64{}
	}
	c.stats.records[tok.ShardID] += tok.Records
	c.stats.mu.Unlock()
	tableCommitsTotal.Add(1)
	tableLagSumMs.Add(lag)
	tableLags.add(lag)
	for m := tableLagMaxMs.Load(); lag > m && !tableLagMaxMs.CompareAndSwap(m, lag); m = tableLagMaxMs.Load() {
	}
	if tok.Seq == leasetable.ShardEnd {
		c.stats.shardEnds.Add(1)
	}
	return nil
}

// prepareShardEnd writes SHARD_END as tok's shard's prepared checkpoint: the held commit
// (held.go) got its SHARD_END token, so the runner committed the read to the shard's end,
// and children may be read; the checkpoint itself moves once the sinks wrote the records.
func (c *checkpointer) prepareShardEnd(ctx context.Context, tok commitToken) error {
	s := c.shard(tok.ShardID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil {
		return nil
	}
	if err := s.refused; err != nil {
		return err
	}
	if s.lease.ShardID == "" {
		s.lease.ShardID, s.stream = tok.ShardID, tok.Stream
	}
	if s.held != nil || s.heldPrepare {
		s.heldPrepare = true
		c.stats.unavailable.Add(1)
		return nil
	}
	err := c.prepareLocked(ctx, s, tok.Stream)
	if err != nil && tableUnreachable(err) {
		s.heldPrepare = true
		c.holdStartedLocked(ctx, s, "SHARD_END (prepared)", err)
		return nil
	}
	return err
}

// prepareLocked writes SHARD_END as s's prepared checkpoint. s.mu is held.
func (c *checkpointer) prepareLocked(ctx context.Context, s *shardLease, stream string) error {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	tok := commitToken{Stream: stream, ShardID: s.lease.ShardID}
	l, err := c.table.Prepare(ctx, s.lease, c.spec.Owner, leasetable.ShardEnd)
	var lost *leasetable.LostError
	switch {
	case errors.As(err, &lost):
		c.loseLocked(ctx, s, lost, tok.Stream)
		return nil
	case err != nil:
		return fmt.Errorf("kinesisio: checkpoint table %s: marking shard %s of stream %s read to its end: %w", c.spec.Table, tok.ShardID, tok.Stream, err)
	}
	s.lease, s.written = l, time.Now()
	return nil
}

// loseLocked records that another owner holds s's lease now, and says so. s.mu is held.
func (c *checkpointer) loseLocked(ctx context.Context, s *shardLease, lost *leasetable.LostError, stream string) {
	s.lost = lost
	c.stats.lost.Add(1)
	tableLostTotal.Add(1)
	log.Errorf(ctx, "kinesisio: the lease of shard %s of stream %s in checkpoint table %s was taken over by owner %q (lease counter %d); owner %q commits nothing more for it and stops reading it", lost.ShardID, stream, c.spec.Table, lost.Owner, lost.Counter, c.spec.Owner)
}

// flush adds the statistics gathered since the last flush to the Beam metrics of ctx.
func (c *checkpointer) flush(ctx context.Context) {
	if n := c.stats.commits.Swap(0); n > 0 {
		tableCommits.Inc(ctx, n)
	}
	if n := c.stats.calls.Swap(0); n > 0 {
		tableCalls.Inc(ctx, n)
	}
	if n := c.stats.shardEnds.Swap(0); n > 0 {
		tableShardEnds.Inc(ctx, n)
	}
	if n := c.stats.lost.Swap(0); n > 0 {
		tableLostLeases.Inc(ctx, n)
	}
	if n := c.stats.renewals.Swap(0); n > 0 {
		tableRenewals.Inc(ctx, n)
	}
	if n := c.stats.unavailable.Swap(0); n > 0 {
		tableUnavailable.Inc(ctx, n)
	}
	c.stats.mu.Lock()
	records := c.stats.records
	c.stats.records = nil
	c.stats.mu.Unlock()
	for shard, n := range records {
		beam.NewCounter(metricsNamespace, committedRecordsMetric(shard)).Inc(ctx, n)
	}
	for _, ms := range c.stats.latency.take() {
		tableLatencyMs.Update(ctx, ms)
	}
	for _, ms := range c.stats.lag.take() {
		tableLagMs.Update(ctx, ms)
	}
}

// parentsPending returns a parent of d whose item in the table does not say SHARD_END yet,
// or "" when d may be read. A parent without an item (expired, or never leased) does not
// block, as in the KCL.
func (c *checkpointer) parentsPending(ctx context.Context, d shardDescriptor) (string, error) {
	for _, p := range []string{d.ParentShardID, d.AdjacentParentShardID} {
		if p == "" {
			continue
		}
		l, ok, err := c.table.Get(ctx, p)
		if err != nil {
			return "", fmt.Errorf("kinesisio: checking the parents of %v in checkpoint table %s: %w", d, c.spec.Table, err)
		}
		// A parent this job read to its end, whose last positions wait for the sinks (a held
		// commit prepares SHARD_END first), is done as far as its children go.
		if ok && l.Checkpoint != leasetable.ShardEnd && (l.Pending != leasetable.ShardEnd || l.Owner != c.spec.Owner) {
			return p, nil
		}
	}
	return "", nil
}

// countCalls counts every DynamoDB request sent (retries included) in n and in
// tableCallsTotal.
func countCalls(n *atomic.Int64) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("beamkinesisCountCalls",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				n.Add(1)
				tableCallsTotal.Add(1)
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
}

// holdForTable keeps the reader off d while the table says not to read it: while a parent
// is not at SHARD_END (checked until it is, at most every WithPollInterval), or for good
// once another job took the lease over.
func (r *shardReader) holdForTable(ctx context.Context, rt *sdf.LockRTracker, d shardDescriptor) (sdf.ProcessContinuation, bool, error) {
	if lost := r.cp.lostTo(d); lost != nil {
		log.Infof(ctx, "kinesisio: no longer reading %v: owner %q holds its lease in checkpoint table %s", d, lost.Owner, r.spec.Checkpoint.Table)
		rt.TryClaim(shardEndClaim{})
		return sdf.StopProcessing(), true, nil
	}
	if d.ParentShardID == "" && d.AdjacentParentShardID == "" {
		return nil, false, nil
	}
	key := "parents/" + r.pacingKey(d)
	if r.cp.parentsSeenDone(d) {
		return nil, false, nil
	}
	if cont, held, err := holdOff(ctx, calls.wait(key, time.Now())); held || err != nil {
		return cont, held, err
	}
	calls.notBefore(key, time.Now().Add(r.spec.PollInterval))
	p, err := r.cp.parentsPending(ctx, d)
	if err != nil {
		// One WARN per shard while the table does not answer; the checks go on.
		if r.cp.parentsCheckFailed(d, true) {
			log.Warnf(ctx, "%v; checking again every %v", err, r.spec.PollInterval)
		} else {
			log.Debugf(ctx, "%v; checking again in %v", err, r.spec.PollInterval)
		}
		return sdf.ResumeProcessingIn(r.spec.PollInterval), true, nil
	}
	r.cp.parentsCheckFailed(d, false)
	if p != "" {
		log.Debugf(ctx, "kinesisio: %v waits for its parent %s to reach SHARD_END in checkpoint table %s", d, p, r.spec.Checkpoint.Table)
		return sdf.ResumeProcessingIn(r.spec.PollInterval), true, nil
	}
	calls.forget(key)
	r.cp.markParentsDone(d)
	log.Infof(ctx, "kinesisio: the parents of %v are read to their end; reading it", d)
	return nil, false, nil
}

// parentsCheckFailed records whether the last check of d's parents failed; it reports
// whether a failure is the first since the last check that succeeded.
func (c *checkpointer) parentsCheckFailed(d shardDescriptor, failed bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !failed {
		delete(c.parentsFailing, d.ShardID)
		return false
	}
	if c.parentsFailing[d.ShardID] {
		return false
	}
	c.parentsFailing[d.ShardID] = true
	return true
}

func (c *checkpointer) parentsSeenDone(d shardDescriptor) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parentsDone[d.ShardID]
}

func (c *checkpointer) markParentsDone(d shardDescriptor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parentsDone[d.ShardID] = true
}
