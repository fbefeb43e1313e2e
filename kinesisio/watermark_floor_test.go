package kinesisio

import (
	"testing"
	"time"
)

// A read's shared watermarks: each report returns the lowest watermark not expired (once
// watermarkRecompute has passed, else at most that); a pending shard holds the others back
// until its restriction reports or its time runs out; a dropped one holds nothing.
func TestReadWatermarksHoldTheLowest(t *testing.T) {
	w := newReadWatermarks()
	t0 := time.Unix(1000, 0)
	if got := w.report(streamShard{shard: "a"}, 500, time.Minute, t0); got != 500 {
		t.Fatalf("a alone: %d, want 500", got)
	}
	if got := w.report(streamShard{shard: "b"}, 900, time.Minute, t0); got != 500 {
		t.Fatalf("b with a at 500: %d, want 500", got)
	}
	w.pending(streamShard{shard: "c"}, 300, t0)
	w.pending(streamShard{shard: "c"}, 800, t0) // a second emission does not move it
	if got := w.report(streamShard{shard: "b"}, 950, time.Minute, t0.Add(time.Second)); got != 300 {
		t.Fatalf("b with c pending at 300: %d, want 300", got)
	}
	if got := w.report(streamShard{shard: "c"}, 400, time.Minute, t0.Add(time.Second)); got != 300 {
		t.Fatalf("c reporting 400 within watermarkRecompute of the last computation: %d, want the lower 300 still", got)
	}
	if got := w.report(streamShard{shard: "c"}, 400, time.Minute, t0.Add(time.Second+watermarkRecompute)); got != 400 {
		t.Fatalf("c reporting 400: %d, want 400", got)
	}
	w.drop(streamShard{shard: "c"})
	if got := w.report(streamShard{shard: "b"}, 960, time.Minute, t0.Add(2*time.Second)); got != 500 {
		t.Fatalf("b after c is done: %d, want a's 500", got)
	}
	// a has not reported for longer than its time to live: it is forgotten.
	if got := w.report(streamShard{shard: "b"}, 970, time.Minute, t0.Add(61*time.Second)); got != 970 {
		t.Fatalf("b after a expired: %d, want 970", got)
	}
	if _, ok := w.marks[streamShard{shard: "a"}]; ok {
		t.Fatal("the expired mark of a was kept")
	}
	w.pending(streamShard{shard: "d"}, 100, t0.Add(61*time.Second))
	if got := w.report(streamShard{shard: "b"}, 980, time.Minute, t0.Add(61*time.Second+watermarkPendingTTL+time.Millisecond)); got != 980 {
		t.Fatalf("b after d's pending time ran out: %d, want 980", got)
	}
}

// An estimator that shares its watermark tells the runner the lowest one and resumes from
// its own.
func TestWatermarkEstimatorSharesItsWatermark(t *testing.T) {
	w := newReadWatermarks()
	slow, fast := newWatermarkEstimator(1000), newWatermarkEstimator(5000)
	slow.share(w, streamShard{shard: "slow"})
	fast.share(w, streamShard{shard: "fast"})
	if got := fast.CurrentWatermark().UnixMilli(); got != 1000 {
		t.Fatalf("fast's watermark with slow at 1000: %d, want 1000", got)
	}
	if got := fast.stateMs(); got != 5000 {
		t.Fatalf("fast's state: %d, want its own 5000", got)
	}
	slow.advanceMs(7000)
	slow.CurrentWatermark()
	w.computed = time.Time{} // as if watermarkRecompute had passed
	if got := fast.CurrentWatermark().UnixMilli(); got != 5000 {
		t.Fatalf("fast's watermark with slow at 7000: %d, want 5000", got)
	}
	fast.unshare()
	w.computed = time.Time{}
	if got := slow.CurrentWatermark().UnixMilli(); got != 7000 {
		t.Fatalf("slow's watermark after fast is done: %d, want 7000", got)
	}
}
