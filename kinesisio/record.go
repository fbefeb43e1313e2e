package kinesisio

import (
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Record)(nil)).Elem())
}

// Record is one user record read from a Kinesis shard. For a KPL-aggregated Kinesis record,
// each user record inside it becomes one Record that shares the Kinesis record's
// SequenceNumber and ApproximateArrivalTimestamp and has its own SubSequenceNumber; together
// the two numbers identify the record within its shard. All fields are exported so that
// Beam's schema coder encodes them.
type Record struct {
	// StreamName is the name of the stream the record was read from.
	StreamName string
	// ShardID is the shard the record was read from, e.g. "shardId-000000000003".
	ShardID string
	// PartitionKey is the user record's partition key.
	PartitionKey string
	// ExplicitHashKey is the user record's explicit hash key (decimal), if it had one.
	// Only aggregated user records carry it; Kinesis does not return it for plain records.
	ExplicitHashKey string
	// SequenceNumber is the Kinesis sequence number in decimal. Sequence numbers are larger
	// than 64 bits; compare them numerically (see CompareSequenceNumbers), never as strings.
	SequenceNumber string
	// SubSequenceNumber is the user record's index inside a KPL aggregate, 0 otherwise.
	SubSequenceNumber int64
	// ApproximateArrivalTimestamp is when Kinesis accepted the record (millisecond precision).
	// It is the record's event time unless the read is told otherwise.
	ApproximateArrivalTimestamp time.Time
	// Data is the user record's payload; empty, never nil, when the record has none.
	Data []byte
	// Aggregated reports whether the record came out of a KPL aggregate.
	Aggregated bool
}

// orEmpty returns b, or an empty slice when b is nil: the connector never emits a nil Data,
// and the row coders of rowcoder.go write a nil Data as an empty one.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
