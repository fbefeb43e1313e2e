package kinesisio

import (
	"math"
	"sync"
	"time"
)

// The watermarks of one read's restrictions, shared in a worker process.
//
// A runner computes a stage's output watermark as the minimum over the watermarks of all its
// restrictions and its input. Prism takes a splittable stage's output watermark from the
// residuals of the last bundle it finished, even past its input watermark. Each shard is its
// own bundle there, so a shard that is caught up or idle would move the read's watermark
// past a shard still reading its backlog, past a child shard waiting for its parents, and
// past discovery's last poll, and a GroupByKey downstream would drop those shards' records
// as late (TestReadWindowsKeepTheRecordsOfALaggingShard).
//
// So a reader restriction reports, as its watermark, the minimum of its own and of those of
// the read's other restrictions this process ran lately, discovery's and the shards
// discovery emitted and no restriction has reported yet. That is a lower bound a runner may
// take from any bundle, and on Prism, which runs a job in one process, it is the minimum
// the runner should have taken. On a runner that takes the minimum itself it changes
// nothing but for a shard that moved to another worker (Dataflow's rebalancing, a restore
// elsewhere), whose last watermark holds this worker's back for at most watermarkMarkTTL.

const (
	// watermarkMarkTTL is how long a restriction's last reported watermark holds the others
	// back: a restriction the runner resumes reports again within its poll interval.
	watermarkMarkTTL = time.Minute
	// watermarkPendingTTL is how long a shard discovery emitted holds the others back before
	// its restriction reports (in this process it does within milliseconds).
	watermarkPendingTTL = 10 * time.Second
	// watermarkRecompute is how often the lowest watermark is computed again over every
	// mark; in between a report only lowers it, which errs on the safe side, so that a read
	// of a thousand shards does not walk a thousand marks at each shard's checkpoint.
	watermarkRecompute = 100 * time.Millisecond
)

// readWatermarks holds the watermarks of one read's restrictions in this process.
type readWatermarks struct {
	mu    sync.Mutex
	marks map[streamShard]watermarkMark
	// low is at most the lowest mark, computed over all of them at computed.
	low      int64
	computed time.Time
}

type watermarkMark struct {
	ms      int64
	expires time.Time
}

var readFloors = struct {
	mu    sync.Mutex
	reads map[string]*readWatermarks
}{reads: map[string]*readWatermarks{}}

// watermarksOf returns the shared watermarks of the read readID.
func watermarksOf(readID string) *readWatermarks {
	readFloors.mu.Lock()
	defer readFloors.mu.Unlock()
	w, ok := readFloors.reads[readID]
	if !ok {
		w = newReadWatermarks()
		readFloors.reads[readID] = w
	}
	return w
}

func newReadWatermarks() *readWatermarks {
	return &readWatermarks{marks: map[streamShard]watermarkMark{}, low: math.MaxInt64}
}

// report sets key's watermark to ms, held for ttl from now, and returns at most the lowest
// of the read's watermarks not expired, ms among them: that lowest one itself once
// watermarkRecompute has passed since it was last computed, when expired marks are also
// forgotten.
func (w *readWatermarks) report(key streamShard, ms int64, ttl time.Duration, now time.Time) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.marks[key] = watermarkMark{ms: ms, expires: now.Add(ttl)}
	w.low = min(w.low, ms)
	if now.Sub(w.computed) >= watermarkRecompute {
		w.low = ms
		for k, m := range w.marks {
			switch {
			case now.After(m.expires):
				delete(w.marks, k)
			case m.ms < w.low:
				w.low = m.ms
			}
		}
		w.computed = now
	}
	return w.low
}

// pending sets key's watermark to ms for watermarkPendingTTL unless key has one already.
func (w *readWatermarks) pending(key streamShard, ms int64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.marks[key]; !ok {
		w.marks[key] = watermarkMark{ms: ms, expires: now.Add(watermarkPendingTTL)}
		w.low = min(w.low, ms)
	}
}

// drop forgets key's watermark: its restriction is done.
func (w *readWatermarks) drop(key streamShard) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.marks, key)
}

// discoveryWatermarkKey is discovery's key in a read's shared watermarks, beside its
// shards' (watermarkKey).
var discoveryWatermarkKey = streamShard{}

// watermarkKey is d's key in its read's shared watermarks.
func watermarkKey(d shardDescriptor) streamShard {
	return streamShard{stream: d.Stream, shard: d.ShardID}
}
