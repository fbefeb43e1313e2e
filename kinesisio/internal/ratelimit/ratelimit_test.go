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

// A large record (9 MiB on a stream that allows it) can never fit a shard's 1 MiB bucket:
// it passes when the bucket is full, and the debt it leaves holds the shard back so that
// over a long run the bytes granted stay at 1 MiB/s. With a burst under a second the debt
// keeps the same margin below the service's one-second bucket as normal records get.
func TestLargeRecordsPassWhenFullAndPayTheirDebt(t *testing.T) {
	const rate = 1 << 20
	const large = 9 << 20
	c := &fakeClock{t: time.Unix(0, 0)}
	l := New(1000, rate, 950*time.Millisecond, c.now)
	if ok, _ := l.TryTake("s", 1, large); !ok {
		t.Fatal("a 9 MiB record refused by a full bucket; it must pass")
	}
	// The bucket held 0.95 MiB; the record and the 0.05 MiB margin leave it 9.05 MiB short
	// of full, paid off at 1 MiB/s before the next large record (9.05 s), while a small
	// record waits only until the bucket holds it again (8.05 MiB + 100 B).
	r, big := float64(rate), float64(large)
	wantLarge := time.Duration((big + r/20) / r * float64(time.Second))
	if d := l.Wait("s", 1, large) - wantLarge; d < 0 || d > time.Millisecond {
		t.Errorf("wait for the next large record = %v, want %v", l.Wait("s", 1, large), wantLarge)
	}
	wantSmall := time.Duration((big + r/20 - r*0.95 + 100) / r * float64(time.Second))
	if d := l.Wait("s", 1, 100) - wantSmall; d < 0 || d > time.Millisecond {
		t.Errorf("wait for a small record after it = %v, want %v", l.Wait("s", 1, 100), wantSmall)
	}
	if ok, _ := l.TryTake("s", 1, 100); ok {
		t.Fatal("a small record granted while the shard is in debt")
	}

	// Normal records are unaffected: a 0.5 MiB record costs 0.5 MiB.
	n := New(1000, rate, 950*time.Millisecond, c.now)
	n.TryTake("t", 1, rate/2)
	if w := n.Wait("t", 1, rate*45/100); w != 0 {
		t.Errorf("after a 0.5 MiB take, 0.45 MiB waits %v; normal records carry no margin", w)
	}

	// The long run: large and small records offered as fast as granted for 120 s.
	l = New(1000, rate, 950*time.Millisecond, c.now)
	start := c.t
	var granted, largeGranted int
	for i := 0; c.t.Sub(start) < 120*time.Second; {
		size := 100
		if i%10 == 0 {
			size = large
		}
		ok, wait := l.TryTake("s", 1, size)
		if !ok {
			c.advance(wait)
			continue
		}
		granted += size
		if size == large {
			largeGranted++
		}
		i++
	}
	elapsed := c.t.Sub(start).Seconds()
	if max := elapsed*rate + large; float64(granted) > max {
		t.Errorf("granted %d bytes in %.1f s, over 1 MiB/s plus one large record (%.0f)", granted, elapsed, max)
	}
	if min := (elapsed - 10) * rate; float64(granted) < min {
		t.Errorf("granted %d bytes in %.1f s, under %.0f: the debt held the shard back too long", granted, elapsed, min)
	}
	if largeGranted < 10 {
		t.Errorf("only %d large records in %.0f s", largeGranted, elapsed)
	}
}

func TestGiveReturnsAnOversizedTakeWhole(t *testing.T) {
	c := &fakeClock{t: time.Unix(0, 0)}
	l := New(1000, 1<<20, 950*time.Millisecond, c.now)
	l.TryTake("s", 1, 9<<20)
	l.Give("s", 1, 9<<20)
	if ok, _ := l.TryTake("s", 1, 9<<20); !ok {
		t.Error("after giving an oversized take back, the bucket is not full")
	}
}

// The service charges a large record on arrival: once its request is answered, its debt is
// moved on by the time in flight; a normal record's is not.
func TestAnsweredMovesALargeRecordsDebtByItsTimeInFlight(t *testing.T) {
	c := &fakeClock{t: time.Unix(0, 0)}
	l := New(1000, 1<<20, time.Second, c.now)
	l.TryTake("big", 1, 9<<20)
	before := l.Wait("big", 1, 100)
	l.Answered("big", 9<<20, 200*time.Millisecond)
	if d := l.Wait("big", 1, 100) - before; d < 200*time.Millisecond-time.Microsecond || d > 200*time.Millisecond+time.Microsecond {
		t.Errorf("Answered after 200ms in flight moved the next record by %v, want 200ms", d)
	}
	l.TryTake("small", 1, 512<<10)
	before = l.Wait("small", 1, 600<<10)
	l.Answered("small", 512<<10, 200*time.Millisecond)
	if after := l.Wait("small", 1, 600<<10); after != before {
		t.Errorf("Answered moved a normal record's wait from %v to %v", before, after)
	}
}
