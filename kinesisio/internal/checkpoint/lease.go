package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/errkind"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// Leases: who may read a shard of a checkpoint table. As in the KCL, a lease held by a live
// owner is one whose leaseCounter moves: the owner's commits and its lease renewer (every
// third of WithCheckpointLeaseDuration while it reads the shard) increment it. A job that
// finds another owner's lease either refuses to run alongside it (the default: it watches
// the counter for one lease duration, takes the lease if the counter stood still, and fails
// if it moved) or, with WithCheckpointTakeover(), takes it at once. Every write of the
// table is conditional on the lease counter and owner last seen, so the job that lost a
// lease finds out at its next commit or renewal, logs it, and stops reading the shard: there
// are never two writers.

// Resume is where a leased shard is read from: not at all when its item says SHARD_END
// (Read false); after its checkpoint (Seq, Sub) when that is a sequence number; otherwise
// from its own start (Seq "").
type Resume struct {
	Read bool
	Seq  string
	Sub  int64
}

// AcquireAll takes the leases of shards for this job and returns where each is read from.
// Without Config.Takeover, leases of other owners are watched for one lease duration, all at
// once, before they are taken or refused.
func (c *Checkpointer) AcquireAll(ctx context.Context, shards []Shard) ([]Resume, error) {
	out := make([]Resume, len(shards))
	type watched struct {
		i    int
		seen leasetable.Lease
	}
	var watch []watched
	for i, d := range shards {
		if !c.cfg.Takeover {
			cur, ok, err := c.table.Get(ctx, d.ID)
			if err != nil {
				return nil, fmt.Errorf("kinesisio: checkpoint table %s: %w", c.cfg.Table, err)
			}
			if ok && cur.Owner != "" && cur.Owner != c.cfg.Owner && cur.Checkpoint != leasetable.ShardEnd {
				watch = append(watch, watched{i, cur})
				continue
			}
		}
		var err error
		if out[i], err = c.acquire(ctx, d); err != nil {
			return nil, err
		}
	}
	if len(watch) == 0 {
		return out, nil
	}
	first := watch[0]
	log.Infof(ctx, "kinesisio: %d shard(s) of stream %s are leased by other owners in checkpoint table %s (%s by %q at lease counter %d); watching their lease counters for %v to tell a live owner from a dead one", len(watch), shards[first.i].Stream, c.cfg.Table, first.seen.ShardID, first.seen.Owner, first.seen.Counter, c.cfg.LeaseDuration)
	timer := time.NewTimer(c.cfg.LeaseDuration)
	select {
	case <-ctx.Done():
		timer.Stop()
		return nil, fmt.Errorf("kinesisio: watching the leases of checkpoint table %s: %w", c.cfg.Table, ctx.Err())
	case <-timer.C:
	}
	for _, w := range watch {
		d := shards[w.i]
		cur, ok, err := c.table.Get(ctx, d.ID)
		if err != nil {
			return nil, fmt.Errorf("kinesisio: checkpoint table %s: %w", c.cfg.Table, err)
		}
		if !ok || cur.Checkpoint == leasetable.ShardEnd || (cur.Owner == w.seen.Owner && cur.Counter == w.seen.Counter) {
			if ok && cur.Checkpoint != leasetable.ShardEnd {
				out[w.i], err = c.takeExpired(ctx, d, cur)
			} else {
				out[w.i], err = c.acquire(ctx, d)
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		return nil, c.refuse(ctx, d, w.seen, cur)
	}
	return out, nil
}

// refuse is the error of a job that found d's lease held by a live owner.
func (c *Checkpointer) refuse(ctx context.Context, d Shard, seen, cur leasetable.Lease) error {
	err := &refusedError{fmt.Sprintf("kinesisio: checkpoint table %s: shard %s of stream %s is leased by owner %q, which is alive (its lease counter went from %d to %d within %v); this job (owner %q) refuses to read alongside it: stop that job first, or take its leases over with WithCheckpointTakeover()", c.cfg.Table, d.ID, d.Stream, cur.Owner, seen.Counter, cur.Counter, c.cfg.LeaseDuration, c.cfg.Owner)}
	log.Error(ctx, err.Error())
	return errkind.Mark(errkind.LeaseHeld, err)
}

// refusedError is the error of a job that refuses to read alongside a live owner: an
// answer of the table, not a failure to reach it.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// takeExpired takes seen, a lease whose counter stood still for a lease duration; if it
// moved after all, the job refuses.
func (c *Checkpointer) takeExpired(ctx context.Context, d Shard, seen leasetable.Lease) (Resume, error) {
	s := c.shard(d.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := c.table.TakeOverExpired(ctx, seen, c.cfg.Owner)
	if errors.Is(err, leasetable.ErrLeaseInUse) {
		cur, _, gerr := c.table.Get(ctx, d.ID)
		if gerr != nil {
			return Resume{}, fmt.Errorf("kinesisio: checkpoint table %s: %w", c.cfg.Table, gerr)
		}
		return Resume{}, c.refuse(ctx, d, seen, cur)
	}
	if err != nil {
		return Resume{}, fmt.Errorf("kinesisio: checkpoint table %s: %w", c.cfg.Table, err)
	}
	log.Warnf(ctx, "kinesisio: took over the expired lease of %v in checkpoint table %s from owner %q (its lease counter stayed at %d for %v; now %d)", d, c.cfg.Table, seen.Owner, seen.Counter, c.cfg.LeaseDuration, l.Counter)
	return c.leasedLocked(ctx, s, d, l), nil
}

// acquire takes d's lease for this job (creating its item, or taking it over from another
// owner at once, saying so) and returns where d is read from.
func (c *Checkpointer) acquire(ctx context.Context, d Shard) (Resume, error) {
	want := leasetable.Lease{
		ShardID:         d.ID,
		Checkpoint:      d.Initial,
		StartingHashKey: d.StartingHashKey,
		EndingHashKey:   d.EndingHashKey,
		Parents:         d.Parents,
	}
	s := c.shard(d.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	l, prev, err := c.table.Acquire(ctx, want, c.cfg.Owner)
	if err != nil {
		return Resume{}, fmt.Errorf("kinesisio: checkpoint table %s: %w", c.cfg.Table, err)
	}
	if prev != nil && prev.Owner != "" && prev.Checkpoint != leasetable.ShardEnd { // a lease without owner (KCL's unassigned leases) is simply taken
		log.Warnf(ctx, "kinesisio: took over the lease of %v in checkpoint table %s from owner %q (lease counter %d, now %d; WithCheckpointTakeover): that job, if it still runs, stops reading the shard at its next commit or lease renewal", d, c.cfg.Table, prev.Owner, prev.Counter, l.Counter)
	}
	return c.leasedLocked(ctx, s, d, l), nil
}

// leasedLocked records l as d's lease and returns where d is read from. s.mu is held.
func (c *Checkpointer) leasedLocked(ctx context.Context, s *shardLease, d Shard, l leasetable.Lease) Resume {
	s.lease, s.lost, s.written, s.stream = l, nil, time.Now(), d.Stream
	switch {
	case l.Checkpoint == leasetable.ShardEnd:
		log.Infof(ctx, "kinesisio: %v is at SHARD_END in checkpoint table %s; it is not read again", d, c.cfg.Table)
		return Resume{}
	case leasetable.IsSequence(l.Checkpoint):
		log.Infof(ctx, "kinesisio: %v resumes after %s/%d, its checkpoint in table %s", d, l.Checkpoint, l.Sub, c.cfg.Table)
		return Resume{Read: true, Seq: l.Checkpoint, Sub: l.Sub}
	}
	return Resume{Read: true}
}

// LostTo returns the owner that holds shard's lease now, if a commit or renewal found that
// another owner took it.
func (c *Checkpointer) LostTo(shard string) (owner string, lost bool) {
	s := c.shard(shard)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		return "", false
	}
	return s.lost.Owner, true
}

// CallStarted says a reader call on d began on this worker: its lease is renewed while the
// shard is read here.
func (c *Checkpointer) CallStarted(d Shard) {
	s := c.shard(d.ID)
	s.mu.Lock()
	s.calls++
	if s.lease.ShardID == "" {
		s.lease.ShardID, s.stream = d.ID, d.Stream
	}
	s.mu.Unlock()
	c.mu.Lock()
	if !c.renewing {
		c.renewing = true
		go c.renew()
	}
	c.mu.Unlock()
}

// CallEnded says a reader call on d, which CallStarted announced, ended; resumes says the
// runner will call again for the rest of the shard (a residual), so the lease is renewed
// until then.
func (c *Checkpointer) CallEnded(d Shard, resumes bool) {
	s := c.shard(d.ID)
	s.mu.Lock()
	s.calls--
	s.seen = time.Time{}
	if resumes {
		s.seen = time.Now()
	}
	s.mu.Unlock()
}

// renew is the lease renewer: every third of the lease duration it increments the counter
// of each lease held and read on this worker (a call running, or one that ended with a
// residual within a lease duration) that no commit wrote in that time. It ends when no
// shard is read here, so a job that stops being called stops renewing, as a dead one would.
func (c *Checkpointer) renew() {
	every := c.cfg.LeaseDuration / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		if c.renewOnce(every) {
			continue
		}
		c.mu.Lock()
		if !c.anyActiveLocked() {
			c.renewing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

// active reports whether s is held and read on this worker. s.mu is held.
func (c *Checkpointer) active(s *shardLease, now time.Time) bool {
	return s.lost == nil && s.lease.Checkpoint != leasetable.ShardEnd &&
		(s.lease.Owner == c.cfg.Owner || s.lease.Owner == "") &&
		(s.calls > 0 || now.Sub(s.seen) < c.cfg.LeaseDuration)
}

func (c *Checkpointer) anyActiveLocked() bool {
	now := time.Now()
	for _, s := range c.shards {
		s.mu.Lock()
		a := c.active(s, now)
		s.mu.Unlock()
		if a {
			return true
		}
	}
	return false
}

// renewOnce renews the active leases not written within every; it reports whether any
// lease was active.
func (c *Checkpointer) renewOnce(every time.Duration) bool {
	c.mu.Lock()
	shards := make([]*shardLease, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	any := false
	for _, s := range shards {
		s.mu.Lock()
		now := time.Now()
		if c.active(s, now) {
			any = true
			if now.Sub(s.written) >= every {
				c.renewLocked(s)
			}
		}
		s.mu.Unlock()
	}
	return any
}

// renewLocked renews s's lease. s.mu is held.
func (c *Checkpointer) renewLocked(s *shardLease) {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	l, err := c.table.Renew(ctx, s.lease, c.cfg.Owner)
	var lost *leasetable.LostError
	switch {
	case errors.As(err, &lost):
		c.loseLocked(ctx, s, lost, s.stream)
	case err != nil:
		if c.renewalFailed() {
			log.Warnf(ctx, "kinesisio: renewing the lease of shard %s in checkpoint table %s failed; the renewer retries every %v and warns again only after a renewal or a commit succeeds: %v", s.lease.ShardID, c.cfg.Table, c.cfg.LeaseDuration/3, err)
		} else {
			log.Debugf(ctx, "kinesisio: renewing the lease of shard %s in checkpoint table %s failed again: %v", s.lease.ShardID, c.cfg.Table, err)
		}
	default:
		s.lease, s.written = l, time.Now()
		c.stats.renewals.Add(1)
		if d := c.renewalSucceeded(); d > 0 {
			log.Infof(ctx, "kinesisio: lease renewals in checkpoint table %s succeed again after %v of failures", c.cfg.Table, d.Round(time.Second))
		}
	}
}

// renewalFailed records a failed renewal; it reports whether it is the first since the
// last success, the one to warn about.
func (c *Checkpointer) renewalFailed() bool {
	c.renewMu.Lock()
	defer c.renewMu.Unlock()
	if !c.renewFailing.IsZero() {
		return false
	}
	c.renewFailing = time.Now()
	return true
}

// renewalSucceeded records a successful write of a lease, a renewal or a commit: the table
// answers again, so the next failed renewal is a new outage's and warns. It returns how
// long the renewals had been failing, 0 if they had not.
func (c *Checkpointer) renewalSucceeded() time.Duration {
	c.renewMu.Lock()
	defer c.renewMu.Unlock()
	if c.renewFailing.IsZero() {
		return 0
	}
	d := time.Since(c.renewFailing)
	c.renewFailing = time.Time{}
	return d
}
