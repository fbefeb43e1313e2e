package kinesisio

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/readapi"
)

// The read-ahead: a worker's polling shards keep fetching while the runner works on other
// shards. A runner runs a bundle's restrictions one after another (Prism, and Flink with
// fewer slots than shards), so without it a worker reads one shard at a time. Each shard of
// a read has one entry per worker: the GetRecords answers fetched past where its last call
// stopped (or, before its first call, from the start of its restriction, once the runner
// sized it), and the iterator that continues after them. A fetching goroutine fills the
// entry within the shard's budget: the pacer's clock (worker_state.go), the wait after a
// large answer, WithIdleTimeBetweenReads, and it stops at the tip of the shard, at its end and
// past the read's end, so a caught-up shard makes no call the reader would not have made.
// Memory is bounded per read and worker (WithMaxReadAheadBytes) and per shard (a quarter of
// it).
//
// A call takes the entry only if its restriction starts exactly where the entry does;
// otherwise (a restriction resumed at an earlier checkpoint, or first read elsewhere) the
// entry is dropped and counted: the positions a call reads are always its restriction's.
// While a call holds the entry, every fetch of the call goes through it (the call's own
// one-page prefetch is the same mechanism), and the call leaves it, re-keyed at its residual's
// start, when it checkpoints. Without read-ahead (WithoutReadAhead) an entry holds one page
// ahead while its call runs, as the poller always did, and only its iterator between calls.

const (
	// defaultReadAheadBytes is WithMaxReadAheadBytes's default.
	defaultReadAheadBytes = 64 << 20
	// readAheadShardShare is the part of the read's cap one shard may hold.
	readAheadShardShare = 4
	// readAheadIdleAge is how long an entry no call took lives; it is then dropped.
	readAheadIdleAge = 2 * time.Minute
	// readAheadFetches bounds the fetching goroutines of a worker that call Kinesis at once.
	readAheadFetches = 16
	// recordOverhead is what a decoded record holds beside its data, partition key and
	// sequence number (its struct, pointers and arrival time), for the memory estimate.
	recordOverhead = 120
)

// aheadPage is one GetRecords answer an entry holds.
type aheadPage struct {
	// it is the iterator the answer was fetched with.
	it string
	f  fetchResult
	// from is the first record not read yet: a call stopped inside the page.
	from int
	// counted says the page's records were added to the byte rate before.
	counted bool
	// mem is the page's memory estimate (pageMemory), data the bytes of its unread records.
	mem, data int64
	// parked says the page was fetched while no call held the entry.
	parked bool
}

// pageMemory estimates what the records of an answer hold in memory.
func pageMemory(f fetchResult) int64 {
	if f.out == nil {
		return 0
	}
	return recordsMemory(f.out.Records)
}

// recordsMemory estimates what decoded records hold in memory.
func recordsMemory(records []types.Record) int64 {
	n := int64(0)
	for i := range records {
		r := &records[i]
		n += int64(len(r.Data)+len(aws.ToString(r.PartitionKey))+len(aws.ToString(r.SequenceNumber))) + recordOverhead
	}
	return n
}

// aheadEntry is one shard's read-ahead in a worker. The cache's mu guards its fields.
type aheadEntry struct {
	key shardKey
	d   shardDescriptor
	// spec configures the fetches; api makes them, with counts of its own.
	spec *readSpec
	api  *readapi.Client
	// start is where the first page (or, with none, the tail) starts.
	start startKey
	pages []aheadPage
	mem   int64
	// tail is the iterator after the last page, issued at issued; "" before the entry
	// opened its iterator (open) or after the shard's end.
	tail   string
	issued time.Time
	// open, when set, is how a sized entry opens its iterator before its first fetch.
	open func(ctx context.Context) (string, error)
	// endMs is the read's end, when it has one: no page past it is fetched ahead.
	endMs int64

	owned    bool // a call holds it
	asked    bool // its call wants the next page now
	fetching bool // its goroutine runs
	inflight bool // a GetRecords or GetShardIterator call is out
	// atTip, ended, failed and pastEnd stop the fetching: the newest answer found the shard
	// caught up, found its end, failed (the error is the last page), or reached past endMs.
	atTip, ended, failed, pastEnd bool
	dropped                       bool
	// readyAt is when the shard may be read again after a large answer; pausedUntil, while
	// the goroutine waits for it or the pacer, when it will fetch.
	readyAt, pausedUntil, lastCall time.Time
	// newestLag is the newest answer's MillisBehindLatest: how far the shard's tip is past
	// the last page, for the backlog.
	newestLag *int64
	// openedAhead says the read-ahead opened the iterator (GetShardIterator) for a call that
	// has not taken the entry yet.
	openedAhead bool
	// openErr is why the read-ahead could not open the iterator of a sized entry: the error
	// of the call that waited for it.
	openErr error
	touched time.Time
	changed chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
}

