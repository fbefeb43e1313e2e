package kinesisio

import (
	"fmt"
	"slices"
)

// discoveryRestriction is the state of unbounded shard discovery: the shards already emitted
// (and still listed) and the time of the last poll. It is the checkpoint of discovery.
type discoveryRestriction struct {
	Shards []string
	// LastPollMs is when the last completed poll started; 0 before the first.
	LastPollMs int64
	// ReadStartMs is when the first poll started: the read's start.
	ReadStartMs int64
	// EndTimeMs, when positive, ends discovery after the first poll that starts later.
	EndTimeMs int64
	// Done marks a finished discovery (the primary of a checkpoint, or after the last poll).
	Done bool
}

// pollClaim claims one ListShards poll that started at StartMs and listed Listed.
type pollClaim struct {
	StartMs     int64
	Listed      []string
	ReadStartMs int64
	EndTimeMs   int64
}

// discoveryTracker tracks polls. Like shardTracker it only splits at fraction 0.
type discoveryTracker struct {
	rest         discoveryRestriction
	polled       bool
	checkpointed bool
	err          error
}

// TryClaim claims a pollClaim; false means discovery is over (or the claim is invalid).
func (t *discoveryTracker) TryClaim(pos any) bool {
	c, ok := pos.(pollClaim)
	if !ok {
		t.err = fmt.Errorf("kinesisio: discovery tracker cannot claim %T", pos)
		return false
	}
	if t.err != nil {
		return false
	}
	if t.IsDone() {
		t.err = fmt.Errorf("kinesisio: discovery poll claimed after discovery was done")
		return false
	}
	if c.StartMs < t.rest.LastPollMs {
		t.err = fmt.Errorf("kinesisio: discovery poll at %d claimed after the poll at %d", c.StartMs, t.rest.LastPollMs)
		return false
	}
	if t.rest.ReadStartMs == 0 {
		t.rest.ReadStartMs, t.rest.EndTimeMs = c.ReadStartMs, c.EndTimeMs
	}
	t.rest.Shards = slices.Clone(c.Listed)
	t.rest.LastPollMs = c.StartMs
	t.polled = true
	if t.rest.EndTimeMs > 0 && c.StartMs > t.rest.EndTimeMs {
		// Every shard that existed by the end time is in this listing.
		t.rest.Done = true
	}
	return true
}

// GetError returns the error that made a claim fail, if any.
func (t *discoveryTracker) GetError() error { return t.err }

// IsDone says discovery has nothing left to do.
func (t *discoveryTracker) IsDone() bool { return t.err == nil && (t.rest.Done || t.checkpointed) }

// IsBounded reports whether discovery ends by itself.
func (t *discoveryTracker) IsBounded() bool { return t.rest.Done || t.rest.EndTimeMs > 0 }

// GetRestriction returns the discovery state.
func (t *discoveryTracker) GetRestriction() any { return t.rest }

// GetProgress reports whether a poll has completed in this call.
func (t *discoveryTracker) GetProgress() (done, remaining float64) {
	if t.polled {
		done = 1
	}
	if !t.IsDone() {
		remaining = 1
	}
	return done, remaining
}

// TrySplit checkpoints at fraction 0 (the residual continues polling from the current
// state) and refuses every other split.
func (t *discoveryTracker) TrySplit(fraction float64) (primary, residual any, err error) {
	if t.err != nil || t.IsDone() || fraction != 0 {
		return t.rest, nil, nil
	}
	res := t.rest
	res.Shards = slices.Clone(t.rest.Shards)
	prim := t.rest
	prim.Done = true
	t.rest = prim
	t.checkpointed = true
	return prim, res, nil
}
