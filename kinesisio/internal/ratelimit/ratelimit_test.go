package ratelimit

import (
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestLimiter() (*Limiter, *fakeClock) {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	return New(1000, 1<<20, time.Second, c.now), c
}

func TestBucketStartsFullWithOneSecondOfBurst(t *testing.T) {
	l, _ := newTestLimiter()
	for i := 0; i < 1000; i++ {
		if ok, _ := l.TryTake("s", 1, 10); !ok {
			t.Fatalf("take %d refused; a fresh bucket holds 1000 records", i)
		}
	}
	ok, wait := l.TryTake("s", 1, 10)
	if ok {
		t.Fatal("take 1001 granted; want refused")
	}
	if wait < time.Millisecond || wait > time.Millisecond+time.Microsecond {
		t.Errorf("wait = %v, want 1ms (one record at 1000/s)", wait)
	}
}

func TestBytesLimitHoldsOverTime(t *testing.T) {
	l, c := newTestLimiter()
	const size = 51200
	granted := 0
	// Ten simulated seconds in 1 ms steps: the burst plus ten seconds of refill.
	for step := 0; step < 10_000; step++ {
		for {
			ok, _ := l.TryTake("s", 1, size)
			if !ok {
				break
			}
			granted++
		}
		c.advance(time.Millisecond)
	}
	want := (11 << 20) / size // 1 MiB of burst + 10 s at 1 MiB/s
	if granted < want-1 || granted > want {
		t.Errorf("granted %d aggregates of %d bytes in 10s, want %d (burst + 10 MiB)", granted, size, want)
	}
}

func TestShardsAreIndependent(t *testing.T) {
	l, _ := newTestLimiter()
	if ok, _ := l.TryTake("a", 1000, 0); !ok {
		t.Fatal("shard a refused its burst")
	}
	if ok, _ := l.TryTake("a", 1, 0); ok {
		t.Fatal("shard a granted beyond its burst")
	}
	if ok, _ := l.TryTake("b", 1000, 0); !ok {
		t.Fatal("shard b refused: its bucket must not share shard a's tokens")
	}
}

func TestOversizedRequestPassesWhenFullAndLeavesDebt(t *testing.T) {
	c := &fakeClock{t: time.Unix(0, 0)}
	l := New(100, 100_000, time.Second, c.now) // 10% of a shard
	if ok, _ := l.TryTake("s", 1, 1<<20); !ok {
		t.Fatal("a 1 MiB record under a 100 kB/s limit must pass once the bucket is full")
	}
	wait := l.Wait("s", 1, 1)
	// Debt of 1048576-100000 bytes plus 1 byte at 100000 B/s.
	want := time.Duration(float64(1<<20-100_000+1) / 100_000 * float64(time.Second))
	if d := wait - want; d < 0 || d > time.Millisecond {
		t.Errorf("wait after the oversized take = %v, want %v", wait, want)
	}
	c.advance(wait)
	if ok, _ := l.TryTake("s", 1, 1); !ok {
		t.Error("take after the announced wait refused")
	}
}

func TestGiveRestoresButNeverBeyondCapacity(t *testing.T) {
	l, _ := newTestLimiter()
	l.TryTake("s", 10, 100)
	l.Give("s", 10, 100)
	l.Give("s", 10, 100)
	if ok, _ := l.TryTake("s", 1000, 0); !ok {
		t.Fatal("after give, the full burst must be available")
	}
	if ok, _ := l.TryTake("s", 1, 0); ok {
		t.Fatal("give grew the bucket beyond its capacity")
	}
}

func TestForgetDropsClosedShards(t *testing.T) {
	l, _ := newTestLimiter()
	l.TryTake("old", 1000, 0)
	l.TryTake("new", 1, 0)
	l.Forget(func(s string) bool { return s == "new" })
	if _, ok := l.buckets["old"]; ok {
		t.Error("bucket of the forgotten shard is still held")
	}
	if _, ok := l.buckets["new"]; !ok {
		t.Error("bucket of the kept shard was dropped")
	}
}