// aheadStats is what a read's entries did in the worker since a call of the read last
// reported it.
type aheadStats struct {
	api                               readapi.Stats
	pages, droppedPages, droppedCalls int64
	droppedBytes                      int64
	expired                           int64
}

// readAheadCache holds a worker's entries.
type readAheadCache struct {
	mu      sync.Mutex
	entries map[shardKey]*aheadEntry
	held    map[string]int64 // read ID → memory its entries and drains hold
	stats   map[string]*aheadStats
	waiting map[string][]capWaiter // read ID → entries and drains stopped by the read's cap
	slots   chan struct{}
	sweeper bool
	// readers holds, per read ID, the reader that fetches for the restrictions sized before
	// a call read them.
	readers map[string]*shardReader
}

// fetchReader returns the reader that reads ahead the sized restrictions of spec's read.
func (c *readAheadCache) fetchReader(spec readSpec) (*shardReader, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.readers[spec.ReadID]; r != nil {
		return r, nil
	}
	r, err := newFetchReader(context.Background(), spec)
	if err != nil {
		return nil, err
	}
	c.readers[spec.ReadID] = r
	return r, nil
}

// readAhead is the worker process's read-ahead.
var readAhead = &readAheadCache{
	entries: map[shardKey]*aheadEntry{},
	held:    map[string]int64{},
	stats:   map[string]*aheadStats{},
	waiting: map[string][]capWaiter{},
	slots:   make(chan struct{}, readAheadFetches),
	readers: map[string]*shardReader{},
}

func (c *readAheadCache) statsLocked(read string) *aheadStats {
	s := c.stats[read]
	if s == nil {
		s = &aheadStats{}
		c.stats[read] = s
	}
	return s
}

// takeStats returns what read's entries did since the last take, and the memory they hold.
func (c *readAheadCache) takeStats(read string) (aheadStats, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats[read]
	delete(c.stats, read)
	if s == nil {
		return aheadStats{}, c.held[read]
	}
	return *s, c.held[read]
}

func (c *readAheadCache) newEntry(key shardKey, d shardDescriptor, r *shardReader, start startKey) *aheadEntry {
	ctx, cancel := context.WithCancel(context.Background())
	e := &aheadEntry{key: key, d: d, spec: &r.spec, api: r.api.Fork(), start: start,
		changed: make(chan struct{}), ctx: ctx, cancel: cancel, touched: time.Now()}
	return e
}

// notifyLocked wakes whoever waits on e.
func (e *aheadEntry) notifyLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// on says the read reads ahead.
func (e *aheadEntry) on() bool { return e.spec.ReadAheadBytes > 0 }

// mayFetchLocked says whether e's goroutine may make its next call; capped says that only the
// caps stop it.
func (c *readAheadCache) mayFetchLocked(e *aheadEntry) (ok, capped bool) {
	if e.dropped || e.failed || e.ended || (e.tail == "" && e.open == nil) {
		return false, false
	}
	if e.asked {
		return true, false
	}
	if e.atTip || e.pastEnd || !e.on() {
		return false, false
	}
	if c.overCapLocked(e.key.read, e.mem, e.spec.ReadAheadBytes) {
		return false, true
	}
	return true, false
}

// overCapLocked says whether a shard that holds mem of read, whose cap is max, must wait for
// room before it holds more: its quarter of the cap, or the read's whole cap, is reached.
func (c *readAheadCache) overCapLocked(read string, mem, max int64) bool {
	return mem >= max/readAheadShardShare || c.held[read] >= max
}

// kickLocked starts e's goroutine if it may fetch.
func (c *readAheadCache) kickLocked(e *aheadEntry) {
	if e.fetching {
		return
	}
	ok, capped := c.mayFetchLocked(e)
	if !ok {
		if capped {
			c.waitLocked(e.key.read, e)
		}
		return
	}
	e.fetching = true
	go c.run(e)
}

