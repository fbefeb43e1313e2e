package kinesisio

import (
	"fmt"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/seqnum"
)

// splitRefused, when set, is called for every fractional split a shard tracker refuses
// (runners ask for them when a bundle makes no visible progress). Only tests set it, before
// any read runs (main_test.go).
var splitRefused func()

// recordClaim claims one user record. Last says it is the last user record of its Kinesis
// record, so a checkpoint after it can resume AFTER_SEQUENCE_NUMBER instead of re-reading
// the aggregate.
type recordClaim struct {
	Pos       recordPosition
	Last      bool
	ArrivalMs int64
	// Bytes is the user record's data size, for progress.
	Bytes int64
}

// shardEndClaim says the shard is closed and fully read; it finishes the restriction.
type shardEndClaim struct{}

// caughtUpClaim says that every record that arrived before AtMs has been read: a caught-up
// GetRecords call or event, less the time a stored record may take to become readable
// (readSpec.PropagationDelay). It finishes a restriction whose EndTimeMs is at or before
// AtMs; otherwise it only records that nothing before AtMs is left unread.
type caughtUpClaim struct {
	AtMs int64
}

// shardTracker tracks the claims on one shardRestriction. Positions must be claimed in
// strictly increasing order. It never splits a shard at a fraction: only TrySplit(0), the
// checkpoint, splits, because any other split point would be an invented sequence number.
// It is not safe for concurrent use on its own; readers wrap it in sdf.LockRTracker.
type shardTracker struct {
	rest shardRestriction

	claimed       int64 // records claimed by this tracker
	last          recordClaim
	verifiedMs    int64
	stopped       bool // the range's end was reached
	shardEnd      bool // the shard is closed and was read to its end
	checkpointed  bool // TrySplit(0) handed the rest to a residual
	err           error
	skip          *recordPosition
	sequenceStart string
	startExcluded bool
	// claimedBytes is the data of the records claimed; backlog, when hasBacklog, the
	// reader's latest estimate of the shard's unread bytes (read_backlog.go).
	claimedBytes int64
	backlog      float64
	hasBacklog   bool
}

// setBacklog records the reader's estimate of the shard's unread bytes, which progress
// reports as the remaining work.
func (t *shardTracker) setBacklog(bytes float64) {
	t.backlog, t.hasBacklog = bytes, true
}

func newShardTracker(rest shardRestriction) *shardTracker {
	t := &shardTracker{rest: rest, verifiedMs: rest.VerifiedMs, skip: rest.skipThrough()}
	if seq, ok := rest.sequenceStart(); ok {
		t.sequenceStart = seq
		t.startExcluded = rest.StartKind != startAtSequence
	}
	return t
}

// TryClaim claims a recordClaim, shardEndClaim or caughtUpClaim. It returns false when the
// claim is past the end of the range (the tracker is then done) or invalid (GetError says
// why); after false the caller must stop.
func (t *shardTracker) TryClaim(pos any) bool {
	if t.err != nil {
		return false
	}
	if t.IsDone() {
		t.err = fmt.Errorf("kinesisio: claim %v after the restriction %v was done", pos, t.rest)
		return false
	}
	switch c := pos.(type) {
	case shardEndClaim:
		t.stopped, t.shardEnd = true, true
		return false
	case caughtUpClaim:
		if c.AtMs > t.verifiedMs {
			t.verifiedMs = c.AtMs
		}
		if t.rest.EndTimeMs > 0 && c.AtMs >= t.rest.EndTimeMs {
			t.stopped = true
			return false
		}
		return true
	case recordClaim:
		return t.claimRecord(c)
	}
	t.err = fmt.Errorf("kinesisio: shard tracker cannot claim %T %v", pos, pos)
	return false
}

