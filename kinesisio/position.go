package kinesisio

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/seqnum"
)

// Start kinds. They travel inside shard descriptors and restrictions (as int64 fields, which
// every Beam coder handles), so their values must never change.
const (
	// startTrimHorizon reads from the oldest record still retained.
	startTrimHorizon int64 = iota + 1
	// startLatest reads records written after the read begins. It is only ever an option
	// value: discovery turns it into startAtTimestamp(read start) so that a checkpoint taken
	// before the first record skips nothing.
	startLatest
	// startAtTimestamp reads from the first record that arrived at or after TimeMs.
	startAtTimestamp
	// startAtSequence reads from the Kinesis record Seq, inclusive.
	startAtSequence
	// startAfterSequence reads after the Kinesis record Seq: all of it has been read.
	startAfterSequence
	// startAfterSubSequence reads after the user record (Seq, Sub) inside an aggregate: the
	// aggregate is read again AT_SEQUENCE_NUMBER and its user records up to Sub are skipped.
	startAfterSubSequence
)

// startKindName names a start kind the way Kinesis names iterator types.
func startKindName(k int64) string {
	switch k {
	case startTrimHorizon:
		return "TRIM_HORIZON"
	case startLatest:
		return "LATEST"
	case startAtTimestamp:
		return "AT_TIMESTAMP"
	case startAtSequence:
		return "AT_SEQUENCE_NUMBER"
	case startAfterSequence:
		return "AFTER_SEQUENCE_NUMBER"
	case startAfterSubSequence:
		return "AFTER_SUB_SEQUENCE_NUMBER"
	}
	return fmt.Sprintf("unknown start kind %d", k)
}

// recordPosition is the identity of a user record within a shard: the Kinesis sequence
// number and the index inside a KPL aggregate (0 for plain records).
type recordPosition struct {
	Seq string
	Sub int64
}

// compare orders positions by sequence number (numerically) and then sub-sequence number.
// Both sequence numbers must be canonical decimals.
func (p recordPosition) compare(q recordPosition) int {
	if c := seqnum.Compare(p.Seq, q.Seq); c != 0 {
		return c
	}
	switch {
	case p.Sub < q.Sub:
		return -1
	case p.Sub > q.Sub:
		return 1
	}
	return 0
}

func (p recordPosition) String() string { return fmt.Sprintf("%s/%d", p.Seq, p.Sub) }

// StartingPosition says where Read and ReadBounded start reading the shards of a stream.
// Build one with Latest, TrimHorizon, AtTimestamp, ShardPositions or
// ParseStartingPosition; the zero value is invalid.
type StartingPosition struct {
	kind   int64
	at     time.Time
	shards []ShardPosition
}

// Latest starts after the newest record at the moment the read begins. The read fixes that
// moment when it starts and reads AT_TIMESTAMP from it, so a checkpoint taken before the
// first record arrives skips nothing. Shards created later are read from their beginning.
func Latest() StartingPosition { return StartingPosition{kind: startLatest} }

// TrimHorizon starts at the oldest record each shard still retains: the Spark connectors'
// trim_horizon, also called earliest (ParseStartingPosition reads both).
func TrimHorizon() StartingPosition { return StartingPosition{kind: startTrimHorizon} }

// AtTimestamp starts at the first record that arrived at or after t (millisecond precision).
// A time older than the stream's retention reads from the trim horizon.
func AtTimestamp(t time.Time) StartingPosition {
	return StartingPosition{kind: startAtTimestamp, at: t}
}

// ShardPositions starts each listed shard at its own position; shards not listed (including
// shards created while the read runs) start at their trim horizon.
func ShardPositions(positions ...ShardPosition) StartingPosition {
	return StartingPosition{kind: startAtSequence, shards: append([]ShardPosition(nil), positions...)}
}

// String describes the position, e.g. "LATEST" or "AT_TIMESTAMP(2026-01-02T03:04:05Z)".
func (p StartingPosition) String() string {
	switch p.kind {
	case startLatest, startTrimHorizon:
		return startKindName(p.kind)
	case startAtTimestamp:
		return fmt.Sprintf("AT_TIMESTAMP(%s)", p.at.UTC().Format(time.RFC3339Nano))
	case startAtSequence:
		parts := make([]string, len(p.shards))
		for i, s := range p.shards {
			parts[i] = s.String()
		}
		return "SHARD_POSITIONS(" + strings.Join(parts, ", ") + ")"
	}
	return "INVALID"
}

// ShardPosition is where one shard starts in ShardPositions.
type ShardPosition struct {
	shardID string
	kind    int64
	seq     string
	at      time.Time
}

