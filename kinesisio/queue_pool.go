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
	// calls is, per slot, what each of its calls in this process emitted, oldest first,
	// while some of it is held: what a rewind of the slot takes back (rewind).
	calls map[int64][]slotCall
}

// slotCall is what one call of a slot emitted: the call's position in the slot's
// restriction and its records.
type slotCall struct {
	pos     int64
	entries []queue.Entry
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
		MaxBufferedBytes:  poolBufferBytes,
		IdleStop:          poolIdleStop(spec),
		Policy:            spec.Retry.policy(),
	})
	p := &pooled{pool: pool, settler: pool.Settler(), slots: map[int64]bool{}, calls: map[int64][]slotCall{}}
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

// poolIdleStop is how long a pool receives with no slot taking from it before it stops
// and lets go of what it buffered: long beside a runner's pause between two calls of a
// worker's slots (tens of milliseconds; seconds under load), short beside the processing
// timeout for which the records of a job that ended in a process that lives on (a job run
// in-process, or in a LOOPBACK worker) would otherwise stay invisible. A stop too early
// costs nothing but a restart of the receives: the next call starts the pool again.
func poolIdleStop(spec queueSpec) time.Duration {
	return max(30*time.Second, 10*spec.MaxCallTime)
}

// poolBufferBytes bounds the data a pool buffers, whatever the records' size: a call's
// 10,000 records of 1 MiB would be 10 GiB.
const poolBufferBytes = 64 << 20

// join records that slot reads from the pool in this process.
func (c *poolCache) join(spec queueSpec, slot int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pools[spec.key()]; p != nil {
		p.slots[slot] = true
	}
}

// emitted records what slot's call at pos emitted, and forgets the slot's oldest calls
// none of whose records is held any more (settled, or let go).
func (c *poolCache) emitted(p *pooled, slot, pos int64, entries []queue.Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := p.calls[slot]
	for len(calls) > 0 && len(p.pool.Holder().Holding(calls[0].entries)) == 0 {
		calls = calls[1:]
	}
	if len(entries) > 0 {
		calls = append(calls, slotCall{pos: pos, entries: entries})
	}
	p.calls[slot] = calls
}

// rewind is told that slot's call at pos begins. A slot's positions only grow while the
// runner keeps what it emitted; a call at a position this process already called the slot
// at means the runner went back to a checkpoint taken before it (a restart after a failure,
// with the worker alive) and lost what the slot emitted from there on. Those records, still
// held here, would be kept invisible until the processing timeout with nothing left to
// acknowledge them: they are let go to the queue at once, to be delivered again. It
// returns how many it let go.
func (c *poolCache) rewind(ctx context.Context, p *pooled, slot, pos int64) int {
	c.mu.Lock()
	calls := p.calls[slot]
	i := len(calls)
	for i > 0 && calls[i-1].pos >= pos {
		i--
	}
	lost := calls[i:]
	p.calls[slot] = calls[:i:i]
	c.mu.Unlock()
	var release []queue.Entry
	for _, call := range lost {
		release = append(release, p.pool.Holder().Holding(call.entries)...)
	}
	p.pool.Release(ctx, release)
	return len(release)
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
