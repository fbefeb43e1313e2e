// Package checkpoint is the checkpoint engine of kinesisio's reads: a worker's handle on a
// KCL-compatible DynamoDB lease table (internal/leasetable), with the leases of the shards
// it reads (lease.go), the commits of their positions, the SHARD_END items with their
// children that KCL expects, and the positions it holds while the table is unreachable
// (unreachable.go). It knows nothing of Beam but its log; the read's DoFns drive it and
// report its statistics (Stats) as metrics.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

const (
	// commitAttempts is how often the DynamoDB client tries one request.
	commitAttempts = 8
	// commitTimeout bounds one commit.
	commitTimeout = 30 * time.Second
	// DefaultLeaseDuration is KCL's default failoverTimeMillis: a lease whose counter has not
	// moved for this long belongs to a dead owner.
	DefaultLeaseDuration = 10 * time.Second
)

// Config names a checkpoint table and the owner its leases are held by. Takeover and
// LeaseDuration are kinesisio's WithCheckpointTakeover and WithCheckpointLeaseDuration;
// Endpoint, when set, is the DynamoDB endpoint. kinesisio's DoFns carry it (Beam encodes
// them as JSON); an empty Table means the read has no table.
type Config struct {
	Table         string
	Endpoint      string
	Owner         string
	Takeover      bool
	LeaseDuration time.Duration
}

// Enabled reports whether c names a table.
func (c Config) Enabled() bool { return c.Table != "" }

// Shard is a shard as the table knows it.
type Shard struct {
	Stream, ID string
	// Parents are the ids of the shard's parent and adjacent parent, if any.
	Parents []string
	// StartingHashKey and EndingHashKey are the shard's hash key range (decimal).
	StartingHashKey, EndingHashKey string
	// Initial is the checkpoint of a shard not read yet, in KCL's terms: TRIM_HORIZON,
	// AT_TIMESTAMP or a sequence number after which it starts.
	Initial string
}

func (s Shard) String() string { return fmt.Sprintf("shard %s of stream %s", s.ID, s.Stream) }

// Token is a position a reader reached, to be committed: the last user record it claimed
// (Seq, Sub), or leasetable.ShardEnd. Records is how many user records it covers; EndMs
// when the reader's call that reached it ended, for the commit lag. MaxEventMs is the
// latest event time of the records it covers that the call emitted (for a call that
// emitted none, the shard's watermark): kinesisio's held commit writes the token once the
// windows up to it were written; the engine does not read it. kinesisio's DoFns pass it
// between stages under the name commitToken, with a coder of their own.
type Token struct {
	Stream     string
	ShardID    string
	Seq        string
	Sub        int64
	Records    int64
	EndMs      int64
	MaxEventMs int64
}

// Position is the token's position in the table's terms.
func (t Token) Position() leasetable.Position { return leasetable.Position{Seq: t.Seq, Sub: t.Sub} }

// ChildLister returns the ids of the shards of stream whose parent or adjacent parent is
// shard, for the SHARD_END item of a closed shard.
type ChildLister func(ctx context.Context, stream, shard string) ([]string, error)

// Checkpointer is a worker's handle on a checkpoint table: the leases it last saw and the
// shards whose lease another owner took. A worker process needs one per table and owner.
// It is safe for concurrent use.
type Checkpointer struct {
	cfg      Config
	table    *leasetable.Table
	children ChildLister

	mu     sync.Mutex
	shards map[string]*shardLease
	// parentsDone holds the shards whose parents were seen at SHARD_END; parentsFailing
	// those whose last check of their parents failed (the table did not answer).
	parentsDone, parentsFailing map[string]bool
	// renewing says the lease renewer runs (lease.go).
	renewing bool
	// retrying says the retrier of held positions runs (unreachable.go).
	retrying bool
	// renewFailing is when the lease renewals began to fail, zero once a renewal or a
	// commit succeeds; the renewer warns once per outage (lease.go). renewMu guards it and
	// is taken inside a shard's mu.
	renewMu      sync.Mutex
	renewFailing time.Time

	stats stats
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
	held        *Token
	heldPrepare bool
	heldSince   time.Time
	refused     error
	// written is when this worker last wrote the lease (commit or renewal); calls counts the
	// reader calls on the shard running now, seen when the last one ended (lease.go).
	written time.Time
	calls   int
	seen    time.Time
}

// Open returns a Checkpointer on the table of cfg, reached with awsCfg, creating the table
// if it is missing. children finds a closed shard's children for its SHARD_END item.
func Open(ctx context.Context, awsCfg aws.Config, cfg Config, children ChildLister) (*Checkpointer, error) {
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	c := newCheckpointer(cfg, children)
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.APIOptions = append(o.APIOptions, c.countCalls)
		// Ride out throttling and 5xx within one commit: a commit that still fails fails
		// the commit step's bundle, which the runner retries.
		o.RetryMaxAttempts = commitAttempts
	})
	c.table = leasetable.New(db, cfg.Table)
	created, err := c.table.Ensure(ctx)
	if err != nil {
		return nil, fmt.Errorf("kinesisio: checkpoint table: %w", err)
	}
	if created {
		log.Infof(ctx, "kinesisio: created the checkpoint table %s (on-demand, with index %s)", cfg.Table, leasetable.OwnerIndex)
	}
	return c, nil
}

