// Package ratelimit keeps a writer within each shard's write throughput: one token bucket
// per shard with two streams, records per second and bytes per second, as the KPL does. An
// aggregate counts as one record and its size in bytes.
package ratelimit

import (
	"sync"
	"time"
)

// Limiter holds a two-stream token bucket per shard. Each bucket starts full and holds at
// most one burst window's worth of tokens. It is safe for concurrent use.
//
// A request larger than a bucket's capacity (a 1 MiB record under a 10% rate, or a 9 MiB
// record on a stream that allows large records) can never fit: it is let through once the
// bucket is full and leaves it in debt, which the following seconds pay off before the
// shard is granted anything else, so that nothing waits forever and the long-run rate still
// holds. When the burst is shorter than a second (a margin below the service's one-second
// bucket), the debt also includes the difference between a second's worth and the
// capacity, so that an oversized request keeps the same margin as normal ones.
type Limiter struct {
	recordsPerSec float64
	bytesPerSec   float64
	burst         time.Duration
	now           func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	records, bytes float64
	last           time.Time
}

// New returns a limiter that grants recordsPerSec records and bytesPerSec bytes per second
// to each shard, with bursts of up to burst's worth of each. now is the clock (time.Now
// when nil).
func New(recordsPerSec, bytesPerSec float64, burst time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{recordsPerSec: recordsPerSec, bytesPerSec: bytesPerSec, burst: burst, now: now,
		buckets: make(map[string]*bucket)}
}

func (l *Limiter) capacity() (records, bytes float64) {
	s := l.burst.Seconds()
	return l.recordsPerSec * s, l.bytesPerSec * s
}

// charge is what a request of n tokens costs a bucket of capacity c filled at rate per
// second: n, and for an oversized request also the margin between a second's worth and
// the capacity (see Limiter).
func charge(n, c, rate float64) float64 {
	if n > c {
		return n + max(0, rate-c)
	}
	return n
}

// refill returns shard's bucket brought up to date with the clock; l.mu must be held.
func (l *Limiter) refill(shard string) *bucket {
	now := l.now()
	capR, capB := l.capacity()
	b, ok := l.buckets[shard]
	if !ok {
		b = &bucket{records: capR, bytes: capB, last: now}
		l.buckets[shard] = b
		return b
	}
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.records = min(capR, b.records+dt*l.recordsPerSec)
		b.bytes = min(capB, b.bytes+dt*l.bytesPerSec)
		b.last = now
	}
	return b
}

// Wait returns how long until shard's bucket can grant records and bytes, 0 if it can now.
// It takes nothing.
func (l *Limiter) Wait(shard string, records, bytes int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wait(l.refill(shard), float64(records), float64(bytes))
}

func (l *Limiter) wait(b *bucket, records, bytes float64) time.Duration {
	capR, capB := l.capacity()
	// Oversized requests need only a full bucket (see Limiter).
	records, bytes = min(records, capR), min(bytes, capB)
	var wait float64
	if short := records - b.records; short > 0 {
		wait = max(wait, short/l.recordsPerSec)
	}
	if short := bytes - b.bytes; short > 0 {
		wait = max(wait, short/l.bytesPerSec)
	}
	if wait == 0 {
		return 0
	}
	// Round up so that a caller sleeping for the wait finds the tokens there.
	return time.Duration(wait*float64(time.Second)) + time.Microsecond
}

// TryTake takes records and bytes from shard's bucket if it can grant them now and reports
// whether it did; otherwise it takes nothing and returns how long until it could.
func (l *Limiter) TryTake(shard string, records, bytes int) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(shard)
	if w := l.wait(b, float64(records), float64(bytes)); w > 0 {
		return false, w
	}
	capR, capB := l.capacity()
	b.records -= charge(float64(records), capR, l.recordsPerSec)
	b.bytes -= charge(float64(bytes), capB, l.bytesPerSec)
	return true, 0
}

// Give returns records and bytes to shard's bucket, for a take whose request was never
// sent, with the margin an oversized take was charged. The bucket does not grow beyond its
// capacity.
func (l *Limiter) Give(shard string, records, bytes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(shard)
	capR, capB := l.capacity()
	b.records = restore(b.records, charge(float64(records), capR, l.recordsPerSec), capR)
	b.bytes = restore(b.bytes, charge(float64(bytes), capB, l.bytesPerSec), capB)
}

// Answered tells the limiter that a request carrying a record of bytes bytes to shard was
// answered inFlight after the limiter granted it. The service charges a record when it
// arrives, which for a large record can be well after it was granted (the upload takes
// time), and a request that follows sooner than the debt allows is throttled. So for an
// oversized record the debt is moved on by inFlight, as if it had been granted when the
// answer came; normal records keep the burst margin alone.
func (l *Limiter) Answered(shard string, bytes int, inFlight time.Duration) {
	if inFlight <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, capB := l.capacity()
	if float64(bytes) <= capB {
		return
	}
	b := l.refill(shard)
	b.bytes -= inFlight.Seconds() * l.bytesPerSec
}

// restore returns tokens plus n, at most c; a sum that misses c only by rounding (an
// oversized take given back) is c.
func restore(tokens, n, c float64) float64 {
	if t := tokens + n; t < c-1e-6*c {
		return t
	}
	return c
}

// Forget drops the buckets of shards not in keep (closed by a resharding), so that a
// long-running writer's memory does not grow with every shard the stream ever had.
func (l *Limiter) Forget(keep func(shard string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.buckets {
		if !keep(id) {
			delete(l.buckets, id)
		}
	}
}