// A capWaiter is what a read's cap stopped until memory is freed: a polling entry, or the
// drain of a parked subscription (fetch_efo_drain.go).
type capWaiter interface {
	// roomLocked lets it look again; c.mu is held.
	roomLocked(c *readAheadCache)
}

// roomLocked lets an entry that the read's cap stopped fetch again, if it may.
func (e *aheadEntry) roomLocked(c *readAheadCache) { c.kickLocked(e) }

// waitLocked keeps w, which read's cap stopped, until memory is freed.
func (c *readAheadCache) waitLocked(read string, w capWaiter) {
	c.waiting[read] = append(c.waiting[read], w)
}

// unwaitLocked forgets w, dropped or closed, so that it is not kept for a room that it no
// longer needs.
func (c *readAheadCache) unwaitLocked(read string, w capWaiter) {
	ws := slices.DeleteFunc(c.waiting[read], func(x capWaiter) bool { return x == w })
	if len(ws) == 0 {
		delete(c.waiting, read)
		return
	}
	c.waiting[read] = ws
}

// roomLocked lets what read's cap stopped look again, now that memory was freed.
func (c *readAheadCache) roomLocked(read string) {
	ws := c.waiting[read]
	delete(c.waiting, read)
	for _, w := range ws {
		w.roomLocked(c)
	}
}

// run fetches e's pages while it may.
func (c *readAheadCache) run(e *aheadEntry) {
	for {
		c.mu.Lock()
		if ok, _ := c.mayFetchLocked(e); !ok {
			e.fetching = false
			e.pausedUntil = time.Time{}
			c.kickLocked(e) // queues it on the read's cap, if that is what stops it
			e.notifyLocked()
			c.mu.Unlock()
			return
		}
		// The shard's budget: the pacer's next read, the wait after a large answer, and
		// the idle time between reads.
		// A call waiting for the page pauses for the first two (next), and waits out the
		// third, as a poller always did.
		now := time.Now()
		paced := maxTime(now.Add(calls.wait(readsOf(e.key), now)), e.readyAt)
		due := paced
		if idle := e.spec.IdleTimeBetweenReads; idle > 0 && !e.lastCall.IsZero() {
			due = maxTime(due, e.lastCall.Add(idle))
		}
		if paced.After(now) && !paced.Equal(e.pausedUntil) {
			e.pausedUntil = paced
			e.notifyLocked()
		}
		c.mu.Unlock()
		if err := backoff.Sleep(e.ctx, time.Until(due)); err != nil {
			c.stopped(e)
			return
		}
		c.mu.Lock()
		e.pausedUntil = time.Time{}
		if ok, _ := c.mayFetchLocked(e); !ok {
			c.mu.Unlock()
			continue
		}
		it, open := e.tail, e.open
		e.inflight = true
		c.mu.Unlock()

		c.slots <- struct{}{}
		var f fetchResult
		if it == "" {
			var err error
			it, err = open(e.ctx)
			if err == nil {
				f = e.fetch(it)
			} else {
				f = fetchResult{err: err}
			}
		} else {
			f = e.fetch(it)
		}
		<-c.slots
		c.add(e, it, open != nil, f)
	}
}

// stopped ends e's goroutine after its context was cancelled (the entry was dropped).
func (c *readAheadCache) stopped(e *aheadEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.fetching, e.inflight = false, false
	e.notifyLocked()
}

// fetch calls GetRecords with it for e.
func (e *aheadEntry) fetch(it string) fetchResult {
	f := fetchResult{sent: time.Now()}
	f.out, f.err = e.api.GetRecords(e.ctx, e.d, it, e.spec.MaxRecordsPerRead)
	f.received = time.Now()
	return f
}