// AtSequenceNumber starts shardID at the record with sequence number seq, inclusive.
func AtSequenceNumber(shardID, seq string) ShardPosition {
	return ShardPosition{shardID: shardID, kind: startAtSequence, seq: seq}
}

// AfterSequenceNumber starts shardID after the record with sequence number seq, e.g. the last
// record a previous run processed.
func AfterSequenceNumber(shardID, seq string) ShardPosition {
	return ShardPosition{shardID: shardID, kind: startAfterSequence, seq: seq}
}

// String describes the shard position, e.g. "shardId-000000000001 AFTER_SEQUENCE_NUMBER 4959…".
func (p ShardPosition) String() string {
	switch p.kind {
	case startAtSequence, startAfterSequence:
		return fmt.Sprintf("%s %s %s", p.shardID, startKindName(p.kind), p.seq)
	case startAtTimestamp:
		return fmt.Sprintf("%s AT_TIMESTAMP %s", p.shardID, p.at.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("%s %s", p.shardID, startKindName(p.kind))
}

// ParseStartingPosition parses the Spark connectors' startingPosition option: "latest",
// "trim_horizon", "earliest" (any case), "AT_TIMESTAMP <RFC 3339 time>", or a JSON object
// mapping shard ids to positions, e.g.
//
//	{"shardId-000000000000": {"iteratorType": "AFTER_SEQUENCE_NUMBER", "iteratorPosition": "4959…"},
//	 "shardId-000000000001": {"iteratorType": "TRIM_HORIZON", "iteratorPosition": ""}}
//
// Iterator types are AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, LATEST and
// AT_TIMESTAMP (position in epoch milliseconds or RFC 3339). A "metadata" key, as the Spark
// connector writes into its offsets, is ignored.
func ParseStartingPosition(s string) (StartingPosition, error) {
	trimmed := strings.TrimSpace(s)
	switch strings.ToLower(trimmed) {
	case "latest":
		return Latest(), nil
	case "trim_horizon", "earliest":
		return TrimHorizon(), nil
	}
	// The keyword is matched on bytes of the original text: upper-casing first would change the
	// length of text holding runes such as 'ı' or invalid UTF-8, and the rest would be cut
	// from the wrong place.
	const atTimestamp = "AT_TIMESTAMP"
	if len(trimmed) >= len(atTimestamp) && strings.EqualFold(trimmed[:len(atTimestamp)], atTimestamp) {
		t, err := parsePositionTime(strings.TrimSpace(trimmed[len(atTimestamp):]))
		if err != nil {
			return StartingPosition{}, fmt.Errorf("starting position %q: %w", s, err)
		}
		return AtTimestamp(t), nil
	}
	if !strings.HasPrefix(trimmed, "{") {
		return StartingPosition{}, fmt.Errorf("starting position %q is not latest, trim_horizon, earliest, AT_TIMESTAMP <time> or a JSON map of shard positions", s)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(trimmed), &raw); err != nil {
		return StartingPosition{}, fmt.Errorf("starting position is not valid JSON: %w", err)
	}
	ids := make([]string, 0, len(raw))
	for id := range raw {
		if id != "metadata" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	positions := make([]ShardPosition, 0, len(ids))
	for _, id := range ids {
		var p struct {
			IteratorType     string `json:"iteratorType"`
			IteratorPosition string `json:"iteratorPosition"`
		}
		if err := json.Unmarshal(raw[id], &p); err != nil {
			return StartingPosition{}, fmt.Errorf("starting position of shard %q: %w", id, err)
		}
		sp := ShardPosition{shardID: id}
		switch strings.ToUpper(p.IteratorType) {
		case "AT_SEQUENCE_NUMBER":
			sp.kind, sp.seq = startAtSequence, p.IteratorPosition
		case "AFTER_SEQUENCE_NUMBER":
			sp.kind, sp.seq = startAfterSequence, p.IteratorPosition
		case "TRIM_HORIZON", "EARLIEST":
			sp.kind = startTrimHorizon
		case "LATEST":
			sp.kind = startLatest
		case "AT_TIMESTAMP":
			t, err := parsePositionTime(p.IteratorPosition)
			if err != nil {
				return StartingPosition{}, fmt.Errorf("starting position of shard %q: %w", id, err)
			}
			sp.kind, sp.at = startAtTimestamp, t
		default:
			return StartingPosition{}, fmt.Errorf("starting position of shard %q: iterator type %q is not AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, LATEST or AT_TIMESTAMP", id, p.IteratorType)
		}
		positions = append(positions, sp)
	}
	sp := ShardPositions(positions...)
	if err := sp.validate(); err != nil {
		return StartingPosition{}, fmt.Errorf("starting position: %w", err)
	}
	return sp, nil
}

// parsePositionTime accepts epoch milliseconds or an RFC 3339 time.
func parsePositionTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q is neither epoch milliseconds nor RFC 3339", s)
	}
	return t, nil
}

func (p StartingPosition) validate() error {
	switch p.kind {
	case startLatest, startTrimHorizon:
		return nil
	case startAtTimestamp:
		if p.at.IsZero() || p.at.UnixMilli() < 0 {
			return fmt.Errorf("AtTimestamp needs a time after 1970, got %v", p.at)
		}
		return nil
	case startAtSequence:
		if len(p.shards) == 0 {
			return fmt.Errorf("ShardPositions needs at least one shard position")
		}
		seen := map[string]bool{}
		for _, s := range p.shards {
			if !shardIDPattern.MatchString(s.shardID) {
				return fmt.Errorf("shard id %q is invalid: shard ids are 1 to 128 characters of a-z, A-Z, 0-9, '_', '.' and '-'", s.shardID)
			}
			if seen[s.shardID] {
				return fmt.Errorf("shard %s has two positions; give one per shard", s.shardID)
			}
			seen[s.shardID] = true
			switch s.kind {
			case startAtSequence, startAfterSequence:
				if err := validateSequenceNumber(s.seq); err != nil {
					return fmt.Errorf("shard %s: %w", s.shardID, err)
				}
			case startAtTimestamp:
				if s.at.UnixMilli() < 0 {
					return fmt.Errorf("shard %s: time %v is before 1970", s.shardID, s.at)
				}
			case startTrimHorizon, startLatest:
			default:
				return fmt.Errorf("shard %s: zero ShardPosition; build it with AtSequenceNumber or AfterSequenceNumber", s.shardID)
			}
		}
		return nil
	}
	return fmt.Errorf("zero StartingPosition; use Latest(), TrimHorizon(), AtTimestamp(t) or ShardPositions(...)")
}

// startSpec is a StartingPosition in a form that serialises with the DoFns that carry it.
type startSpec struct {
	Kind   int64
	TimeMs int64
	Shards []shardStart
}

// shardStart is one shard's entry of a startSpec.
type shardStart struct {
	ShardID string
	Kind    int64
	Seq     string
	TimeMs  int64
}

func (p StartingPosition) spec() startSpec {
	s := startSpec{Kind: p.kind}
	if p.kind == startAtTimestamp {
		s.TimeMs = p.at.UnixMilli()
	}
	for _, sp := range p.shards {
		ss := shardStart{ShardID: sp.shardID, Kind: sp.kind, Seq: sp.seq}
		if sp.kind == startAtTimestamp {
			ss.TimeMs = sp.at.UnixMilli()
		}
		s.Shards = append(s.Shards, ss)
	}
	return s
}

// forShard resolves where shardID starts when the read began at readStartMs: LATEST becomes
// AT_TIMESTAMP(read start); shards without an explicit position start at the trim horizon,
// except for timestamp starts, where AT_TIMESTAMP also covers shards created later (it reads
// them from their first record).
func (s startSpec) forShard(shardID string, readStartMs int64) (kind int64, seq string, timeMs int64) {
	switch s.Kind {
	case startLatest:
		return startAtTimestamp, "", readStartMs
	case startAtTimestamp:
		return startAtTimestamp, "", s.TimeMs
	case startAtSequence:
		for _, sh := range s.Shards {
			if sh.ShardID != shardID {
				continue
			}
			switch sh.Kind {
			case startLatest:
				return startAtTimestamp, "", readStartMs
			case startAtTimestamp:
				return startAtTimestamp, "", sh.TimeMs
			}
			return sh.Kind, sh.Seq, 0
		}
	}
	return startTrimHorizon, "", 0
}

// listFilter is the ListShards filter discovery uses on every poll. Timestamp starts list
// only shards open at or after the start (older closed shards hold nothing to read); other
// starts list every shard within retention. Using the same filter on every poll keeps the
// set of listed shards stable, so a shard is never mistaken for a new one.
func (s startSpec) listFilter(readStartMs int64) *types.ShardFilter {
	switch s.Kind {
	case startLatest:
		t := time.UnixMilli(readStartMs)
		return &types.ShardFilter{Type: types.ShardFilterTypeFromTimestamp, Timestamp: &t}
	case startAtTimestamp:
		t := time.UnixMilli(s.TimeMs)
		return &types.ShardFilter{Type: types.ShardFilterTypeFromTimestamp, Timestamp: &t}
	}
	return &types.ShardFilter{Type: types.ShardFilterTypeFromTrimHorizon}
}
