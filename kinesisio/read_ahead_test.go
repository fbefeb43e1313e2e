package kinesisio

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// awaitEntry waits until the read-ahead entry of key satisfies cond, or fails the test.
func awaitEntry(t *testing.T, key shardKey, what string, cond func(e *aheadEntry) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		readAhead.mu.Lock()
		e := readAhead.entries[key]
		ok := e != nil && cond(e)
		var ch <-chan struct{}
		if e != nil {
			ch = e.changed
		}
		readAhead.mu.Unlock()
		if ok {
			return
		}
		var again <-chan time.Time
		if ch == nil {
			again = time.After(5 * time.Millisecond) // no entry yet: look again
		}
		select {
		case <-ch:
		case <-again:
		case <-deadline:
			t.Fatalf("the read-ahead of %v never %s", key, what)
		}
	}
}

// watchReadAhead sums the read-ahead reports of read until the test ends.
func watchReadAhead(t *testing.T, read string) *aheadStats {
	sum := &aheadStats{}
	add := func(r string, s aheadStats) {
		if r == read {
			sum.pages += s.pages
			sum.droppedPages += s.droppedPages
			sum.droppedCalls += s.droppedCalls
			sum.droppedBytes += s.droppedBytes
			sum.expired += s.expired
		}
	}
	aheadReported = add
	t.Cleanup(func() { aheadReported = nil })
	return sum
}

// idleAtTip says e fetched up to the tip of its shard and stopped.
func idleAtTip(e *aheadEntry) bool { return e.atTip && !e.fetching }

// TestReadAheadFetchesAParkedShardForTheCallThatResumesIt reads 100 records 10 a call from
// 10-record pages: after the first call checkpoints, the read-ahead fetches the other 90
// (and the caught-up answer) while no call runs, and the calls that resume read all of them,
// in order, without one GetRecords call more.
func TestReadAheadFetchesAParkedShardForTheCallThatResumesIt(t *testing.T) {
	const stream = "ahead-parked"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	want := putNumbered(t, srv, stream, "r", 100)
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(10), WithMaxRecordsPerFetch(10))
	key := h.r.shardKey(h.d)
	sum := watchReadAhead(t, key.read)
	h.call(h.rest)
	awaitEntry(t, key, "reached the tip", idleAtTip)
	fetched := srv.CallCount("GetRecords")
	readAhead.mu.Lock()
	pages := len(readAhead.entries[key].pages)
	readAhead.mu.Unlock()
	if pages != 9 {
		t.Errorf("the read-ahead holds %d pages after the first call; want 9 (the last one caught up)", pages)
	}
	for range 9 {
		h.call(h.rest)
	}
	assertSequence(t, h.got, want)
	if n := srv.CallCount("GetRecords"); n != fetched {
		t.Errorf("%d GetRecords calls after the read-ahead held the shard; want %d: the calls read what it fetched", n, fetched)
	}
	if n := srv.CallCount("GetShardIterator"); n != 1 {
		t.Errorf("%d GetShardIterator calls; want 1", n)
	}
	if sum.pages != 9 || sum.droppedPages != 0 {
		t.Errorf("read-ahead reports %+v; want 9 pages fetched while parked, none dropped", *sum)
	}
	forgetShard(key)
}

// TestReadAheadIsDroppedWhenAnotherPositionResumes resumes the first checkpoint again after
// the read-ahead fetched past the second (a retried bundle): the entry, which starts at the
// second, is dropped and counted, and the call reads exactly its own range from its own
// iterator.
func TestReadAheadIsDroppedWhenAnotherPositionResumes(t *testing.T) {
	const stream = "ahead-dropped"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	want := putNumbered(t, srv, stream, "r", 50)
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(10), WithMaxRecordsPerFetch(10))
	key := h.r.shardKey(h.d)
	h.call(h.rest)
	first := h.rest
	h.call(h.rest)
	awaitEntry(t, key, "reached the tip", idleAtTip)
	sum := watchReadAhead(t, key.read)
	h.got = h.got[:10]
	h.rest = first
	for range 4 {
		h.call(h.rest)
	}
	assertSequence(t, h.got, want)
	// The entry held pages 3, 4 and 5, the last one caught up.
	if sum.droppedPages != 3 || sum.droppedCalls != 3 || sum.droppedBytes != int64(len("r-20"))*30 {
		t.Errorf("dropped %d pages of %d bytes, %d calls; want 3 pages of %d bytes and 3 calls", sum.droppedPages, sum.droppedBytes, sum.droppedCalls, len("r-20")*30)
	}
	if n := srv.CallCount("GetShardIterator"); n != 2 {
		t.Errorf("%d GetShardIterator calls; want 2 (the first open, and the resumed first checkpoint's)", n)
	}
	forgetShard(key)
}

