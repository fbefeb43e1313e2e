package kinesisio

import (
	"sync"
	"time"
)

// A polling reader's ProcessElement call ends at every checkpoint, and the runner resumes
// the residual in a new call, often on the same worker a moment later. Opening a new shard
// iterator for each call doubled the API calls of an idle shard (one GetShardIterator per
// GetRecords) and spent the separate 5/s-per-shard GetShardIterator limit. So a call that
// ends at a checkpoint leaves the shard's NextShardIterator in a worker-wide memo, under the
// position its residual starts at; the next call takes it only if its restriction starts
// at exactly that position. A restriction resumed on another worker, or at another position
// (a retried bundle resumes an earlier checkpoint), finds no iterator or one for another
// position, and opens its own from the restriction: no call can read from a wrong iterator.
// The memo also keeps what the reader observed of the shard's byte rate, for the backlog.

const (
	// iteratorReuseAge is the age up to which a memorised iterator is used. Iterators
	// expire five minutes after they are issued; an older one is renewed from the position.
	iteratorReuseAge = 4 * time.Minute
	// memoIdleAge is how long a shard's memo lives without being touched (its shard moved to
	// another worker, or the read ended without the reader seeing the shard end).
	memoIdleAge = 10 * time.Minute
	// rateWindow is the span of arrival time over which the byte rate is measured, and
	// rateSamples the most responses it keeps.
	rateWindow  = 30 * time.Second
	rateSamples = 32
)

// rateSample is what one GetRecords response held: its bytes, the bytes of its first
// record, and the arrival times of its first and last record.
type rateSample struct {
	bytes, head   int64
	firstMs, last int64
}

// shardMemo is what the worker remembers of one shard of one read between calls.
type shardMemo struct {
	// resume is the position a parked iterator continues at; iterator is "" when none.
	resume   startKey
	iterator string
	issued   time.Time
	// backlogAt and backlog: the estimated unread bytes of the shard for a residual that
	// starts at backlogAt.
	backlogAt startKey
	backlog   float64
	hasBacklg bool
	samples   []rateSample
	touched   time.Time
}

// memoCache holds the worker process's shard memos, keyed like the pacer (read, stream,
// shard).
type memoCache struct {
	mu    sync.Mutex
	memos map[string]*shardMemo
	puts  int
}

// memos is the worker process's memo cache.
var memos = &memoCache{memos: map[string]*shardMemo{}}

// get returns key's memo, creating it. The caller holds c.mu.
func (c *memoCache) get(key string, now time.Time) *shardMemo {
	m := c.memos[key]
	if m == nil {
		c.puts++
		if c.puts%1024 == 0 {
			for k, old := range c.memos {
				if now.Sub(old.touched) > memoIdleAge {
					delete(c.memos, k)
				}
			}
		}
		m = &shardMemo{}
		c.memos[key] = m
	}
	m.touched = now
	return m
}

// takeIterator returns the iterator parked for key at exactly resume, if it is young enough,
// and removes it from the memo.
func (c *memoCache) takeIterator(key string, resume startKey, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.memos[key]
	if m == nil || m.iterator == "" {
		return "", false
	}
	it, at, issued := m.iterator, m.resume, m.issued
	m.iterator = ""
	if at != resume || now.Sub(issued) > iteratorReuseAge {
		return "", false
	}
	return it, true
}

// parkIterator leaves iterator, issued at issued, for the call that resumes key at resume.
func (c *memoCache) parkIterator(key string, resume startKey, iterator string, issued time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.get(key, issued)
	m.resume, m.iterator, m.issued = resume, iterator, issued
}

// dropIterator forgets key's parked iterator, if any.
func (c *memoCache) dropIterator(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.memos[key]; m != nil {
		m.iterator = ""
	}
}

// observe adds one response's bytes and arrival times to key's byte rate and returns the
// shard's estimated unread bytes given millisBehind: see estimateBacklog.
func (c *memoCache) observe(key string, s rateSample, records int, millisBehind int64, now time.Time) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.get(key, now)
	if records > 0 {
		m.samples = append(m.samples, s)
		newest := s.last
		drop := 0
		for drop < len(m.samples)-1 && (len(m.samples)-drop > rateSamples || newest-m.samples[drop].last > rateWindow.Milliseconds()) {
			drop++
		}
		m.samples = append(m.samples[:0], m.samples[drop:]...)
	}
	return estimateBacklog(m.samples, millisBehind)
}

// setBacklog records the backlog of the residual that starts at at.
func (c *memoCache) setBacklog(key string, at startKey, bytes float64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.get(key, now)
	m.backlogAt, m.backlog, m.hasBacklg = at, bytes, true
}

// backlog returns the backlog recorded for a residual of key that starts at at.
func (c *memoCache) backlog(key string, at startKey) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.memos[key]
	if m == nil || !m.hasBacklg || m.backlogAt != at {
		return 0, false
	}
	return m.backlog, true
}

// forget drops key's memo, once its shard is done.
func (c *memoCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.memos, key)
}

// estimateBacklog is a shard's unread bytes: how far the last record read is behind the tip
// of the shard, in milliseconds of arrival time (MillisBehindLatest), times the rate at
// which bytes arrived in the shard over the most recent span of arrival time read
// (the last rateSamples responses within rateWindow):
//
//	backlog = MillisBehindLatest × (Σ bytes − first record's bytes) / (last arrival − first arrival)
//
// The first record's bytes are left out because they arrived at the start of the span, not
// during it. MillisBehindLatest is how far the first unread record is behind the tip, so
// with a steady producer the bytes that arrived in those last milliseconds are those
// unread. It is 0 when the reader is caught up (MillisBehindLatest 0). Records that all
// arrived within one millisecond count as their whole bytes over one millisecond.
//
// Polling and enhanced fan-out use the same formula. With enhanced fan-out the records are
// those of the SubscribeToShard events read, and a call that stops inside an event adds the
// bytes of the event's records it left unread. An event's MillisBehindLatest is how far it
// was behind when the service sent it, which is 0 for the events a slow reader has not read
// yet (the service pushes them as records arrive, up to the client's HTTP/2 stream window):
// for an event sent caught up whose last record is more than 500 ms old on the worker's
// clock, the record's age stands for MillisBehindLatest (eventLagMs). So a reader less than
// 500 ms behind reports only the rest of the event it stopped inside.
func estimateBacklog(samples []rateSample, millisBehind int64) float64 {
	if millisBehind <= 0 || len(samples) == 0 {
		return 0
	}
	var bytes int64
	first, last := samples[0].firstMs, samples[0].last
	for _, s := range samples {
		bytes += s.bytes
		first, last = min(first, s.firstMs), max(last, s.last)
	}
	span := last - first
	if span <= 0 {
		return float64(millisBehind) * float64(bytes)
	}
	return float64(millisBehind) * float64(bytes-samples[0].head) / float64(span)
}
