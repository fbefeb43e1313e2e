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

// commitTimeout bounds one commit made from a finalization callback, which has no context.
const commitTimeout = 30 * time.Second

// finalizationExpiry is how long a runner may wait before it finalizes a bundle (after that
// it drops the callback, and the next bundle's commit covers the position).
const finalizationExpiry = 10 * time.Minute

// Checkpoint table metrics: commits made, positions committed per shard, latency of the
// DynamoDB write and lag from the end of the bundle to the committed write. They are added
// in the next ProcessElement call after the commit (finalization callbacks have no metrics
// context).
var (
	tableCommits    = beam.NewCounter(metricsNamespace, "checkpoint_commits")
	tableCalls      = beam.NewCounter(metricsNamespace, "checkpoint_dynamodb_calls")
	tableLatencyMs  = beam.NewDistribution(metricsNamespace, "checkpoint_commit_latency_ms")
	tableLagMs      = beam.NewDistribution(metricsNamespace, "checkpoint_commit_lag_ms")
	tableShardEnds  = beam.NewCounter(metricsNamespace, "checkpoint_shard_ends")
	tableLostLeases = beam.NewCounter(metricsNamespace, "checkpoint_leases_lost")
)

// checkpointSpec names the checkpoint table of a read, and the owner its leases are held by:
// one owner per pipeline construction, shared by all its workers. Empty Table means none.
type checkpointSpec struct {
	Table    string
	Endpoint string
	Owner    string
	// Failover is WithCheckpointTableFailover (checkpoint_foreign.go); 0 means the default.
	Failover time.Duration
}

func newCheckpointSpec(cfg config) checkpointSpec {
	if cfg.read.checkpointTable == "" {
		return checkpointSpec{}
	}
	return checkpointSpec{Table: cfg.read.checkpointTable, Endpoint: cfg.read.checkpointEndpoint, Owner: ownerPrefix + cfg.read.readID, Failover: cfg.read.checkpointFailover}
}

func (s checkpointSpec) enabled() bool { return s.Table != "" }

// checkpointer is a worker's handle on a checkpoint table: the leases it last saw and the
// shards whose lease another owner took. One per (client, table, owner) in a process.
type checkpointer struct {
	spec  checkpointSpec
	table *leasetable.Table

	mu     sync.Mutex
	shards map[string]*shardLease
	// parentsDone holds the shards whose parents were seen at SHARD_END.
	parentsDone map[string]bool
	// pending holds, per shard, the position the last call on this worker reached, to be
	// committed when the runner hands back the residual that starts after it.
	pending map[string]pendingCommit

	stats checkpointStats
	// foreign watches leases held by other applications' workers (checkpoint_foreign.go).
	foreign foreignWatch
	// children finds a closed shard's children for its SHARD_END item (checkpoint_kcl.go).
	children childLister
}

// shardLease serialises the commits of one shard and remembers its lease as last written.
type shardLease struct {
	mu    sync.Mutex
	lease leasetable.Lease
	lost  *leasetable.LostError
}

