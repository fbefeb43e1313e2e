package kinesisio

import (
	"fmt"
	"regexp"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

var queueARNPattern = regexp.MustCompile(`^arn:aws[a-z0-9-]*:kinesis:[a-z0-9-]+:\d{12}:queue/\S+$`)

// ReadQueue reads the Kinesis queue queueARN into an unbounded PCollection<QueueRecord>,
// and acknowledges each record once the runner has committed the bundle that emitted it, or,
// with WithCommitAfterSinks, once the sinks passed to Commit.After wrote its window. Delivery
// is at least once; WithQueueDeduplication drops redeliveries. See "Queues" in the package
// doc for the guarantees, the event time and the metrics.
func ReadQueue(s beam.Scope, queueARN string, opts ...QueueOption) beam.PCollection {
	return buildQueueRead(s, targetQueue, queueARN, opts)
}

// ReadQueueDeadLetters reads the dead-letter side of queueARN (records received
// MaxReceiveCount times without an acknowledgement) into a PCollection<QueueRecord> whose
// DeadLetter is true. Reading them is asking to discard them: each is discarded
// (AcknowledgeDeadLetterQueueRecords) once the runner committed the bundle that emitted it,
// as for ReadQueue. WithRestoreDeadLetters restores them to the
// queue instead.
func ReadQueueDeadLetters(s beam.Scope, queueARN string, opts ...QueueOption) beam.PCollection {
	return buildQueueRead(s, targetQueueDeadLetters, queueARN, opts)
}

func buildQueueRead(s beam.Scope, t target, queueARN string, opts []QueueOption) beam.PCollection {
	name := t.String()
	if !queueARNPattern.MatchString(queueARN) {
		panic(fmt.Sprintf("%s: queue ARN %q is invalid: a Kinesis queue ARN is arn:aws:kinesis:<region>:<12-digit account>:queue/<id>", name, queueARN))
	}
	cfg := buildConfig(t, opts)
	if cfg.client.Region == "" {
		// The ARN names the queue's region.
		cfg.client.Region = regexp.MustCompile(`^arn:[^:]+:kinesis:([^:]+):`).FindStringSubmatch(queueARN)[1]
	}
	q := cfg.queue
	spec := queueSpec{
		Client: cfg.client, Retry: cfg.retry, QueueARN: queueARN,
		DeadLetter: t == targetQueueDeadLetters, Restore: q.restore,
		ReadID: newReadID(), Slots: q.slots, Receivers: q.receivers,
		Visibility: q.visibility, ProcessingTimeout: q.timeout, Wait: q.wait,
		MaxRecordsPerCall: q.maxRecords, MaxCallTime: q.maxCallTime, StopWhenIdle: q.stopWhenIdle,
		Deaggregate: cfg.source.deaggregate,
	}
	s = s.Scope(name)
	slots := beam.Reshuffle(s, beam.ParDo(s, &queueSlotsFn{Slots: q.slots}, beam.Impulse(s)))
	if cfg.source.commit != nil {
		spec.AfterCheck = afterCheck{transform: name, pending: true}
	}
	read := &queueReadFn{Spec: spec}
	recs, tokens := beam.ParDo2(s, read, slots)
	if cfg.source.commit != nil {
		cfg.source.commit.fill(name, &heldQueue{tokens: tokens, read: &read.Spec})
	} else {
		ackStep(s, &queueAckFn{Spec: spec}, beam.Reshuffle(s, tokens))
	}
	if q.dedup > 0 {
		return dedupQueue(s, recs, q.dedup)
	}
	return recs
}
