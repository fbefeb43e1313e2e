package kinesisio

// The reader's half of the commit: the commit tokens one shard reader call emits beside its
// records, cut where the held commit needs them. commit.go writes them to the table.

import (
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/checkpoint"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// tokenCutter makes the commit tokens of one reader call. A token's event time is the latest
// event time of the records it covers (the shard's watermark for one that covers none): the
// SDK harness moves the reader's watermark estimator with the event time of every output,
// tokens included, so a token stamped with the wall clock would move the watermark past
// records not read yet, which windows then drop as late.
//
// Without a cut (a plain Read with a table) the call has one token, the position it
// reached. Under a held commit the reader knows the windows of the sinks (Commit.After sets
// Cut in the read's spec), and a call that emits records of two windows ends a token at the
// last record of each window: a restart from the table then resumes a shard at a window's
// first record, so a deterministic sink that rewrites the window rewrites all of it.
type tokenCutter struct {
	cut  windowCut
	d    shardDescriptor
	emit func(beam.EventTime, commitToken)

	// seg is the window index of the segment being read; n its records, last the position
	// of its last record and maxEv their latest event time.
	seg, n, maxEv int64
	last          recordPosition
	// cutRecords counts the records covered by the tokens already emitted; prevMaxEv is the
	// latest event time among them.
	cutRecords, prevMaxEv int64
	cuts                  int
}

func newTokenCutter(cut windowCut, d shardDescriptor, emit func(beam.EventTime, commitToken)) *tokenCutter {
	return &tokenCutter{cut: cut, d: d, emit: emit}
}

// observe sees a record the call emits at et, before it is emitted.
func (c *tokenCutter) observe(et beam.EventTime, r Record) {
	ms := et.Milliseconds()
	idx := c.cut.index(ms)
	if c.n > 0 && idx != c.seg {
		now := time.Now().UnixMilli()
		tok := commitToken{Stream: c.d.Stream, ShardID: c.d.ShardID, Seq: c.last.Seq, Sub: c.last.Sub, Records: c.n, EndMs: now, MaxEventMs: c.maxEv}
		c.emit(mtime.FromMilliseconds(tok.MaxEventMs), tok)
		c.cutRecords += c.n
		c.prevMaxEv, c.n, c.cuts = c.maxEv, 0, c.cuts+1
	}
	if c.n == 0 || ms > c.maxEv {
		c.maxEv = ms
	}
	c.seg, c.n = idx, c.n+1
	c.last = recordPosition{Seq: r.SequenceNumber, Sub: r.SubSequenceNumber}
}

// finish emits the token of the position the call reached on rt, unless a cut token already
// covers it. idleMaxEv is the event time of a token that covers no record the call emitted:
// the shard's watermark (a SHARD_END reached without records, or records the reader
// dropped).
func (c *tokenCutter) finish(rt *sdf.LockRTracker, idleMaxEv int64) {
	t, ok := rt.Rt.(*shardTracker)
	if !ok {
		return
	}
	rt.Mu.Lock()
	last, claimed, shardEnd := t.reached()
	n := t.claimed
	rt.Mu.Unlock()
	now := time.Now().UnixMilli()
	tok := commitToken{Stream: c.d.Stream, ShardID: c.d.ShardID, Records: n - c.cutRecords, EndMs: now}
	switch {
	case shardEnd:
		tok.Seq = leasetable.ShardEnd
	case claimed && (c.n > 0 || last.compare(c.last) > 0 || c.cuts == 0):
		tok.Seq, tok.Sub = last.Seq, last.Sub
	default:
		return
	}
	switch {
	case c.n > 0:
		tok.MaxEventMs = c.maxEv
	case c.cuts > 0:
		tok.MaxEventMs = max(c.prevMaxEv, idleMaxEv)
	default:
		tok.MaxEventMs = idleMaxEv
	}
	c.emit(mtime.FromMilliseconds(tok.MaxEventMs), tok)
}

// tokens returns the record emitter of a reader call and the cutter that makes its commit
// tokens (it sees every record, for the tokens' event times), or emit itself and nil when
// the read has no table.
func tokens(cp *checkpoint.Checkpointer, cut windowCut, d shardDescriptor, emit func(beam.EventTime, Record), emitCommit func(beam.EventTime, commitToken)) (func(beam.EventTime, Record), *tokenCutter) {
	if cp == nil {
		return emit, nil
	}
	c := newTokenCutter(cut, d, emitCommit)
	return func(et beam.EventTime, r Record) {
		c.observe(et, r)
		emit(et, r)
	}, c
}