func newCheckpointer(cfg Config, children ChildLister) *Checkpointer {
	return &Checkpointer{cfg: cfg, children: children, shards: map[string]*shardLease{},
		parentsDone: map[string]bool{}, parentsFailing: map[string]bool{}}
}

// Table is the table's name.
func (c *Checkpointer) Table() string { return c.cfg.Table }

// Owner is the owner the leases are held by.
func (c *Checkpointer) Owner() string { return c.cfg.Owner }

func (c *Checkpointer) shard(id string) *shardLease {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shards[id]
	if s == nil {
		s = &shardLease{}
		c.shards[id] = s
	}
	return s
}

// Commit writes tok's position (or SHARD_END) as its shard's checkpoint. The commit step
// calls it once the runner handed it the token: after the runner committed the bundle that
// read up to it. A lease another owner took is logged and ends the shard's commits (nil). A
// write the table cannot take because it is unreachable is held and retried
// (unreachable.go): the token may be the shard's last (its SHARD_END, which its children
// wait for, or a bounded read's end), so it is never dropped. A write the table refuses is
// returned.
func (c *Checkpointer) Commit(ctx context.Context, tok Token) error {
	started, err := c.commit(ctx, tok)
	if started {
		c.startRetrier()
	}
	return err
}

// commit is Commit under the shard's mu; started says that the shard's writes began to be
// held, so the retrier must run. The caller starts it once the shard's mu is released: the
// retrier takes c.mu before a shard's mu.
func (c *Checkpointer) commit(ctx context.Context, tok Token) (started bool, err error) {
	s, ok, err := c.lockedShard(tok)
	defer s.mu.Unlock()
	if !ok {
		return false, err
	}
	if s.held != nil {
		// The table is unreachable: the retrier writes the furthest position once it answers.
		c.holdLocked(ctx, s, tok, nil)
		return false, nil
	}
	err = c.writeLocked(ctx, s, tok)
	if err != nil && Unreachable(err) {
		return c.holdLocked(ctx, s, tok, err), nil
	}
	return false, err
}

// lockedShard locks tok's shard and reports whether a write for it may go ahead: not once
// another owner took its lease (no error), nor after the table refused a held write of it
// (that error). The caller unlocks s.mu.
func (c *Checkpointer) lockedShard(tok Token) (s *shardLease, ok bool, err error) {
	s = c.shard(tok.ShardID)
	s.mu.Lock()
	switch {
	case s.lost != nil:
		return s, false, nil
	case s.refused != nil:
		return s, false, s.refused
	}
	if s.lease.ShardID == "" {
		s.lease.ShardID, s.stream = tok.ShardID, tok.Stream
	}
	return s, true, nil
}

// writeLocked writes tok's position to s's lease. s.mu is held.
func (c *Checkpointer) writeLocked(ctx context.Context, s *shardLease, tok Token) error {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	var children []string
	if tok.Seq == leasetable.ShardEnd && s.lease.Checkpoint != leasetable.ShardEnd {
		children = c.childrenOf(ctx, tok.Stream, tok.ShardID)
	}
	start := time.Now()
	l, err := c.table.Commit(ctx, s.lease, c.cfg.Owner, tok.Position(), children)
	var lost *leasetable.LostError
	switch {
	case errors.As(err, &lost):
		c.loseLocked(ctx, s, lost, tok.Stream)
		return nil
	case err != nil:
		return fmt.Errorf("committing shard %s of stream %s at %s/%d: %w", tok.ShardID, tok.Stream, tok.Seq, tok.Sub, err)
	}
	s.lease, s.written = l, time.Now()
	if d := c.renewalSucceeded(); d > 0 {
		log.Infof(ctx, "kinesisio: checkpoint table %s takes writes again after %v of failed lease renewals", c.cfg.Table, d.Round(time.Second))
	}
	c.stats.committed(tok, s.written.Sub(start).Milliseconds(), s.written.UnixMilli()-tok.EndMs)
	return nil
}

// childrenOf returns the children of a closed shard for its SHARD_END item. An error is
// logged and gives none: the SHARD_END checkpoint is written all the same.
func (c *Checkpointer) childrenOf(ctx context.Context, stream, shard string) []string {
	children, err := c.children(ctx, stream, shard)
	if err != nil {
		log.Warnf(ctx, "kinesisio: shard %s of stream %s reached SHARD_END; its children are not written to checkpoint table %s: %v", shard, stream, c.cfg.Table, err)
		return nil
	}
	return children
}

