package kinesistest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Faults describes failures the server injects. Each rate is the probability,
// in [0, 1], that one request (or one PutRecords entry) fails that way. The
// draws come from one generator seeded with Seed, so a test that sends its
// requests one at a time sees the same failures on every run.
type Faults struct {
	// Seed seeds the generator behind every rate.
	Seed int64
	// PutEntryThrottleRate is the share of PutRecords entries that fail with
	// ErrorCode ProvisionedThroughputExceededException (the request itself
	// succeeds with HTTP 200). A PutRecord call fails as a whole with that
	// exception instead.
	PutEntryThrottleRate float64
	// PutEntryInternalFailureRate is the share of PutRecords entries that fail
	// with ErrorCode InternalFailure. A PutRecord call fails as a whole with
	// InternalFailureException (HTTP 500) instead.
	PutEntryInternalFailureRate float64
	// ServerErrorRate is the share of requests answered, before any work is
	// done, with HTTP 500 InternalFailureException or HTTP 503
	// ServiceUnavailable (half each).
	ServerErrorRate float64
	// GetRecordsThrottleRate is the share of GetRecords calls that fail with
	// ProvisionedThroughputExceededException.
	GetRecordsThrottleRate float64
	// ExpiredIteratorRate is the share of GetRecords calls that fail with
	// ExpiredIteratorException whatever the iterator's age.
	ExpiredIteratorRate float64
	// DropConnectionRate is the share of requests whose connection is closed,
	// after the request is read and before any work is done, without a
	// response.
	DropConnectionRate float64
	// DropAfterProcessingRate is the share of requests that are carried out
	// (records are stored) but whose connection is then closed without a
	// response, as when a response is lost on the way: a client that retries
	// writes duplicates.
	DropAfterProcessingRate float64
	// Latency is added, in real time, to every request before it is handled.
	Latency time.Duration
	// SubscriptionDropRate is the share of SubscribeToShardEvent frames before
	// which the server closes a subscription's connection abruptly, mid-body:
	// the client's event stream fails with an unexpected end of body.
	SubscriptionDropRate float64
	// EventLatency is added, in real time, before every SubscribeToShardEvent
	// frame, delaying records pushed to subscribers.
	EventLatency time.Duration
	// QueueThrottleRate is the share of queue requests (the twelve queue
	// operations, ReceiveQueueRecords to ListQueues) that fail as a whole
	// with ThrottlingException, before any work is done.
	QueueThrottleRate float64
	// QueueEntryThrottleRate is the share of entries of the queue entry
	// operations (AcknowledgeQueueRecords, UpdateQueueRecordsVisibility and
	// their dead-letter counterparts, RestoreDeadLetterQueueRecords) that
	// fail with ErrorCode ThrottlingException, the record left as it was.
	QueueEntryThrottleRate float64
	// QueueEntryInternalFailureRate is the share of such entries that fail
	// with ErrorCode InternalFailureException, the record left as it was.
	QueueEntryInternalFailureRate float64
	// QueueRedeliverAfterAckRate is the share of successful
	// AcknowledgeQueueRecords entries whose acknowledgement the queue loses,
	// as the service says happens "on rare occasions": the entry is reported
	// Successful and the receipt handle stops working, but the record stays
	// in flight and comes back, ReceiveCount one higher, when its visibility
	// timeout runs out.
	QueueRedeliverAfterAckRate float64
	// Operations, when not empty, limits every fault to these operations
	// ("PutRecords", "GetRecords", ...).
	Operations []string
	// PutEntryStreams, when not empty, limits PutEntryThrottleRate and
	// PutEntryInternalFailureRate to entries written to these streams (by name),
	// e.g. to throttle a job's output stream and not its input's producer.
	PutEntryStreams []string
}

