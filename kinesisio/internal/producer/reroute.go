package producer

import (
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/route"
)

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

// place routes it to its shard's aggregate or queue, or on a stream that distributes
// records itself, to the one queue as a record of its own. p.mu is held.
func (p *Producer) place(it *batch.Item) {
	if p.auto {
		if p.cfg.Limits.Aggregate {
			p.stats.unaggregated.Add(1)
		}
		p.enqueue(batch.Raw(autoQueue, it))
		return
	}
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

// requeue puts a retried entry back: into its queue when its shard is still current, or,
// for an aggregate whose shard is gone, as user records routed afresh. p.mu is held.
func (p *Producer) requeue(e *batch.Entry) {
	if p.auto != (e.Shard == autoQueue) {
		// The stream switched strategy since e was queued: place its records afresh.
		p.placeAgain(e.Items)
		return
	}
	if _, ok := p.m.Shard(e.Shard); ok || !e.Aggregated() || p.auto {
		if !e.Aggregated() && !p.auto {
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
