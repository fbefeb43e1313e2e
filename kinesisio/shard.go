package kinesisio

import (
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

var shardIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// shardDescriptor is the element the shard reader processes: one shard of a stream, where to
// start it, and when the read ends. Discovery emits each shard once. Its coder is in coder.go.
type shardDescriptor struct {
	Stream                string
	ShardID               string
	ParentShardID         string
	AdjacentParentShardID string
	// StartingHashKey and EndingHashKey are the shard's hash key range (decimal), used to
	// drop aggregates that a producer routed to the wrong shard.
	StartingHashKey string
	EndingHashKey   string
	// StartKind, StartSeq, StartSub and StartTimeMs say where the shard is first read (a
	// start kind from position.go; never startLatest). StartSub is set for a resume from the
	// checkpoint table inside a KPL aggregate (startAfterSubSequence).
	StartKind   int64
	StartSeq    string
	StartSub    int64
	StartTimeMs int64
	// EndTimeMs, when positive, ends the shard after every record that arrived at or before
	// it has been read (ReadBounded and WithMaxReadTime).
	EndTimeMs int64
}

func (d shardDescriptor) String() string {
	return fmt.Sprintf("shard %s of stream %s", d.ShardID, d.Stream)
}

// streamShard names a shard by its stream and id, as a map key: in the commit step's
// bundle, and in a read's shared watermarks (where the zero key is discovery's).
type streamShard struct{ stream, shard string }

// newShardDescriptor describes s for a read of stream that began at readStartMs.
func newShardDescriptor(stream string, s types.Shard, start startSpec, readStartMs, endTimeMs int64) shardDescriptor {
	d := shardDescriptor{
		Stream:                stream,
		ShardID:               aws.ToString(s.ShardId),
		ParentShardID:         aws.ToString(s.ParentShardId),
		AdjacentParentShardID: aws.ToString(s.AdjacentParentShardId),
		EndTimeMs:             endTimeMs,
	}
	if s.HashKeyRange != nil {
		d.StartingHashKey = aws.ToString(s.HashKeyRange.StartingHashKey)
		d.EndingHashKey = aws.ToString(s.HashKeyRange.EndingHashKey)
	}
	d.StartKind, d.StartSeq, d.StartTimeMs = start.forShard(d.ShardID, readStartMs)
	return d
}

// hashRange is a shard's hash key range, parsed once per shard read.
type hashRange struct {
	known      bool
	start, end kpl.Uint128
}

func (d shardDescriptor) hashRange() hashRange {
	start, err1 := kpl.ParseUint128(d.StartingHashKey)
	end, err2 := kpl.ParseUint128(d.EndingHashKey)
	if err1 != nil || err2 != nil {
		return hashRange{}
	}
	return hashRange{known: true, start: start, end: end}
}

// contains reports whether the user record's hash key is in the range; an unknown range or an
// unparsable key counts as inside (the record is kept).
func (h hashRange) contains(u kpl.UserRecord) bool {
	if !h.known {
		return true
	}
	k, err := u.HashKey()
	if err != nil {
		return true
	}
	return k.Cmp(h.start) >= 0 && k.Cmp(h.end) <= 0
}