func (f Faults) validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{
		{"PutEntryThrottleRate", f.PutEntryThrottleRate},
		{"PutEntryInternalFailureRate", f.PutEntryInternalFailureRate},
		{"ServerErrorRate", f.ServerErrorRate},
		{"GetRecordsThrottleRate", f.GetRecordsThrottleRate},
		{"ExpiredIteratorRate", f.ExpiredIteratorRate},
		{"DropConnectionRate", f.DropConnectionRate},
		{"DropAfterProcessingRate", f.DropAfterProcessingRate},
		{"SubscriptionDropRate", f.SubscriptionDropRate},
		{"QueueThrottleRate", f.QueueThrottleRate},
		{"QueueEntryThrottleRate", f.QueueEntryThrottleRate},
		{"QueueEntryInternalFailureRate", f.QueueEntryInternalFailureRate},
		{"QueueRedeliverAfterAckRate", f.QueueRedeliverAfterAckRate},
	} {
		if !(r.v >= 0 && r.v <= 1) {
			return fmt.Errorf("Faults.%s = %v, want a probability in [0, 1]", r.name, r.v)
		}
	}
	if f.PutEntryThrottleRate+f.PutEntryInternalFailureRate > 1 {
		return fmt.Errorf("Faults.PutEntryThrottleRate + PutEntryInternalFailureRate = %v, want at most 1",
			f.PutEntryThrottleRate+f.PutEntryInternalFailureRate)
	}
	if f.QueueEntryThrottleRate+f.QueueEntryInternalFailureRate > 1 {
		return fmt.Errorf("Faults.QueueEntryThrottleRate + QueueEntryInternalFailureRate = %v, want at most 1",
			f.QueueEntryThrottleRate+f.QueueEntryInternalFailureRate)
	}
	if f.Latency < 0 {
		return fmt.Errorf("Faults.Latency = %v, want >= 0", f.Latency)
	}
	if f.EventLatency < 0 {
		return fmt.Errorf("Faults.EventLatency = %v, want >= 0", f.EventLatency)
	}
	return nil
}

// active reports whether f injects anything at all.
func (f Faults) active() bool {
	return f.PutEntryThrottleRate > 0 || f.PutEntryInternalFailureRate > 0 || f.ServerErrorRate > 0 ||
		f.GetRecordsThrottleRate > 0 || f.ExpiredIteratorRate > 0 || f.DropConnectionRate > 0 ||
		f.DropAfterProcessingRate > 0 || f.Latency > 0 || f.SubscriptionDropRate > 0 || f.EventLatency > 0 ||
		f.QueueThrottleRate > 0 || f.QueueEntryThrottleRate > 0 || f.QueueEntryInternalFailureRate > 0 ||
		f.QueueRedeliverAfterAckRate > 0
}

// injector draws faults for one Faults configuration.
type injector struct {
	f   Faults
	ops map[string]bool // nil: every operation

	mu  sync.Mutex
	rng *rand.Rand
}

func newInjector(f Faults) *injector {
	in := &injector{
		f:   f,
		rng: rand.New(rand.NewPCG(uint64(f.Seed), uint64(f.Seed)^0x9e3779b97f4a7c15)),
	}
	if len(f.Operations) > 0 {
		in.ops = make(map[string]bool, len(f.Operations))
		for _, op := range f.Operations {
			in.ops[op] = true
		}
	}
	return in
}

// appliesTo reports whether faults apply to op.
func (in *injector) appliesTo(op string) bool {
	return in.f.active() && (in.ops == nil || in.ops[op])
}

func (in *injector) draw() float64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rng.Float64()
}

// hit reports whether an event of probability rate happens. A zero rate does
// not consume a draw, so turning one fault on does not reshuffle the others.
func (in *injector) hit(rate float64) bool {
	return rate > 0 && in.draw() < rate
}

// serverError returns the injected whole-request 5xx, or nil.
func (in *injector) serverError() *apiError {
	if !in.hit(in.f.ServerErrorRate) {
		return nil
	}
	if in.draw() < 0.5 {
		return errorf(codeInternalFailure, "Internal service failure (injected by kinesistest).")
	}
	return errorf(codeServiceUnavailable, "Service unavailable (injected by kinesistest).")
}

// putEntryFault returns the per-entry error code to inject for an entry
// written to stream, or "". One draw decides both rates so they do not
// interfere.
func (in *injector) putEntryFault(stream string) string {
	throttle, internal := in.f.PutEntryThrottleRate, in.f.PutEntryInternalFailureRate
	if throttle == 0 && internal == 0 {
		return ""
	}
	if len(in.f.PutEntryStreams) > 0 && !slices.Contains(in.f.PutEntryStreams, stream) {
		return ""
	}
	switch r := in.draw(); {
	case r < throttle:
		return codeThroughput
	case r < throttle+internal:
		return entryInternalFailure
	}
	return ""
}

// queueEntryFault returns the per-entry error code to inject for one entry of
// a queue entry operation, or "". One draw decides both rates.
func (in *injector) queueEntryFault() string {
	throttle, internal := in.f.QueueEntryThrottleRate, in.f.QueueEntryInternalFailureRate
	if throttle == 0 && internal == 0 {
		return ""
	}
	switch r := in.draw(); {
	case r < throttle:
		return codeThrottling
	case r < throttle+internal:
		return codeInternalFailure
	}
	return ""
}
