package kinesisio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// Leases held by an owner that is not a beamkinesis job (a KCL worker, say) are taken over the
// way a KCL worker takes over a lease: once its lease counter has not moved for the failover
// time, its owner is taken as gone. A KCL worker renews its leases (bumps the counter) every
// third of its failover time while it runs, and leaves its id as leaseOwner when it shuts
// down, so a lease whose counter stands still for that long is one nobody holds. A lease whose
// counter moves while we watch belongs to a live worker, and the read fails rather than race
// it for the shard.

// defaultTableFailover is KCL's default failoverTimeMillis.
const defaultTableFailover = 10 * time.Second

// ownerPrefix starts the lease owner of every beamkinesis job (checkpointSpec.Owner).
const ownerPrefix = "beamkinesis-"

// foreignOwner says whether owner is another application's worker: neither nobody, nor this
// job, nor another beamkinesis job.
func foreignOwner(owner, self string) bool {
	return owner != "" && owner != self && !strings.HasPrefix(owner, ownerPrefix)
}

// leaseSighting is a lease's owner and counter as first seen, and when.
type leaseSighting struct {
	owner   string
	counter int64
	at      time.Time
}

// foreignWatch remembers when each lease was first seen, from one scan of the table, so the
// failover times of all the shards of a read run together rather than one after another.
type foreignWatch struct {
	once     sync.Once
	err      error
	mu       sync.Mutex
	sighting map[string]leaseSighting
}

// firstSighting scans the table once per checkpointer and returns when lease id was first seen.
func (c *checkpointer) firstSighting(ctx context.Context, id string) (leaseSighting, bool, error) {
	w := &c.foreign
	w.once.Do(func() {
		leases, err := c.table.Scan(ctx)
		if err != nil {
			w.err = fmt.Errorf("kinesisio: checkpoint table %s: %w", c.spec.Table, err)
			return
		}
		now := time.Now()
		w.sighting = map[string]leaseSighting{}
		for _, l := range leases {
			w.sighting[l.ShardID] = leaseSighting{owner: l.Owner, counter: l.Counter, at: now}
		}
	})
	if w.err != nil {
		return leaseSighting{}, false, w.err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.sighting[id]
	return s, ok, nil
}

// awaitForeignExpiry returns once d's lease may be acquired: at once when it has no item or is
// held by nobody or by a beamkinesis job, and for a lease of a foreign owner once its lease
// counter has stood still for the failover time. A counter that moves meanwhile means a live
// owner: the error says so.
func (c *checkpointer) awaitForeignExpiry(ctx context.Context, d shardDescriptor) error {
	cur, ok, err := c.table.Get(ctx, d.ShardID)
	if err != nil {
		return fmt.Errorf("kinesisio: checkpoint table %s: %w", c.spec.Table, err)
	}
	if !ok || !foreignOwner(cur.Owner, c.spec.Owner) {
		return nil
	}
	first, seen, err := c.firstSighting(ctx, d.ShardID)
	if err != nil {
		return err
	}
	if !seen || first.owner != cur.Owner {
		first = leaseSighting{owner: cur.Owner, counter: cur.Counter, at: time.Now()}
	}
	failover := c.spec.failover()
	if first.counter == cur.Counter {
		if wait := time.Until(first.at.Add(failover)); wait > 0 {
			log.Infof(ctx, "kinesisio: the lease of %v in checkpoint table %s is held by %q, not a beamkinesis job (a KCL worker?); taking it over if its lease counter %d stays unrenewed for %v (WithCheckpointTableFailover)", d, c.spec.Table, cur.Owner, cur.Counter, failover)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			if cur, ok, err = c.table.Get(ctx, d.ShardID); err != nil {
				return fmt.Errorf("kinesisio: checkpoint table %s: %w", c.spec.Table, err)
			}
		}
	}
	switch {
	case !ok || !foreignOwner(cur.Owner, c.spec.Owner):
		return nil
	case cur.Owner != first.owner || cur.Counter != first.counter:
		return fmt.Errorf("kinesisio: the lease of %v in checkpoint table %s is held by %q, a live worker of another application (its lease counter moved from %d to %d within %v); stop it, or wait until its leases expire, before reading the stream with this table", d, c.spec.Table, cur.Owner, first.counter, cur.Counter, failover)
	}
	log.Infof(ctx, "kinesisio: the lease of %v in checkpoint table %s was not renewed by %q for %v (lease counter still %d): its owner is gone; taking the lease over", d, c.spec.Table, cur.Owner, failover, cur.Counter)
	return nil
}

// failover is WithCheckpointTableFailover, or KCL's default.
func (s checkpointSpec) failover() time.Duration {
	if s.Failover > 0 {
		return s.Failover
	}
	return defaultTableFailover
}

// WithCheckpointTableFailover sets how long a lease of WithCheckpointTable held by another
// application's worker (a KCL worker, say) must go unrenewed, its lease counter unchanged,
// before the read takes it over: KCL's own rule for a lease whose worker is gone, with the
// same default as KCL's failoverTimeMillis, 10s. Set it to the failover time of the KCL
// application the table comes from. A lease renewed meanwhile belongs to a live worker, and
// the read fails instead of racing it. Leases held by another beamkinesis job are not
// subject to it.
func WithCheckpointTableFailover(d time.Duration) Option {
	return Option{name: "WithCheckpointTableFailover", dirs: dirRead, apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("failover time %v is not positive", d)
		}
		c.read.checkpointFailover = d
		return nil
	}}
}