// add keeps the answer f, fetched with it (opened says the iterator was opened for it).
func (c *readAheadCache) add(e *aheadEntry, it string, opened bool, f fetchResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.inflight = false
	st := c.statsLocked(e.key.read)
	st.api = st.api.Add(e.api.TakeStats())
	if e.dropped {
		st.droppedCalls++
		e.fetching = false
		e.notifyLocked()
		return
	}
	if opened {
		e.open = nil
		if it == "" {
			// The sized entry could not open its iterator: a call waiting for it gets the
			// error (and rides it out like its own open's); a later call opens it itself.
			e.failed, e.openErr = true, f.err
			e.notifyLocked()
			return
		}
		e.openedAhead = true
	}
	pg := aheadPage{it: it, f: f, mem: pageMemory(f), parked: !e.owned}
	e.asked = false
	e.lastCall = f.sent
	if f.err != nil {
		e.failed = true
	} else {
		out := f.out
		pg.data = dataBytes(out.Records)
		e.readyAt = f.received.Add(largeAnswerWait(answerBytes(out.Records)))
		e.tail, e.issued = aws.ToString(out.NextShardIterator), f.received
		e.ended = out.NextShardIterator == nil
		e.atTip = out.MillisBehindLatest != nil && *out.MillisBehindLatest == 0
		e.newestLag = out.MillisBehindLatest
		if n := len(out.Records); e.endMs > 0 && n > 0 && aws.ToTime(out.Records[n-1].ApproximateArrivalTimestamp).UnixMilli() > e.endMs {
			e.pastEnd = true
		}
	}
	if pg.parked {
		st.pages++
	}
	e.pages = append(e.pages, pg)
	e.mem += pg.mem
	c.held[e.key.read] += pg.mem
	e.touched = time.Now()
	e.notifyLocked()
}

// next returns e's next page for its call, waiting for it to be fetched. When nothing is
// held and the goroutine waits for the shard's budget longer than a call should (a large
// answer's wait, the pacer), an unbounded call gets the wait back to pause for instead.
func (c *readAheadCache) next(ctx context.Context, e *aheadEntry, bounded bool) (aheadPage, time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if len(e.pages) > 0 {
			pg := e.pages[0]
			e.pages = e.pages[1:]
			c.releaseLocked(e, pg.mem)
			c.kickLocked(e)
			return pg, 0, nil
		}
		if !e.fetching {
			e.asked = true
			e.atTip = false // the call read the tip and asks again
			c.kickLocked(e)
			if !e.fetching {
				if e.openErr != nil {
					return aheadPage{}, 0, e.openErr
				}
				return aheadPage{}, 0, errNoPage // a bug: nothing can be fetched
			}
		} else {
			e.asked = true
		}
		if wait := time.Until(e.pausedUntil); !bounded && wait > 0 && !e.inflight {
			return aheadPage{}, wait, nil
		}
		ch := e.changed
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			c.mu.Lock()
			return aheadPage{}, 0, ctx.Err()
		case <-ch:
		}
		c.mu.Lock()
	}
}

// errNoPage is next's error when an entry can fetch nothing more.
var errNoPage = errReadAhead("kinesisio: the read-ahead of the shard has no iterator to fetch with")

type errReadAhead string

func (e errReadAhead) Error() string { return string(e) }

// releaseLocked forgets mem bytes e held.
func (c *readAheadCache) releaseLocked(e *aheadEntry, mem int64) {
	e.mem -= mem
	c.releaseHeldLocked(e.key.read, mem)
}

// releaseHeldLocked forgets mem bytes of read held, by an entry or a drain, and lets
// what the cap stopped look again.
func (c *readAheadCache) releaseHeldLocked(read string, mem int64) {
	c.held[read] -= mem
	if c.held[read] <= 0 {
		delete(c.held, read)
	}
	if mem > 0 {
		c.roomLocked(read)
	}
}

// prefetch asks e for its next page now, whatever the caps: its call will read it.
func (c *readAheadCache) prefetch(e *aheadEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(e.pages) == 0 && !e.atTip {
		e.asked = true
		c.kickLocked(e)
	}
}

// restart makes e continue from it, after its call renewed an expired iterator or rode out
// a throttled answer (the failed answer was its last page).
func (c *readAheadCache) restart(e *aheadEntry, it string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.failed, e.atTip, e.ended, e.tail, e.issued = false, false, false, it, time.Now()
}

// held reports the data bytes e holds: the rest of the shard the read-ahead fetched.
func (c *readAheadCache) heldData(e *aheadEntry) (int64, *int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, pg := range e.pages {
		n += pg.data
	}
	return n, e.newestLag
}

// owned returns a new entry held by a call that opened the shard itself at it.
func (c *readAheadCache) owned(key shardKey, d shardDescriptor, r *shardReader, start startKey, it string) *aheadEntry {
	e := c.newEntry(key, d, r, start)
	e.owned, e.tail, e.issued = true, it, time.Now()
	return e
}

// take gives a call starting at start the entry of key, if there is one exactly there whose
// iterator is young enough or that holds pages. Any other entry of key is dropped.
func (c *readAheadCache) take(key shardKey, start startKey, now time.Time) (*aheadEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil {
		return nil, false
	}
	delete(c.entries, key)
	stale := len(e.pages) == 0 && !e.fetching && (e.tail == "" || now.Sub(e.issued) > iteratorReuseAge)
	if e.owned || e.start != start || stale || e.failed && len(e.pages) == 0 {
		c.dropLocked(e)
		return nil, false
	}
	e.owned, e.touched, e.openedAhead = true, now, false
	return e, true
}

