package kinesistest

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
)

// record is one stored data record.
type record struct {
	counter   uint64 // the sequence number's counter; orders records in a shard
	seq       string
	pk        string
	ehk       string
	data      []byte // never modified after the put
	arrivalMs int64
}

// size is what the record counts against size limits: data plus partition key.
func (r *record) size() int { return len(r.data) + len(r.pk) }

// shard is one shard of a stream.
//
// Locking: identity and hash range never change. The closure fields (closed,
// closedMs, endSeq, children) change only under the owning stream's write
// lock, so holders of the stream's read lock may read them. The records and
// throughput buckets are guarded by mu.
type shard struct {
	num              uint32
	id               string
	parentID         string
	adjacentParentID string
	start, end       uint128
	startKey, endKey string // decimal forms of start and end
	startCounter     uint64
	startSeq         string
	createdMs        int64

	closed   bool
	closedMs int64
	endSeq   string
	children []*shard

	mu      sync.Mutex
	records []record // oldest first; trimmed from the front by retention
	buckets shardBuckets
	// readPausedUntilMs ends the pause after a large GetRecords page
	// (Server.SetLargeReadThrottle), on the server clock.
	readPausedUntilMs int64
	// arrived is closed when a record is stored or the shard closes, to wake
	// SubscribeToShard streams waiting for data; nil while nobody waits.
	arrived chan struct{}
}

// arrivalLocked returns a channel closed when the shard next changes (a record
// is stored or the shard closes). Caller holds mu, so no change slips in
// between reading the shard and waiting.
func (sh *shard) arrivalLocked() <-chan struct{} {
	if sh.arrived == nil {
		sh.arrived = make(chan struct{})
	}
	return sh.arrived
}

// wakeLocked wakes whoever waits on arrivalLocked. Caller holds mu.
func (sh *shard) wakeLocked() {
	if sh.arrived != nil {
		close(sh.arrived)
		sh.arrived = nil
	}
}

func shardID(num uint32) string { return fmt.Sprintf("shardId-%012d", num) }

// parentIDs lists the shard's parents in the order ChildShards reports them.
func (sh *shard) parentIDs() []string {
	var ids []string
	if sh.parentID != "" {
		ids = append(ids, sh.parentID)
	}
	if sh.adjacentParentID != "" {
		ids = append(ids, sh.adjacentParentID)
	}
	return ids
}

// trimLocked drops records whose age on the server clock has reached the
// retention period (arrival <= cutoffMs). Arrival times normally grow, so the
// scan stops at the first record still retained.
func (sh *shard) trimLocked(cutoffMs int64) {
	n := 0
	for n < len(sh.records) && sh.records[n].arrivalMs <= cutoffMs {
		n++
	}
	if n == 0 {
		return
	}
	// Release the blobs now; the backing array goes with the next growth.
	clear(sh.records[:n])
	sh.records = sh.records[n:]
}

// indexAtLocked returns the index of the first retained record whose counter
// is at least counter (len(records) when there is none).
func (sh *shard) indexAtLocked(counter uint64) int {
	return sort.Search(len(sh.records), func(i int) bool { return sh.records[i].counter >= counter })
}

// indexAtTimeLocked returns the index of the first retained record that
// arrived at or after ms.
func (sh *shard) indexAtTimeLocked(ms int64) int {
	return sort.Search(len(sh.records), func(i int) bool { return sh.records[i].arrivalMs >= ms })
}

// latestPosLocked is the position just past the newest record: the counter a
// LATEST iterator starts from.
func (sh *shard) latestPosLocked() uint64 {
	if n := len(sh.records); n > 0 {
		return sh.records[n-1].counter + 1
	}
	return sh.startCounter + 1
}

// readableCutoff is the latest arrival time of a record that a read at nowMs
// may return: records that arrived later wait out WithReadVisibilityDelay.
func (s *Server) readableCutoff(nowMs int64) int64 {
	if s.readDelay <= 0 {
		return math.MaxInt64
	}
	return nowMs - s.readDelay.Milliseconds()
}

// readableIn returns a channel closed after d of real time, when a record held
// back by the read visibility delay becomes readable.
func readableIn(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(max(d, time.Millisecond), func() { close(ch) })
	return ch
}