func (t *shardTracker) claimRecord(c recordClaim) bool {
	if err := validateSequenceNumber(c.Pos.Seq); err != nil {
		t.err = fmt.Errorf("kinesisio: claiming a record: %w", err)
		return false
	}
	if t.claimed > 0 {
		if c.Pos.compare(t.last.Pos) <= 0 {
			t.err = fmt.Errorf("kinesisio: claim of record %v does not follow the previous claim %v", c.Pos, t.last.Pos)
			return false
		}
	} else if t.skip != nil {
		if c.Pos.compare(*t.skip) <= 0 {
			t.err = fmt.Errorf("kinesisio: claim of record %v is not after the restriction start %v", c.Pos, t.rest.startString())
			return false
		}
	} else if t.sequenceStart != "" && seqnum.Compare(c.Pos.Seq, t.sequenceStart) < 0 {
		t.err = fmt.Errorf("kinesisio: claim of record %v is before the restriction start %v", c.Pos, t.rest.startString())
		return false
	}
	if t.rest.EndSeq != "" && c.Pos.compare(recordPosition{Seq: t.rest.EndSeq, Sub: t.rest.EndSub}) > 0 {
		t.stopped = true
		return false
	}
	if t.rest.EndTimeMs > 0 && c.ArrivalMs > t.rest.EndTimeMs {
		t.stopped = true
		return false
	}
	t.claimed++
	t.claimedBytes += c.Bytes
	t.last = c
	if c.ArrivalMs > t.verifiedMs {
		t.verifiedMs = c.ArrivalMs
	}
	return true
}

// reached is what a call's claims got to, for the checkpoint table: the last record claimed
// (ok false when none was) and whether the shard was read to its end.
func (t *shardTracker) reached() (last recordPosition, ok, shardEnd bool) {
	return t.last.Pos, t.claimed > 0, t.shardEnd
}

// limitReached says the shard's record budget is spent or the range's last position claimed.
func (t *shardTracker) limitReached() bool {
	if t.rest.MaxRecords > 0 && t.rest.Claimed+t.claimed >= t.rest.MaxRecords {
		return true
	}
	return t.rest.EndSeq != "" && t.claimed > 0 && t.last.Pos.compare(recordPosition{Seq: t.rest.EndSeq, Sub: t.rest.EndSub}) >= 0
}

// GetError returns the error that made a claim fail, if any.
func (t *shardTracker) GetError() error { return t.err }

// IsDone says no work is left in the range.
func (t *shardTracker) IsDone() bool {
	return t.err == nil && (t.rest.Empty || t.stopped || t.checkpointed || t.limitReached())
}

// IsBounded reports whether the range ends other than by the shard closing.
func (t *shardTracker) IsBounded() bool { return t.rest.bounded() }

// GetRestriction returns the range as it stands (the primary after a split).
func (t *shardTracker) GetRestriction() any { return t.rest }

// GetProgress reports the work done and left. Under WithMaxRecords both are records: those
// claimed and those left. Otherwise both are bytes: the data claimed and the reader's
// estimate of the shard's unread bytes (0 when caught up), or a nominal 1 before the
// reader has made one.
func (t *shardTracker) GetProgress() (done, remaining float64) {
	if t.rest.MaxRecords > 0 {
		done = float64(t.claimed)
		if !t.IsDone() {
			remaining = float64(t.rest.MaxRecords - t.rest.Claimed - t.claimed)
		}
		return done, remaining
	}
	done = float64(t.claimedBytes)
	switch {
	case t.IsDone():
		remaining = 0
	case t.hasBacklog:
		remaining = t.backlog
	default:
		remaining = 1
	}
	return done, remaining
}

// TrySplit checkpoints at fraction 0: the primary becomes what has been claimed, the residual
// starts after the last claim (or at the original start), and the tracker is done. A split
// at any other fraction is refused by returning the current range as primary and no
// residual: a shard cannot be divided without inventing sequence numbers. When no work is
// left the residual is nil.
func (t *shardTracker) TrySplit(fraction float64) (primary, residual any, err error) {
	if fraction > 0 {
		if splitRefused != nil {
			splitRefused()
		}
		return t.rest, nil, nil
	}
	if t.err != nil || t.IsDone() {
		return t.rest, nil, nil
	}
	if fraction < 0 {
		return nil, nil, fmt.Errorf("kinesisio: split fraction %v is negative", fraction)
	}
	res := t.rest
	if t.claimed > 0 {
		res = t.rest.after(&t.last)
		res.Claimed += t.claimed
	}
	res.VerifiedMs = t.verifiedMs
	prim := t.rest
	if t.claimed > 0 {
		prim.EndSeq, prim.EndSub = t.last.Pos.Seq, t.last.Pos.Sub
	} else {
		prim.Empty = true
	}
	t.rest = prim
	t.checkpointed = true
	return prim, res, nil
}