// TestReadAheadKeepsWithinItsCapPerShard parks a shard holding 4 MB with a 1 MiB read-ahead:
// the shard's entry stops fetching once it holds a quarter of it (less one page).
func TestReadAheadKeepsWithinItsCapPerShard(t *testing.T) {
	const stream = "ahead-cap"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	data := make([]byte, 1000)
	for range 8 {
		var entries []types.PutRecordsRequestEntry
		for range 500 {
			entries = append(entries, types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String("k")})
		}
		putAll(t, srv.Client(), stream, entries)
	}
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(20), WithMaxRecordsPerFetch(20), WithMaxReadAheadBytes(1<<20))
	key := h.r.shardKey(h.d)
	h.call(h.rest)
	awaitEntry(t, key, "stopped at its cap", func(e *aheadEntry) bool { return !e.fetching && len(e.pages) > 0 })
	readAhead.mu.Lock()
	mem, pages, held := readAhead.entries[key].mem, len(readAhead.entries[key].pages), readAhead.held[key.read]
	readAhead.mu.Unlock()
	page := int64(20 * (1000 + recordOverhead + 1 + 56))
	if mem < (1<<20)/4-page || mem > (1<<20)/4+page || held != mem {
		t.Errorf("the entry holds %d bytes in %d pages (the read %d); want a quarter of 1 MiB within a page (%d)", mem, pages, held, page)
	}
	forgetShard(key)
	readAhead.mu.Lock()
	left := readAhead.held[key.read]
	readAhead.mu.Unlock()
	if left != 0 {
		t.Errorf("the read holds %d bytes after its shard was forgotten; want 0", left)
	}
}

// TestReadAheadBacklogIsTheHeldBytesAndTheNewestAnswer reads a 600 KB backlog 20 records a
// call while the read-ahead fetches ahead of the calls up to its cap: each residual's
// RestrictionSize, the data held plus the newest answer's MillisBehindLatest times the
// byte rate, is within ±25 % of the bytes after the residual's start.
func TestReadAheadBacklogIsTheHeldBytesAndTheNewestAnswer(t *testing.T) {
	const stream = "ahead-backlog"
	clock := kinesistest.NewManualClock(time.Now().Add(-time.Hour))
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1), kinesistest.WithClock(clock))
	for i := range 600 {
		putAll(t, srv.Client(), stream, []types.PutRecordsRequestEntry{{Data: make([]byte, 600+(i*37)%801), PartitionKey: aws.String("k")}})
		clock.Advance(10 * time.Millisecond)
	}
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(20), WithMaxRecordsPerFetch(20), WithMaxReadAheadBytes(1<<20))
	var worst float64
	for step := range 25 {
		h.call(h.rest)
		worst = max(worst, backlogDeviation(t, h, srv, stream, step))
	}
	t.Logf("worst deviation of the backlog from the true unread bytes %.1f %%", 100*worst)
	if len(h.got) != 25*20 {
		t.Errorf("read %d records; want %d", len(h.got), 25*20)
	}
	forgetShard(h.r.shardKey(h.d))
}

// TestReadAheadOffKeepsOnlyTheIterator parks a shard without read-ahead: the entry holds its
// iterator and no page, and makes no call until the next call comes.
func TestReadAheadOffKeepsOnlyTheIterator(t *testing.T) {
	const stream = "ahead-off"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	want := putNumbered(t, srv, stream, "r", 30)
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(10), WithMaxRecordsPerFetch(10), WithoutReadAhead())
	key := h.r.shardKey(h.d)
	h.call(h.rest)
	readAhead.mu.Lock()
	e := readAhead.entries[key]
	state := fmt.Sprintf("pages %d fetching %v tail %v", len(e.pages), e.fetching, e.tail != "")
	readAhead.mu.Unlock()
	if state != "pages 0 fetching false tail true" {
		t.Errorf("parked without read-ahead: %s; want pages 0 fetching false tail true", state)
	}
	calls := srv.CallCount("GetRecords")
	if calls != 1 {
		t.Errorf("%d GetRecords calls for a 10-record call that ends at its limit; want 1", calls)
	}
	h.call(h.rest)
	h.call(h.rest)
	assertSequence(t, h.got, want)
	forgetShard(key)
}

