package kinesistest

import (
	"sync"
	"time"
)

// Clock tells the server what time it is. The server reads it for arrival
// timestamps, iterator and paging-token expiry, retention, stream status
// transitions and the throughput windows of limits mode, so a test that owns
// the clock decides when any of those happen.
type Clock interface {
	Now() time.Time
}

// systemClock is the wall clock, the default.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to. It is safe for
// concurrent use. Use it to expire iterators, trim records by retention or
// refill throughput limits without sleeping.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a ManualClock that reads t until it is moved.
func NewManualClock(t time.Time) *ManualClock {
	return &ManualClock{now: t}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward when d is negative).
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
