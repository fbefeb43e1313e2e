package kinesisio

import (
	"context"
	"sync"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/queue"
)

// The queue read keeps one receiver pool per read, queue side and worker process: its
// receivers long-poll the queue while the runner moves between the read's slots, and a
// slot's call drains what they received. The acknowledge step of the same read in the same
// process settles through the pool's Settler and stops the pool's Holder extending what it
// settled; on another worker it settles through a Settler of its own.

// poolKey names the pool of one read's side in the process.
type poolKey struct {
	read, arn  string
	deadLetter bool
}

// pools is the process's queue receiver pools.
var pools = &poolCache{pools: map[poolKey]*pooled{}}

type poolCache struct {
	mu    sync.Mutex
	pools map[poolKey]*pooled
}

// pooled is a pool and the slots that read from it in the process.
type pooled struct {
	pool    *queue.Pool
	settler *queue.Settler
	slots   map[int64]bool
}

func (s queueSpec) key() poolKey {
	return poolKey{read: s.ReadID, arn: s.QueueARN, deadLetter: s.DeadLetter}
}

func (s queueSpec) side() queue.Side {
	if s.DeadLetter {
		return queue.DeadLetter
	}
	return queue.Normal
}

// get returns the pool of spec's read, making it (and its client) on first use.
func (c *poolCache) get(ctx context.Context, spec queueSpec) (*pooled, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pools[spec.key()]; p != nil {
		return p, nil
	}
	client, err := newClient(ctx, spec.Client)
	if err != nil {
		return nil, err
	}
	pool := queue.NewPool(client, queue.Config{
		QueueARN:          spec.QueueARN,
		Side:              spec.side(),
		Receivers:         spec.Receivers,
		Visibility:        spec.Visibility,
		ProcessingTimeout: spec.ProcessingTimeout,
		Wait:              spec.Wait,
		MaxBuffered:       poolBuffer(spec),
		Policy:            spec.Retry.policy(),
	})
	p := &pooled{pool: pool, settler: pool.Settler(), slots: map[int64]bool{}}
	c.pools[spec.key()] = p
	return p, nil
}

// poolBuffer is how many received records a pool buffers before its receivers pause: a
// call's worth at least, so that a call finds a full call's records waiting. A runner
// runs the slots of a worker one after another (Prism puts them all in one bundle), and the
// receivers keep receiving between the calls instead of pausing after two receives each.
func poolBuffer(spec queueSpec) int {
	return max(spec.Receivers*queue.MaxBatch*2, spec.MaxRecordsPerCall)
}

// join records that slot reads from the pool in this process.
func (c *poolCache) join(spec queueSpec, slot int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pools[spec.key()]; p != nil {
		p.slots[slot] = true
	}
}

// leave records that slot finished; the pool stops (releasing what it buffered) once every
// slot that read from it in this process has finished.
func (c *poolCache) leave(ctx context.Context, spec queueSpec, slot int64) {
	c.mu.Lock()
	p := c.pools[spec.key()]
	if p == nil {
		c.mu.Unlock()
		return
	}
	delete(p.slots, slot)
	last := len(p.slots) == 0
	c.mu.Unlock()
	if last {
		p.pool.Stop(ctx)
	}
}

// settlerFor is the Settler of spec's read in this process: its pool's, if the pool is
// here, so that what is settled stops being extended; otherwise one of its own.
func (c *poolCache) settlerFor(ctx context.Context, spec queueSpec) (*queue.Settler, *queue.Holder, error) {
	p, err := c.get(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	return p.settler, p.pool.Holder(), nil
}

// defaultQueueWait is the long poll of a receive: the service's longest, so an idle queue
// costs one call per receiver per 20 s.
const defaultQueueWait = 20 * time.Second
