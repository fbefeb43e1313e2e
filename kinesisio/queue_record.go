package kinesisio

import (
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*QueueRecord)(nil)).Elem())
	registerRowCoder(func(r QueueRecord) queueRecordRow { r.Data = orEmpty(r.Data); return queueRecordRow(r) }, func(w queueRecordRow) QueueRecord { return QueueRecord(w) })
}

// QueueRecord is one record read from a Kinesis queue by ReadQueue or ReadQueueDeadLetters.
// Its fields are exported, so it has Beam's schema (row) coder and crosses Java runners
// (Data is never nil).
type QueueRecord struct {
	// QueueARN is the queue it was read from.
	QueueARN string
	// RecordID is the record's identity: the same on every delivery, and in every queue of
	// the stream. It is the key to deduplicate on (with SubIndex for the user records of a
	// KPL aggregate).
	RecordID string
	// PartitionKey is the producer's partition key; empty when it sent none.
	PartitionKey string
	// ExplicitHashKey is a KPL user record's explicit hash key, if it had one.
	ExplicitHashKey string
	// Data is the payload (a user record's, for a KPL aggregate split by the read).
	Data []byte
	// ApproximateArrivalTimestamp is when the stream stored the record.
	ApproximateArrivalTimestamp time.Time
	// ReceiveTimestamp is when the read received this delivery. It is the record's event
	// time: see "Queues" in the package doc.
	ReceiveTimestamp time.Time
	// ReceiveCount is how many times the queue delivered the record, this delivery
	// included (reset by a dead letter's restore).
	ReceiveCount int64
	// DeadLetter says it was read from the queue's dead-letter side.
	DeadLetter bool
	// Aggregated says it is a user record of a KPL aggregate the queue delivered whole;
	// SubIndex is its place in the aggregate. All the user records of an aggregate are
	// acknowledged together.
	Aggregated bool
	SubIndex   int64
}

// queueRecordRow has QueueRecord's fields, to reach its default row encoding (rowcoder.go).
type queueRecordRow struct {
	QueueARN                    string
	RecordID                    string
	PartitionKey                string
	ExplicitHashKey             string
	Data                        []byte
	ApproximateArrivalTimestamp time.Time
	ReceiveTimestamp            time.Time
	ReceiveCount                int64
	DeadLetter                  bool
	Aggregated                  bool
	SubIndex                    int64
}
