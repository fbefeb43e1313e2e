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
	mu    sync.Mutex
	now   time.Time
	moved chan struct{} // closed and replaced whenever the clock moves
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
	c.notifyLocked()
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	c.notifyLocked()
}

// changed returns a channel that is closed the next time the clock moves.
// Open subscriptions wait on it, so their server-clock deadlines (the
// subscription lifetime) pass as soon as a test moves the clock.
func (c *ManualClock) changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.moved == nil {
		c.moved = make(chan struct{})
	}
	return c.moved
}

func (c *ManualClock) notifyLocked() {
	if c.moved != nil {
		close(c.moved)
		c.moved = nil
	}
}

// changeNotifier is a Clock that says when it moves; ManualClock is one.
type changeNotifier interface {
	changed() <-chan struct{}
}
