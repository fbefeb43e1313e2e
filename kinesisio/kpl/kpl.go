// Package kpl encodes and decodes the aggregated record format of the Kinesis
// Producer Library (KPL), so that many small user records can travel in one
// Kinesis record and be split again on the consumer side.
//
// A KPL aggregate is the Kinesis record data
//
//	Magic (4 bytes) | protobuf AggregatedRecord | MD5 of the protobuf bytes (16 bytes)
//
// where AggregatedRecord holds a partition key table, an explicit hash key
// table and the user records, each naming its keys by table index.
//
// The writer side is [Aggregator]: it packs the user records bound for one
// shard, tracks the exact size of the Kinesis record it would produce, and
// [Aggregator.Build] yields a [KinesisRecord] ready for PutRecords. The reader
// side is [Deaggregate], which follows the Kinesis Client Library's rules: data
// that is not a well-formed aggregate is reported as "not aggregated" so the
// caller passes it through unchanged.
//
// Routing helpers work on 128-bit hash keys as [Uint128]: [HashPartitionKey]
// is the service's MD5 routing of a partition key, [ParseUint128] reads an
// explicit hash key or a shard's hash key range boundary.
//
// The package depends only on the standard library and protowire, and has no
// Beam imports; it is shared by the connector's reader and writer.
package kpl

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Magic is the 4-byte prefix that marks Kinesis record data as a KPL aggregate.
var Magic = [4]byte{0xF3, 0x89, 0x9A, 0xC2}

// Overhead is the number of bytes an aggregate adds around its protobuf body:
// len(Magic) plus the 16-byte MD5 trailer.
const Overhead = len(Magic) + digestLen

// AggregatePartitionKey is the outer partition key of every aggregate that
// [Aggregator.Build] produces. It is one byte, as in the KPL, because the
// partition key counts against the record size limit and shard throughput,
// while routing is done by the aggregate's explicit hash key.
const AggregatePartitionKey = "a"

// MaxPartitionKeyLength is the largest partition key the service accepts, in
// characters as [ValidatePartitionKey] counts them (UTF-16 code units).
const MaxPartitionKeyLength = 256

const digestLen = 16

// Field numbers of the KPL protobuf schema (aggregation-format.md).
const (
	fieldPartitionKeyTable    = 1 // AggregatedRecord.partition_key_table, repeated string
	fieldExplicitHashKeyTable = 2 // AggregatedRecord.explicit_hash_key_table, repeated string
	fieldRecords              = 3 // AggregatedRecord.records, repeated Record

	fieldPartitionKeyIndex    = 1 // Record.partition_key_index, required uint64
	fieldExplicitHashKeyIndex = 2 // Record.explicit_hash_key_index, optional uint64
	fieldData                 = 3 // Record.data, required bytes
	fieldTags                 = 4 // Record.tags, repeated Tag

	fieldTagKey = 1 // Tag.key, required string
)

// Errors reported by this package. They are wrapped with the offending value
// or position; test for them with errors.Is.
var (
	// ErrInvalidPartitionKey reports a partition key the service would reject.
	ErrInvalidPartitionKey = errors.New("kpl: invalid partition key")
	// ErrInvalidHashKey reports a hash key that is not a canonical decimal
	// integer in 0 .. 2^128-1.
	ErrInvalidHashKey = errors.New("kpl: invalid hash key")
	// ErrFull is returned by [Aggregator.Add] when the aggregate holds records
	// and the new one would break its byte or record limit: build and reset
	// the aggregate, then add the record again.
	ErrFull = errors.New("kpl: aggregate full")
	// ErrTooLarge is returned by [Aggregator.Add] when a record alone, sent
	// raw, exceeds the aggregator's byte limit; no aggregate can hold it.
	ErrTooLarge = errors.New("kpl: record larger than the aggregate limit")
	// ErrMalformed reports an aggregate whose framing, checksum and protobuf
	// are valid but whose content is not: a key index outside its table.
	ErrMalformed = errors.New("kpl: malformed aggregated record")
)

// UserRecord is one record as the producing application wrote it: what the
// writer aggregates and what [Deaggregate] returns.
type UserRecord struct {
	// PartitionKey is the user's partition key (1..256 characters).
	PartitionKey string
	// ExplicitHashKey is the decimal hash key that overrides the MD5 of the
	// partition key for routing; "" means none.
	ExplicitHashKey string
	// Data is the record payload.
	Data []byte
}