// hasPages says whether key's entry at start holds pages a call can read without a call to
// Kinesis.
func (c *readAheadCache) hasPages(key shardKey, start startKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	return e != nil && e.start == start && len(e.pages) > 0
}

// park leaves e, held by a call that checkpointed, for the call that resumes at start.
// inside, when set, is the rest of the page the call stopped inside. Without read-ahead
// only the iterator is left, when the call did not stop inside a page.
func (c *readAheadCache) park(e *aheadEntry, start startKey, inside *aheadPage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[e.key]; old != nil && old != e {
		c.dropLocked(old)
	}
	if !e.on() {
		it := e.tail
		if len(e.pages) > 0 {
			it = e.pages[0].it
		}
		issued := e.issued
		if len(e.pages) > 0 {
			issued = e.pages[0].f.sent
		}
		failed := e.failed && len(e.pages) == 0
		c.dropLocked(e)
		if inside != nil || it == "" || failed {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.entries[e.key] = &aheadEntry{key: e.key, d: e.d, spec: e.spec, api: e.api, start: start, tail: it, issued: issued,
			changed: make(chan struct{}), ctx: ctx, cancel: cancel, touched: time.Now()}
		c.sweepLocked()
		return
	}
	if inside != nil {
		e.pages = append([]aheadPage{*inside}, e.pages...)
		e.mem += inside.mem
		c.held[e.key.read] += inside.mem
	}
	e.start, e.owned, e.asked, e.touched = start, false, false, time.Now()
	c.entries[e.key] = e
	c.kickLocked(e)
	c.sweepLocked()
}

// size starts reading key ahead from its restriction's start before its first call, when
// the read reads ahead and nothing is known of the shard here. open opens the iterator.
func (c *readAheadCache) size(key shardKey, d shardDescriptor, r *shardReader, start startKey, endMs int64, open func(context.Context) (string, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[key] != nil || c.held[key.read] >= r.spec.ReadAheadBytes {
		return
	}
	e := c.newEntry(key, d, r, start)
	e.open, e.endMs = open, endMs
	c.entries[key] = e
	c.kickLocked(e)
	c.sweepLocked()
}

// drop drops e, held by a call that ends without a checkpoint to leave it for.
func (c *readAheadCache) drop(e *aheadEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
	c.dropLocked(e)
}

// forget drops key's entry, once its shard or its part of the read is done.
func (c *readAheadCache) forget(key shardKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil {
		delete(c.entries, key)
		c.dropLocked(e)
	}
}

// dropLocked stops e and counts what it fetched that no call will read. The caller has
// removed it from the entries.
func (c *readAheadCache) dropLocked(e *aheadEntry) {
	if e.dropped {
		return
	}
	e.dropped = true
	e.cancel()
	st := c.statsLocked(e.key.read)
	for _, pg := range e.pages {
		st.droppedPages++
		st.droppedCalls++
		st.droppedBytes += pg.data
	}
	if e.openedAhead {
		st.droppedCalls++ // the GetShardIterator of a sized entry no call took
	}
	mem := e.mem
	e.pages = nil
	c.unwaitLocked(e.key.read, e)
	c.releaseLocked(e, mem)
	e.notifyLocked()
}

// sweepLocked starts the goroutine that drops the entries no call took for
// readAheadIdleAge, if it is not running.
func (c *readAheadCache) sweepLocked() {
	if c.sweeper {
		return
	}
	c.sweeper = true
	go func() {
		tick := time.NewTicker(readAheadIdleAge / 4)
		defer tick.Stop()
		for range tick.C {
			c.mu.Lock()
			c.expireLocked(time.Now())
			if len(c.entries) == 0 {
				c.sweeper = false
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
		}
	}()
}

// expireLocked drops the entries no call took for readAheadIdleAge before now: their
// restrictions moved to another worker, or their read ended.
func (c *readAheadCache) expireLocked(now time.Time) {
	for k, e := range c.entries {
		if !e.owned && now.Sub(e.touched) > readAheadIdleAge {
			delete(c.entries, k)
			c.statsLocked(k.read).expired++
			c.dropLocked(e)
		}
	}
}
