package producer

import (
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
)

// minBatchWait is the shortest wait for rate-limiter tokens: without it a writer held at
// 1000 records/s would send a request per record as each token arrives.
const minBatchWait = 20 * time.Millisecond

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
			if p.limiter != nil && shard != autoQueue {
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