// PrepareShardEnd writes SHARD_END as tok's shard's prepared checkpoint: the held commit
// got its SHARD_END token, so the runner committed the read to the shard's end, and
// children may be read; the checkpoint itself moves once the sinks wrote the records.
func (c *Checkpointer) PrepareShardEnd(ctx context.Context, tok Token) error {
	started, err := c.prepareShardEnd(ctx, tok)
	if started {
		c.startRetrier()
	}
	return err
}

// prepareShardEnd is PrepareShardEnd under the shard's mu; started is as for commit.
func (c *Checkpointer) prepareShardEnd(ctx context.Context, tok Token) (started bool, err error) {
	s, ok, err := c.lockedShard(tok)
	defer s.mu.Unlock()
	if !ok {
		return false, err
	}
	if s.held != nil || s.heldPrepare {
		s.heldPrepare = true
		c.stats.unavailable.Add(1)
		return false, nil
	}
	err = c.prepareLocked(ctx, s, tok.Stream)
	if err != nil && Unreachable(err) {
		s.heldPrepare = true
		c.heldStartedLocked(ctx, s, "SHARD_END (prepared)", err)
		return true, nil
	}
	return false, err
}

// prepareLocked writes SHARD_END as s's prepared checkpoint. s.mu is held.
func (c *Checkpointer) prepareLocked(ctx context.Context, s *shardLease, stream string) error {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	l, err := c.table.Prepare(ctx, s.lease, c.cfg.Owner, leasetable.ShardEnd)
	var lost *leasetable.LostError
	switch {
	case errors.As(err, &lost):
		c.loseLocked(ctx, s, lost, stream)
		return nil
	case err != nil:
		return fmt.Errorf("kinesisio: checkpoint table %s: marking shard %s of stream %s read to its end: %w", c.cfg.Table, s.lease.ShardID, stream, err)
	}
	s.lease, s.written = l, time.Now()
	return nil
}

// loseLocked records that another owner holds s's lease now, and says so. s.mu is held.
func (c *Checkpointer) loseLocked(ctx context.Context, s *shardLease, lost *leasetable.LostError, stream string) {
	s.lost = lost
	c.stats.lost.Add(1)
	log.Errorf(ctx, "kinesisio: the lease of shard %s of stream %s in checkpoint table %s was taken over by owner %q (lease counter %d); owner %q commits nothing more for it and stops reading it", lost.ShardID, stream, c.cfg.Table, lost.Owner, lost.Counter, c.cfg.Owner)
}

// ParentsReady reports whether s may be read as far as its parents go: every parent's item
// in the table says SHARD_END. A parent without an item (expired, or never leased) does not
// block, as in the KCL. Once it has seen them so it answers from memory; until then each
// call reads the parents' items (the caller paces the calls). It logs what holds s back: a
// parent not at SHARD_END yet, or a table that does not answer (one warning per shard until
// a check succeeds again).
func (c *Checkpointer) ParentsReady(ctx context.Context, s Shard) bool {
	c.mu.Lock()
	done := c.parentsDone[s.ID]
	c.mu.Unlock()
	if done {
		return true
	}
	pending, err := c.parentPending(ctx, s)
	c.mu.Lock()
	first := err != nil && !c.parentsFailing[s.ID]
	if err != nil {
		c.parentsFailing[s.ID] = true
	} else {
		delete(c.parentsFailing, s.ID)
	}
	if err == nil && pending == "" {
		c.parentsDone[s.ID] = true
	}
	c.mu.Unlock()
	switch {
	case first:
		log.Warnf(ctx, "%v; checking again until it answers", err)
	case err != nil:
		log.Debugf(ctx, "%v; checking again", err)
	case pending != "":
		log.Debugf(ctx, "kinesisio: %v waits for its parent %s to reach SHARD_END in checkpoint table %s", s, pending, c.cfg.Table)
	default:
		log.Infof(ctx, "kinesisio: the parents of %v are read to their end; reading it", s)
	}
	return err == nil && pending == ""
}

// parentPending returns a parent of s whose item in the table does not say SHARD_END yet,
// or "" when there is none.
func (c *Checkpointer) parentPending(ctx context.Context, s Shard) (string, error) {
	for _, p := range s.Parents {
		l, ok, err := c.table.Get(ctx, p)
		if err != nil {
			return "", fmt.Errorf("kinesisio: checking the parents of %v in checkpoint table %s: %w", s, c.cfg.Table, err)
		}
		// A parent this job read to its end, whose last positions wait for the sinks (a held
		// commit prepares SHARD_END first), is done as far as its children go.
		if ok && l.Checkpoint != leasetable.ShardEnd && (l.Pending != leasetable.ShardEnd || l.Owner != c.cfg.Owner) {
			return p, nil
		}
	}
	return "", nil
}

// countCalls counts every DynamoDB request sent, retries included.
func (c *Checkpointer) countCalls(st *middleware.Stack) error {
	return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("beamkinesisCountCalls",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.stats.calls.Add(1)
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}