// Validate reports whether the service would accept the record's keys: the
// partition key per [ValidatePartitionKey] and, when set, the explicit hash
// key per [ParseUint128]. It does not check the data size, which depends on
// the stream's record size limit.
func (r UserRecord) Validate() error {
	if err := ValidatePartitionKey(r.PartitionKey); err != nil {
		return err
	}
	if r.ExplicitHashKey != "" {
		if _, err := ParseUint128(r.ExplicitHashKey); err != nil {
			return fmt.Errorf("explicit hash key: %w", err)
		}
	}
	return nil
}

// HashKey returns the 128-bit key the service routes the record by: its
// explicit hash key when set, otherwise the MD5 of its partition key.
func (r UserRecord) HashKey() (Uint128, error) {
	if r.ExplicitHashKey == "" {
		return HashPartitionKey(r.PartitionKey), nil
	}
	k, err := ParseUint128(r.ExplicitHashKey)
	if err != nil {
		return Uint128{}, fmt.Errorf("explicit hash key: %w", err)
	}
	return k, nil
}

// KinesisRecord is one record to send with PutRecords, as [Aggregator.Build]
// produces it: either a KPL aggregate or, when it holds a single user record,
// that record sent raw (as the KPL does).
type KinesisRecord struct {
	// PartitionKey is [AggregatePartitionKey] for an aggregate, the user's
	// partition key for a raw record.
	PartitionKey string
	// ExplicitHashKey is always set for an aggregate (the decimal hash key of
	// its first user record, so the service routes it to that record's shard)
	// and must be sent with it. For a raw record it is the user's, possibly "".
	ExplicitHashKey string
	// Data is the aggregate's bytes, or the raw user record's data (the same
	// slice the caller added, not a copy).
	Data []byte
	// UserRecords is the number of user records inside.
	UserRecords int
}

// Aggregated reports whether the record is a KPL aggregate rather than a
// single user record sent raw.
func (r KinesisRecord) Aggregated() bool { return r.UserRecords > 1 }

// Size is the record's size as the service counts it against the record and
// request limits: partition key bytes plus data bytes.
func (r KinesisRecord) Size() int { return len(r.PartitionKey) + len(r.Data) }

// ValidatePartitionKey reports whether the service accepts pk as a partition
// key: valid UTF-8 of 1 to [MaxPartitionKeyLength] characters.
//
// Characters are counted as UTF-16 code units, so a character outside the
// Basic Multilingual Plane (such as an emoji) counts twice. That is how the
// KPL (Java String.length) counts, and it is the stricter reading of the
// service's "1..256 Unicode characters": every key accepted here is accepted
// whether the service counts code units or code points. Invalid UTF-8 is
// rejected because the service takes a Unicode string and the JSON encoding
// of the request would silently replace the bad bytes, changing the key and
// therefore its routing.
func ValidatePartitionKey(pk string) error {
	if pk == "" {
		return fmt.Errorf("%w: empty (must be 1..%d characters)", ErrInvalidPartitionKey, MaxPartitionKeyLength)
	}
	// Every UTF-8 sequence is at least as many bytes as the UTF-16 code units
	// it encodes, so a short key only needs the UTF-8 check.
	if len(pk) <= MaxPartitionKeyLength {
		if !utf8.ValidString(pk) {
			return fmt.Errorf("%w %q: not valid UTF-8", ErrInvalidPartitionKey, pk)
		}
		return nil
	}
	units := 0
	for i, c := range pk {
		switch {
		case c == utf8.RuneError && isInvalidAt(pk, i):
			return fmt.Errorf("%w %q: not valid UTF-8", ErrInvalidPartitionKey, truncate(pk))
		case c > 0xFFFF:
			units += 2
		default:
			units++
		}
	}
	if units > MaxPartitionKeyLength {
		return fmt.Errorf("%w %q: %d characters (UTF-16 code units), more than %d",
			ErrInvalidPartitionKey, truncate(pk), units, MaxPartitionKeyLength)
	}
	return nil
}

// isInvalidAt tells a decoding error from a literal U+FFFD in s at byte i.
func isInvalidAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 1
}

// truncate shortens a long key for an error message; the full key can be
// hundreds of bytes and would drown the reason.
func truncate(s string) string {
	const keep = 64
	if len(s) <= keep {
		return s
	}
	return s[:keep] + "..."
}