// TestReadAheadOfAShardThatMovedAwayIsThrownAway measures what a runner that moves a
// restriction to another worker pays for the read-ahead, at its default cap: the first worker
// reads one 10,000-record page of 100 B records and checkpoints; the residual resumes
// elsewhere, so the pages its read-ahead fetched (up to a quarter of 64 MiB of memory) expire
// unread after readAheadIdleAge, and are counted as thrown away. The worker that resumes the
// residual, with no entry of its own, opens an iterator and reads exactly the next records,
// as it would without a read-ahead.
func TestReadAheadOfAShardThatMovedAwayIsThrownAway(t *testing.T) {
	const stream, n, page = "ahead-moved", 100_000, 10_000
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	entries := make([]types.PutRecordsRequestEntry, n)
	want := make([]string, n)
	for i := range entries {
		want[i] = fmt.Sprintf("%-100s", fmt.Sprintf("r-%d", i))
		entries[i] = types.PutRecordsRequestEntry{Data: []byte(want[i]), PartitionKey: aws.String("k")}
	}
	putAll(t, srv.Client(), stream, entries)
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(page), WithMaxRecordsPerFetch(page))
	key := h.r.shardKey(h.d)
	h.call(h.rest)
	awaitEntry(t, key, "stopped at its cap", func(e *aheadEntry) bool { return !e.fetching && len(e.pages) > 0 })
	readAhead.mu.Lock()
	e := readAhead.entries[key]
	pages, mem := len(e.pages), e.mem
	readAhead.mu.Unlock()
	fetched := srv.CallCount("GetRecords") - 1
	pageMem := int64(page * (100 + 1 + 56 + recordOverhead))
	if share := int64(defaultReadAheadBytes / readAheadShardShare); mem < share || mem > share+pageMem {
		t.Errorf("the parked shard holds %d bytes of memory; want its share %d, overshot by less than a page (%d)", mem, share, pageMem)
	}

	readAhead.mu.Lock()
	readAhead.expireLocked(time.Now().Add(readAheadIdleAge + time.Second))
	readAhead.mu.Unlock()
	st, held := readAhead.takeStats(key.read)
	t.Logf("thrown away when the restriction moved: %d GetRecords calls, %d pages, %d bytes of data (%d of memory)", st.droppedCalls, st.droppedPages, st.droppedBytes, mem)
	if st.expired != 1 || st.droppedPages != int64(pages) || st.droppedCalls != int64(fetched) || st.droppedBytes != int64(pages*page*100) || held != 0 {
		t.Errorf("after expiry: %+v, %d bytes held; want 1 expired, %d pages and %d calls of %d bytes dropped, nothing held", st, held, pages, fetched, pages*page*100)
	}

	iterators := srv.CallCount("GetShardIterator")
	h.call(h.rest)
	assertSequence(t, h.got, want[:2*page])
	if got := srv.CallCount("GetShardIterator") - iterators; got != 1 {
		t.Errorf("the resumed residual opened %d iterators; want 1", got)
	}
	forgetShard(key)
}

// TestReadAheadEntryStoppedByTheReadsCapIsForgottenWhenDropped parks a shard while the read's
// other shards hold its whole cap: the entry waits for room holding nothing, and dropping it
// must remove it from what waits, which would otherwise keep it until the read next releases
// memory (an entry that held pages wakes the waiting when it releases them).
func TestReadAheadEntryStoppedByTheReadsCapIsForgottenWhenDropped(t *testing.T) {
	const stream, capBytes = "ahead-unwait", 1 << 20
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	putNumbered(t, srv, stream, "r", 30)
	h := newMemoHarness(t, srv, stream, WithMaxRecordsPerRead(10), WithMaxRecordsPerFetch(10), WithMaxReadAheadBytes(capBytes))
	key := h.r.shardKey(h.d)
	readAhead.mu.Lock()
	readAhead.held[key.read] += capBytes // the other shards' pages
	readAhead.mu.Unlock()
	defer func() {
		readAhead.mu.Lock()
		readAhead.releaseHeldLocked(key.read, capBytes)
		readAhead.mu.Unlock()
	}()
	h.call(h.rest)
	readAhead.mu.Lock()
	e := readAhead.entries[key]
	empty := e != nil && e.mem == 0
	readAhead.mu.Unlock()
	if !empty {
		t.Fatalf("the parked entry holds pages or is missing; want one that holds nothing, the read's cap being full")
	}
	waits := func() bool {
		readAhead.mu.Lock()
		defer readAhead.mu.Unlock()
		return slices.Contains(readAhead.waiting[key.read], capWaiter(e))
	}
	deadline := time.Now().Add(30 * time.Second)
	for !waits() {
		readAhead.mu.Lock()
		readAhead.kickLocked(e) // queues it on the cap once its goroutine has stopped
		readAhead.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("the parked entry never waited for the read's cap")
		}
		time.Sleep(5 * time.Millisecond) // polls a condition; asserts nothing by itself
	}
	forgetShard(key)
	if waits() {
		t.Errorf("the dropped entry still waits for room")
	}
}
