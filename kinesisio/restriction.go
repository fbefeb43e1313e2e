package kinesisio

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
)

// shardRestriction is the part of one shard a shard reader still has to read: a range of
// record positions with a symbolic start and an open, positional or time end. It is also the
// checkpoint: after TrySplit(0) the residual starts right after the last claimed record, and
// a resumed reader opens its iterator from it. Its coder is in coder.go.
type shardRestriction struct {
	// StartKind, StartSeq, StartSub and StartTimeMs say where the range starts (a start kind
	// from position.go).
	StartKind   int64
	StartSeq    string
	StartSub    int64
	StartTimeMs int64
	// VerifiedMs is the latest time at which the reader knew it had read everything before
	// the start: the arrival time of the last claimed record, or when it was last caught up.
	// Zero when the start came from the user. It decides whether the start may have been
	// trimmed by retention and must be checked.
	VerifiedMs int64
	// EndSeq and EndSub, when EndSeq is set, are the last position in the range (inclusive).
	// Checkpoint primaries have them; reads never do.
	EndSeq string
	EndSub int64
	// Empty marks a range with nothing in it (a primary split off before any claim, or a
	// restriction truncated on drain).
	Empty bool
	// EndTimeMs, when positive, ends the range after the records that arrived at or before
	// it: at the first record that arrived later, or once the reader is caught up past it.
	EndTimeMs int64
	// MaxRecords, when positive, ends the shard after that many user records; Claimed counts
	// those claimed by earlier parts of the shard.
	MaxRecords int64
	Claimed    int64
}

func (r shardRestriction) String() string {
	if r.Empty {
		return "{empty}"
	}
	s := "{from " + r.startString()
	if r.EndSeq != "" {
		s += fmt.Sprintf(" to %s/%d", r.EndSeq, r.EndSub)
	}
	if r.EndTimeMs > 0 {
		s += " until arrival " + formatMs(r.EndTimeMs)
	}
	if r.MaxRecords > 0 {
		s += fmt.Sprintf(", %d of %d records read", r.Claimed, r.MaxRecords)
	}
	return s + "}"
}

func (r shardRestriction) startString() string {
	switch r.StartKind {
	case startAtTimestamp:
		return "AT_TIMESTAMP " + formatMs(r.StartTimeMs)
	case startAtSequence, startAfterSequence:
		return startKindName(r.StartKind) + " " + r.StartSeq
	case startAfterSubSequence:
		return fmt.Sprintf("AFTER %s/%d", r.StartSeq, r.StartSub)
	}
	return startKindName(r.StartKind)
}

// initialRestriction is the whole shard as the descriptor describes it.
func initialRestriction(d shardDescriptor, maxRecords int64) shardRestriction {
	return shardRestriction{
		StartKind:   d.StartKind,
		StartSeq:    d.StartSeq,
		StartSub:    d.StartSub,
		StartTimeMs: d.StartTimeMs,
		EndTimeMs:   d.EndTimeMs,
		MaxRecords:  maxRecords,
	}
}

// bounded reports whether the range has an end other than the shard's own.
func (r shardRestriction) bounded() bool {
	return r.Empty || r.EndSeq != "" || r.EndTimeMs > 0 || r.MaxRecords > 0
}

// skipThrough is the position up to which records returned by an iterator opened at the
// start must be skipped (they were claimed before the checkpoint), or nil.
func (r shardRestriction) skipThrough() *recordPosition {
	switch r.StartKind {
	case startAfterSubSequence:
		return &recordPosition{Seq: r.StartSeq, Sub: r.StartSub}
	case startAfterSequence:
		return &recordPosition{Seq: r.StartSeq, Sub: maxSubSequence}
	}
	return nil
}

// maxSubSequence sorts after every sub-sequence number.
const maxSubSequence = int64(^uint64(0) >> 1)

// sequenceStart is the sequence number the start names, for starts that name one.
func (r shardRestriction) sequenceStart() (string, bool) {
	switch r.StartKind {
	case startAtSequence, startAfterSequence, startAfterSubSequence:
		return r.StartSeq, true
	}
	return "", false
}

// startKey is a restriction's start: the key under which a worker keeps what a call left
// for the call that resumes exactly there (an open iterator or subscription, a backlog).
type startKey struct {
	Kind   int64
	Seq    string
	Sub    int64
	TimeMs int64
}

// start is the range's start as a key.
func (r shardRestriction) start() startKey {
	return startKey{Kind: r.StartKind, Seq: r.StartSeq, Sub: r.StartSub, TimeMs: r.StartTimeMs}
}

// after is the range with its start moved right after the claim c, or the range itself when
// c is nil (nothing claimed). It is the only computation of where a read goes on after a
// claim: the residual of a checkpoint, a renewed iterator, a new subscription and the keys
// of what a call leaves for the next one all use it. After the last user record of a
// Kinesis record the range starts after that record; after one inside a KPL aggregate it
// starts after the user record, so the aggregate is read again and the claimed part skipped.
func (r shardRestriction) after(c *recordClaim) shardRestriction {
	if c == nil {
		return r
	}
	r.StartSeq, r.StartSub, r.StartTimeMs = c.Pos.Seq, c.Pos.Sub, 0
	r.StartKind = startAfterSubSequence
	if c.Last {
		r.StartKind, r.StartSub = startAfterSequence, 0
	}
	return r
}

// iteratorStart is how Kinesis names the range's start: the iterator type, with the
// sequence number or timestamp it takes. A start inside an aggregate reads the aggregate
// again (AT_SEQUENCE_NUMBER); skipThrough says what to skip in it.
func (r shardRestriction) iteratorStart() (typ types.ShardIteratorType, seq *string, at *time.Time) {
	switch r.StartKind {
	case startAtTimestamp:
		t := time.UnixMilli(r.StartTimeMs)
		return types.ShardIteratorTypeAtTimestamp, nil, &t
	case startAtSequence, startAfterSubSequence:
		return types.ShardIteratorTypeAtSequenceNumber, aws.String(r.StartSeq), nil
	case startAfterSequence:
		return types.ShardIteratorTypeAfterSequenceNumber, aws.String(r.StartSeq), nil
	}
	return types.ShardIteratorTypeTrimHorizon, nil, nil
}

// iteratorInput is the GetShardIterator request that opens the range at its start.
func (r shardRestriction) iteratorInput(d shardDescriptor) *kinesis.GetShardIteratorInput {
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(d.ShardID)}
	in.StreamName, in.StreamARN = streamarn.Input(d.Stream)
	in.ShardIteratorType, in.StartingSequenceNumber, in.Timestamp = r.iteratorStart()
	return in
}

// startingPosition is the SubscribeToShard position that opens the range at its start.
func (r shardRestriction) startingPosition() types.StartingPosition {
	var p types.StartingPosition
	p.Type, p.SequenceNumber, p.Timestamp = r.iteratorStart()
	return p
}
