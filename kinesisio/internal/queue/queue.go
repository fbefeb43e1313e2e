// Package queue is the Beam-free engine of the connector's queue read: receivers that
// long-poll ReceiveQueueRecords (or its dead-letter twin) into a buffer (Pool), a table of
// the records held in flight whose visibility it extends ahead of the deadline up to a
// bound (Holder), and the calls that settle records (Settler: acknowledge, extend, restore,
// in batches of 10 with per-entry retries). Nothing here knows about Beam: the kinesisio
// package drives it from its DoFns.
//
// A record is held from its receive until it is settled (acknowledged, restored) or let go:
// its visibility is extended when its deadline is near, until the processing timeout since
// its receive has passed; then it is let go and the service delivers it again. A worker that
// dies stops extending, and its records come back after their visibility timeout. So no
// record is lost by this package; at worst it is delivered twice.
package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
)

// API is the part of the Kinesis client the engine calls; *kinesis.Client implements it.
type API interface {
	ReceiveQueueRecords(context.Context, *kinesis.ReceiveQueueRecordsInput, ...func(*kinesis.Options)) (*kinesis.ReceiveQueueRecordsOutput, error)
	ReceiveDeadLetterQueueRecords(context.Context, *kinesis.ReceiveDeadLetterQueueRecordsInput, ...func(*kinesis.Options)) (*kinesis.ReceiveDeadLetterQueueRecordsOutput, error)
	AcknowledgeQueueRecords(context.Context, *kinesis.AcknowledgeQueueRecordsInput, ...func(*kinesis.Options)) (*kinesis.AcknowledgeQueueRecordsOutput, error)
	UpdateQueueRecordsVisibility(context.Context, *kinesis.UpdateQueueRecordsVisibilityInput, ...func(*kinesis.Options)) (*kinesis.UpdateQueueRecordsVisibilityOutput, error)
	AcknowledgeDeadLetterQueueRecords(context.Context, *kinesis.AcknowledgeDeadLetterQueueRecordsInput, ...func(*kinesis.Options)) (*kinesis.AcknowledgeDeadLetterQueueRecordsOutput, error)
	UpdateDeadLetterQueueRecordsVisibility(context.Context, *kinesis.UpdateDeadLetterQueueRecordsVisibilityInput, ...func(*kinesis.Options)) (*kinesis.UpdateDeadLetterQueueRecordsVisibilityOutput, error)
	RestoreDeadLetterQueueRecords(context.Context, *kinesis.RestoreDeadLetterQueueRecordsInput, ...func(*kinesis.Options)) (*kinesis.RestoreDeadLetterQueueRecordsOutput, error)
}

// Side is the side of a queue a pool receives from.
type Side int

const (
	// Normal is the queue's records.
	Normal Side = iota
	// DeadLetter is the queue's dead letters: records received MaxReceiveCount times
	// without an acknowledgement.
	DeadLetter
)

func (s Side) String() string {
	if s == DeadLetter {
		return "dead-letter"
	}
	return "normal"
}

// Service limits.
const (
	// MaxBatch is the most records one receive returns and the most entries one
	// acknowledge, visibility or restore call takes.
	MaxBatch = 10
	// MaxWait is the longest long poll of a receive.
	MaxWait = 20 * time.Second
	// MaxVisibility is the longest visibility timeout a call may set.
	MaxVisibility = 43200 * time.Second
)

// Record is one delivery of a queue record.
type Record struct {
	RecordID     string
	Handle       string
	PartitionKey string
	Data         []byte
	Arrival      time.Time
	FirstReceive time.Time
	ReceiveCount int32
	// Received is when the receive that delivered it returned, on this process's clock.
	Received time.Time
}

func recordOf(r types.QueueRecord, received time.Time) Record {
	rec := Record{Data: r.Data, Received: received}
	if rec.Data == nil {
		rec.Data = []byte{}
	}
	if r.RecordId != nil {
		rec.RecordID = *r.RecordId
	}
	if r.ReceiptHandle != nil {
		rec.Handle = *r.ReceiptHandle
	}
	if r.PartitionKey != nil {
		rec.PartitionKey = *r.PartitionKey
	}
	if r.ApproximateArrivalTimestamp != nil {
		rec.Arrival = *r.ApproximateArrivalTimestamp
	}
	if r.FirstReceiveTimestamp != nil {
		rec.FirstReceive = *r.FirstReceiveTimestamp
	}
	if r.ReceiveCount != nil {
		rec.ReceiveCount = *r.ReceiveCount
	}
	return rec
}

// Stats is what the engine did since the last TakeStats.
type Stats struct {
	Records       int64
	Bytes         int64
	Receives      int64
	EmptyReceives int64
	Throttles     int64
	Retries       int64
	// Extensions counts records whose visibility was extended; Released, held records
	// let go at the processing timeout.
	Extensions int64
	Released   int64
	// ExtensionsRefused counts extensions the service refused for good: the handle was
	// settled elsewhere or had expired.
	ExtensionsRefused int64
	Acks              int64
	Restores          int64
	// FailedAcks counts acknowledge and restore entries that failed for good (a stale
	// handle or retries used up); StaleHandles, those of them whose handle no longer
	// worked.
	FailedAcks   int64
	StaleHandles int64
	// AckLagMs holds, per acknowledged record, the time from its receive to its
	// acknowledgement.
	AckLagMs []int64
}

func (s *Stats) add(o Stats) {
	s.Records += o.Records
	s.Bytes += o.Bytes
	s.Receives += o.Receives
	s.EmptyReceives += o.EmptyReceives
	s.Throttles += o.Throttles
	s.Retries += o.Retries
	s.Extensions += o.Extensions
	s.Released += o.Released
	s.ExtensionsRefused += o.ExtensionsRefused
	s.Acks += o.Acks
	s.Restores += o.Restores
	s.FailedAcks += o.FailedAcks
	s.StaleHandles += o.StaleHandles
	s.AckLagMs = append(s.AckLagMs, o.AckLagMs...)
}

// stats accumulates Stats under a lock, for TakeStats.
type stats struct {
	mu sync.Mutex
	s  Stats
}

func (st *stats) update(f func(s *Stats)) {
	st.mu.Lock()
	f(&st.s)
	st.mu.Unlock()
}

// take returns what was counted and starts again from zero.
func (st *stats) take() Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.s
	st.s = Stats{}
	return s
}

// ErrFatal marks an error the engine cannot ride out (the queue is gone, access denied):
// retrying cannot help.
var ErrFatal = errors.New("queue: fatal error")

// fatal wraps err as fatal.
func fatal(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, ErrFatal, err)
}

// seconds is d in whole seconds, at least 0 and at most the service's limit.
func seconds(d time.Duration) int32 {
	d = min(max(d, 0), MaxVisibility)
	return int32((d + time.Second - 1) / time.Second)
}

// classify sorts a receive or settle error; a context error is the caller's own.
func classify(err error) backoff.Class { return backoff.Classify(err) }