// checkpointStats are counted on any goroutine and moved into Beam metrics by flush.
type checkpointStats struct {
	commits, calls, shardEnds, lost atomic.Int64
	latency, lag                    statQueue
	registered, finalized           atomic.Int64
	warnedNoFinalization            atomic.Bool
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
// commits written, and the sum and maximum of their lags (bundle end to written).
var (
	tableCallsTotal   atomic.Int64
	tableCommitsTotal atomic.Int64
	tableLagSumMs     atomic.Int64
	tableLagMaxMs     atomic.Int64
	tableLostTotal    atomic.Int64
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
	c := &checkpointer{spec: spec, shards: map[string]*shardLease{}, parentsDone: map[string]bool{}, pending: map[string]pendingCommit{}, children: childLister{cfg: client}}
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if spec.Endpoint != "" {
			o.BaseEndpoint = aws.String(spec.Endpoint)
		}
		o.APIOptions = append(o.APIOptions, countCalls(&c.stats.calls))
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

// acquire takes d's lease for this job (creating its item, or taking it over from another
// owner, saying so) and returns d as it must be read: from the lease's checkpoint when it
// has one. read is false when the lease says SHARD_END: the shard was read to its end.
func (c *checkpointer) acquire(ctx context.Context, d shardDescriptor) (shardDescriptor, bool, error) {
	want := leasetable.Lease{
		ShardID:         d.ShardID,
		Checkpoint:      initialCheckpoint(d),
		StartingHashKey: d.StartingHashKey,
		EndingHashKey:   d.EndingHashKey,
	}
	for _, p := range []string{d.ParentShardID, d.AdjacentParentShardID} {
		if p != "" {
			want.Parents = append(want.Parents, p)
		}
	}
	if err := c.awaitForeignExpiry(ctx, d); err != nil {
		return d, false, err
	}
	s := c.shard(d.ShardID)
	s.mu.Lock()
	defer s.mu.Unlock()
	l, prev, err := c.table.Acquire(ctx, want, c.spec.Owner)
	if err != nil {
		return d, false, fmt.Errorf("kinesisio: checkpoint table %s: %w", c.spec.Table, err)
	}
	s.lease, s.lost = l, nil
	if prev != nil && prev.Owner != "" { // a lease without owner (KCL's unassigned leases) is simply taken
		log.Warnf(ctx, "kinesisio: took over the lease of %v in checkpoint table %s from owner %q (lease counter %d, now %d): that job, if it still runs, stops reading the shard at its next commit", d, c.spec.Table, prev.Owner, prev.Counter, l.Counter)
	}
	switch {
	case l.Checkpoint == leasetable.ShardEnd:
		log.Infof(ctx, "kinesisio: %v is at SHARD_END in checkpoint table %s; it is not read again", d, c.spec.Table)
		return d, false, nil
	case leasetable.IsSequence(l.Checkpoint):
		d.StartKind, d.StartSeq, d.StartSub, d.StartTimeMs = startAfterSubSequence, l.Checkpoint, l.Sub, 0
		log.Infof(ctx, "kinesisio: %v resumes after %s/%d, its checkpoint in table %s", d, l.Checkpoint, l.Sub, c.spec.Table)
	}
	return d, true, nil
}

// initialCheckpoint is the KCL checkpoint of a shard not read yet: its start position.
// A start at a sequence number has no KCL name; TRIM_HORIZON is the one that loses nothing.
func initialCheckpoint(d shardDescriptor) string {
	switch d.StartKind {
	case startAtTimestamp:
		return leasetable.AtTimestamp
	case startAfterSequence:
		return d.StartSeq
	}
	return leasetable.TrimHorizon
}

// lostTo says whether another owner holds d's lease (a commit found it so).
func (c *checkpointer) lostTo(d shardDescriptor) *leasetable.LostError {
	s := c.shard(d.ShardID)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// commit writes pos (or SHARD_END) as d's checkpoint. It is called from finalization
// callbacks, after the runner committed the bundle that claimed up to pos.
func (c *checkpointer) commit(d shardDescriptor, pos leasetable.Position, bundleEnd time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	c.stats.finalized.Add(1)
	s := c.shard(d.ShardID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil {
		return nil
	}
	if s.lease.ShardID == "" {
		s.lease.ShardID = d.ShardID
	}
	var children []string
	if pos.Seq == leasetable.ShardEnd && s.lease.Checkpoint != leasetable.ShardEnd {
		children = c.childrenOf(ctx, d)
	}
	start := time.Now()
	l, err := c.table.Commit(ctx, s.lease, c.spec.Owner, pos, children)
	var lost *leasetable.LostError
	switch {
	case errors.As(err, &lost):
		s.lost = lost
		c.stats.lost.Add(1)
		tableLostTotal.Add(1)
		log.Errorf(ctx, "kinesisio: the lease of %v in checkpoint table %s was taken over by owner %q (lease counter %d); this job commits nothing more for it and stops reading it", d, c.spec.Table, lost.Owner, lost.Counter)
		return nil
	case err != nil:
		// The next bundle's commit covers this position. Not returned: Prism panics on a
		// finalization error, and a failed commit only means more records read again.
		log.Warnf(ctx, "kinesisio: committing %v at %s/%d failed; the next commit covers it: %v", d, pos.Seq, pos.Sub, err)
		return nil
	}
	s.lease = l
	now := time.Now()
	c.stats.commits.Add(1)
	c.stats.latency.add(now.Sub(start).Milliseconds())
	lag := now.Sub(bundleEnd).Milliseconds()
	c.stats.lag.add(lag)
	tableCommitsTotal.Add(1)
	tableLagSumMs.Add(lag)
	for m := tableLagMaxMs.Load(); lag > m && !tableLagMaxMs.CompareAndSwap(m, lag); m = tableLagMaxMs.Load() {
	}
	if pos.Seq == leasetable.ShardEnd {
		c.stats.shardEnds.Add(1)
	}
	return nil
}

// pendingCommit is a position reached by a call whose bundle the runner has not yet been
// seen to commit.
type pendingCommit struct {
	pos leasetable.Position
	end time.Time
}

// commitResumed commits the position before rest, the residual the runner handed back: the
// runner persists a bundle before it schedules the residual the bundle returned, so the
// records before rest's start are committed output. This covers what finalization callbacks
// do not: Beam Go v2.77.0 runs a plan's callbacks only in its first bundle (exec.Plan.Finalize
// replaces the plan's bundleFinalizer, but its ParDo nodes keep registering callbacks on the
// old one), and Prism reuses plans.
func (c *checkpointer) commitResumed(d shardDescriptor, rest shardRestriction) {
	var p pendingCommit
	c.mu.Lock()
	p, ok := c.pending[d.ShardID]
	if ok && p.pos.Seq == rest.StartSeq {
		delete(c.pending, d.ShardID)
	}
	c.mu.Unlock()
	switch {
	case ok && p.pos.Seq == rest.StartSeq && (rest.StartKind == startAfterSequence || p.pos.Sub == rest.StartSub):
	case rest.StartKind == startAfterSubSequence && rest.Claimed > 0:
		// Resumed on another worker: the position is exact inside an aggregate.
		p = pendingCommit{pos: leasetable.Position{Seq: rest.StartSeq, Sub: rest.StartSub}, end: time.Now()}
	default:
		return
	}
	c.commit(d, p.pos, p.end)
}

// registerCommit asks the runner to commit, once it has committed this bundle, the position
// the call's claims reached on rt. final says no residual follows the call (the shard or the
// read ended).
func (c *checkpointer) registerCommit(ctx context.Context, bf beam.BundleFinalization, rt *sdf.LockRTracker, d shardDescriptor, final bool) {
	t, ok := rt.Rt.(*shardTracker)
	if !ok {
		return
	}
	rt.Mu.Lock()
	last, claimed, shardEnd := t.reached()
	rt.Mu.Unlock()
	var pos leasetable.Position
	switch {
	case shardEnd:
		pos = leasetable.Position{Seq: leasetable.ShardEnd}
	case claimed:
		pos = leasetable.Position{Seq: last.Seq, Sub: last.Sub}
	default:
		return
	}
	end := time.Now()
	if shardEnd || final {
		// No residual will be handed back; with finalization unreliable in Beam Go v2.77.0
		// (see commitResumed) the position is written now, after the call emitted the
		// records up to it.
		c.commit(d, pos, end)
		return
	}
	c.mu.Lock()
	c.pending[d.ShardID] = pendingCommit{pos: pos, end: end}
	c.mu.Unlock()
	c.stats.registered.Add(1)
	if c.stats.registered.Load() >= 1000 && c.stats.finalized.Load() == 0 && !c.stats.warnedNoFinalization.Swap(true) {
		log.Warnf(ctx, "kinesisio: the runner has finalized none of the last 1000 bundles that read from stream %s, so no position reaches checkpoint table %s; a new job would resume from the last committed positions (or WithStartingPosition)", d.Stream, c.spec.Table)
	}
	bf.RegisterCallback(finalizationExpiry, func() error { return c.commit(d, pos, end) })
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
		if ok && l.Checkpoint != leasetable.ShardEnd {
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
		log.Warnf(ctx, "%v; checking again in %v", err, r.spec.PollInterval)
		return sdf.ResumeProcessingIn(r.spec.PollInterval), true, nil
	}
	if p != "" {
		log.Debugf(ctx, "kinesisio: %v waits for its parent %s to reach SHARD_END in checkpoint table %s", d, p, r.spec.Checkpoint.Table)
		return sdf.ResumeProcessingIn(r.spec.PollInterval), true, nil
	}
	calls.forget(key)
	r.cp.markParentsDone(d)
	log.Infof(ctx, "kinesisio: the parents of %v are read to their end; reading it", d)
	return nil, false, nil
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
