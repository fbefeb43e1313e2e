package kinesistest

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Options and direct calls for Kinesis queues: what a test sets up and
// inspects without going through HTTP.

// WithQueueTransitionDelay keeps a queue created over HTTP in CREATING, an
// updated one in UPDATING (its old attributes still in force) and a deleted
// one in DELETING for d on the server clock, as the service does. The
// default, 0, makes every change take effect at once. While d > 0 at most 5
// queues of the account may be CREATING or DELETING (LimitExceededException).
func WithQueueTransitionDelay(d time.Duration) Option {
	return func(c *config) { c.queueDelay = d }
}

// WithQueueSeed seeds the generators that shuffle each queue's delivery
// order (queues differ by creation order), so a test sees the same order on
// every run. The default seed is 0.
func WithQueueSeed(seed int64) Option {
	return func(c *config) { c.queueSeed = seed }
}

// WithQueueInFlightLimit sets how many records, normal and dead-letter, a
// queue lets be in flight before ReceiveQueueRecords fails with
// LimitExceededException. The service's quota, and the default, is 120,000.
func WithQueueInFlightLimit(n int) Option {
	return func(c *config) { c.queueInFlight = n }
}

func (c *config) validateQueues() error {
	if c.queueDelay < 0 {
		return fmt.Errorf("WithQueueTransitionDelay: delay %v must not be negative", c.queueDelay)
	}
	if c.queueInFlight < 1 {
		return fmt.Errorf("WithQueueInFlightLimit: limit %d must be positive", c.queueInFlight)
	}
	return nil
}

func newQueueRegistry(cfg config) queueRegistry {
	return queueRegistry{
		byID:          make(map[string]*queue),
		byName:        make(map[string]*queue),
		delay:         cfg.queueDelay,
		seed:          cfg.queueSeed,
		inFlightLimit: cfg.queueInFlight,
	}
}

// QueueConfig is the configuration of a queue made by Server.CreateQueue.
// The zero value is the service's default queue.
type QueueConfig struct {
	// StartingPosition is LATEST (the default when empty), TRIM_HORIZON or
	// AT_TIMESTAMP.
	StartingPosition types.QueueStartingPositionType
	// Timestamp is AT_TIMESTAMP's position.
	Timestamp time.Time
	// VisibilityTimeout is the queue's visibility timeout in whole seconds,
	// 30 s when zero.
	VisibilityTimeout time.Duration
	// MaxReceiveCount is how many receives make a record a dead letter, 6
	// when zero.
	MaxReceiveCount int
	// NoDeadLetter turns dead-letter handling off (TargetType NONE).
	NoDeadLetter bool
}

// CreateQueue creates queue name on ON_DEMAND stream as CreateQueue does, but
// ACTIVE at once whatever WithQueueTransitionDelay says, and returns its ARN
// (as a client in us-east-1 sees it).
func (s *Server) CreateQueue(name, stream string, cfg QueueConfig) (string, error) {
	wrap := func(err error) error {
		return fmt.Errorf("kinesistest: creating queue %q on stream %q: %w", name, stream, err)
	}
	var v violations
	checkQueueName(&name, &v)
	attrs := defaultQueueAttrs()
	if cfg.VisibilityTimeout != 0 {
		sec := int32(cfg.VisibilityTimeout / time.Second)
		if cfg.VisibilityTimeout%time.Second != 0 || cfg.VisibilityTimeout < 0 || sec > maxQueueVisibilitySec {
			return "", wrap(fmt.Errorf("VisibilityTimeout %v is not a whole number of seconds in 0..43200", cfg.VisibilityTimeout))
		}
		attrs.visibilitySec = sec
	}
	switch {
	case cfg.NoDeadLetter:
		attrs.deadLetter, attrs.maxReceives = false, 0
	case cfg.MaxReceiveCount < 0 || cfg.MaxReceiveCount > maxMaxReceiveCount:
		return "", wrap(fmt.Errorf("MaxReceiveCount %d is outside 1..%d", cfg.MaxReceiveCount, maxMaxReceiveCount))
	case cfg.MaxReceiveCount > 0:
		attrs.maxReceives = int32(cfg.MaxReceiveCount)
	}
	startType := string(cfg.StartingPosition)
	var startAt *epochMillis
	switch cfg.StartingPosition {
	case "":
		startType = queueStartLatest
	case types.QueueStartingPositionTypeLatest, types.QueueStartingPositionTypeTrimHorizon:
	case types.QueueStartingPositionTypeAtTimestamp:
		ms := epochMillis(cfg.Timestamp.UnixMilli())
		startAt = &ms
	default:
		return "", wrap(fmt.Errorf("unknown StartingPosition %q", cfg.StartingPosition))
	}
	if err := v.err(); err != nil {
		return "", wrap(err)
	}
	st, err := s.directStream(stream)
	if err != nil {
		return "", wrap(err)
	}
	q, err := s.addQueue(name, st, s.clock.Now().UnixMilli(), attrs, startType, startAt, nil, true)
	if err != nil {
		return "", wrap(err)
	}
	return q.arn(Region), nil
}

// DeleteQueue deletes a queue as DeleteQueue does, but gone at once whatever
// WithQueueTransitionDelay says.
func (s *Server) DeleteQueue(queueARN string) error {
	nowMs := s.clock.Now().UnixMilli()
	q, err := s.directQueue(queueARN)
	if err == nil {
		s.queues.mu.Lock()
		err = s.removeQueueLocked(q, nowMs, true)
		s.queues.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("kinesistest: deleting queue %s: %w", queueARN, err)
	}
	return nil
}

// QueueARN returns the ARN of the queue named name (as a client in us-east-1
// sees it).
func (s *Server) QueueARN(name string) (string, error) {
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	s.queues.forgetLocked(s.clock.Now().UnixMilli())
	q := s.queues.byName[name]
	if q == nil {
		return "", fmt.Errorf("kinesistest: queue %q: %w", name, errorf(codeResourceNotFound, "Queue %s under account %s not found.", name, AccountID))
	}
	return q.arn(Region), nil
}

func (s *Server) directQueue(queueARN string) (*queue, error) {
	q, _, err := s.queueByARN(queueARN, s.clock.Now().UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("kinesistest: queue %s: %w", queueARN, err)
	}
	return q, nil
}

// withQueue runs f on the queue an ARN names, under its lock and brought up
// to the server clock's now (visibility timeouts run out, retention trims).
func (s *Server) withQueue(queueARN string, f func(q *queue, nowMs int64)) error {
	q, err := s.directQueue(queueARN)
	if err != nil {
		return err
	}
	nowMs := s.clock.Now().UnixMilli()
	cutoff := q.stream.cutoffMs(nowMs)
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.advanceLocked(nowMs, cutoff)
	}
	f(q, nowMs)
	return nil
}

// QueueStats is what a queue holds and has done. The first five fields are
// counts now; the others count since the queue was created.
type QueueStats struct {
	Visible      int // records ReceiveQueueRecords may return
	InFlight     int // received, neither acknowledged nor visible again yet
	DeadVisible  int // dead letters ReceiveDeadLetterQueueRecords may return
	DeadInFlight int // dead letters received from the dead-letter side
	Polling      int // receives of either side waiting for records (long polls)

	Ingested     int64 // stream records the queue took in
	Received     int64 // records ReceiveQueueRecords returned, redeliveries included
	Redelivered  int64 // of those, deliveries with ReceiveCount > 1
	Acked        int64 // successful AcknowledgeQueueRecords entries (lost ones included)
	Expired      int64 // visibility timeouts that ran out or were set to 0, both sides
	DeadLettered int64 // records that became dead letters
	DeadReceived int64 // records ReceiveDeadLetterQueueRecords returned
	DeadAcked    int64 // dead letters discarded by AcknowledgeDeadLetterQueueRecords
	Restored     int64 // dead letters restored by RestoreDeadLetterQueueRecords
	// Trimmed counts records that left with the stream's retention without
	// being acknowledged (dead letters included).
	Trimmed int64
	// RedeliveredAfterAck counts records whose acknowledgement the fault
	// QueueRedeliverAfterAckRate lost and that came back.
	RedeliveredAfterAck int64
	// StaleHandles counts entries that failed because their receipt handle had
	// expired (the record acknowledged, received again, or its visibility
	// over).
	StaleHandles  int64
	EmptyReceives int64 // receives of either side that returned no records
}

// QueueStats returns what the queue an ARN names holds now and has done.
func (s *Server) QueueStats(queueARN string) (QueueStats, error) {
	var st QueueStats
	err := s.withQueue(queueARN, func(q *queue, _ int64) { st = q.counts })
	return st, err
}

// QueueAckedRecordIDs returns every RecordId the queue has acknowledged
// (successful AcknowledgeQueueRecords entries), with how many times; records
// that have since left with the stream's retention included. A count above 1
// means a record was delivered and acknowledged again: what a reader that
// deduplicates on RecordId must absorb.
func (s *Server) QueueAckedRecordIDs(queueARN string) (map[string]int, error) {
	var out map[string]int
	err := s.withQueue(queueARN, func(q *queue, _ int64) {
		out = make(map[string]int, len(q.acked))
		for id, n := range q.acked {
			out[id] = n
		}
	})
	return out, err
}

// QueueRecord is one record as a queue holds it.
type QueueRecord struct {
	RecordID     string
	State        string // VISIBLE, IN_FLIGHT, DEAD_VISIBLE, DEAD_IN_FLIGHT, ACKED or DISCARDED
	ReceiveCount int    // as the next delivery's ReceiveCount will be, less one
	Deliveries   int    // receives from either side, ever (restores do not reset it)
	Acks         int    // successful AcknowledgeQueueRecords entries
	PartitionKey string // empty when the producer sent none
	Data         []byte
	ArrivalTime  time.Time
	// FirstReceiveTime is zero until the record is first received.
	FirstReceiveTime time.Time
	// VisibleAt is when an in-flight record's visibility timeout runs out.
	VisibleAt time.Time
}

// QueueRecords returns the records the queue holds (those the stream still
// retains), in the order the queue took them in.
func (s *Server) QueueRecords(queueARN string) ([]QueueRecord, error) {
	var out []QueueRecord
	err := s.withQueue(queueARN, func(q *queue, _ int64) {
		for _, rec := range q.recs {
			if rec.state == recGone {
				continue
			}
			qr := QueueRecord{
				RecordID:     rec.id,
				State:        recStateNames[rec.state],
				ReceiveCount: int(rec.receives),
				Deliveries:   int(rec.deliveries),
				Acks:         int(rec.acks),
				PartitionKey: rec.pk,
				Data:         append([]byte(nil), rec.data...),
				ArrivalTime:  time.UnixMilli(rec.arrivalMs),
			}
			if rec.firstMs != 0 {
				qr.FirstReceiveTime = time.UnixMilli(rec.firstMs)
			}
			if rec.heapIdx >= 0 {
				qr.VisibleAt = time.UnixMilli(rec.deadlineMs)
			}
			out = append(out, qr)
		}
	})
	return out, err
}

// ExpireQueueInFlight ends the visibility timeout of every record in flight
// on the queue's normal side now, as if it had run out (the dead-letter rule
// applies), and returns how many there were: what a test does to simulate
// the death of the workers holding them without moving the clock.
func (s *Server) ExpireQueueInFlight(queueARN string) (int, error) {
	n := 0
	err := s.withQueue(queueARN, func(q *queue, nowMs int64) {
		attrs := q.attrsLocked(nowMs)
		var held []*qrec
		for _, rec := range q.deadlines {
			if rec.state == recInFlight {
				held = append(held, rec)
			}
		}
		for _, rec := range held {
			q.timeoutLocked(rec, attrs)
		}
		n = len(held)
	})
	return n, err
}

// WaitQueue blocks until cond, given the queue's stats, returns true, or ctx
// is done. cond is called again whenever the queue changes (a record
// arrives, is received, acknowledged, times out, ...), so a test awaits a
// reader's progress (say, Acked reaching the number of records put) without
// sleeping.
func (s *Server) WaitQueue(ctx context.Context, queueARN string, cond func(QueueStats) bool) error {
	notifier, _ := s.clock.(changeNotifier)
	for {
		var clockMoved <-chan struct{}
		if notifier != nil {
			clockMoved = notifier.changed()
		}
		var (
			st      QueueStats
			changed <-chan struct{}
			nextDue int64
			nowMs   int64
		)
		if err := s.withQueue(queueARN, func(q *queue, now int64) {
			st, changed, nowMs = q.counts, q.changedWaitLocked(), now
			if len(q.deadlines) > 0 {
				nextDue = q.deadlines[0].deadlineMs
			}
		}); err != nil {
			return err
		}
		if cond(st) {
			return nil
		}
		var due <-chan time.Time
		var timer *time.Timer
		if notifier == nil && nextDue > 0 {
			timer = time.NewTimer(max(time.Duration(nextDue-nowMs)*time.Millisecond, time.Millisecond))
			due = timer.C
		}
		var err error
		select {
		case <-changed:
		case <-clockMoved:
		case <-due:
		case <-ctx.Done():
			err = fmt.Errorf("kinesistest: waiting on queue %s (%+v): %w", queueARN, st, context.Cause(ctx))
		}
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			return err
		}
	}
}

// RecordID returns the RecordId every queue on stream gives the stream record
// with sequence number sequenceNumber, so a test can match what a queue
// delivered with StreamRecords.
func (s *Server) RecordID(stream, sequenceNumber string) (string, error) {
	st, err := s.directStream(stream)
	if err != nil {
		return "", err
	}
	p, ok := parseSeq(sequenceNumber)
	if !ok || p.beyond {
		return "", fmt.Errorf("kinesistest: %q is not a sequence number of this server", sequenceNumber)
	}
	return recordID(st.uid, p.counter), nil
}

// QueueInfo names a queue the server holds.
type QueueInfo struct {
	Name   string
	ARN    string // as a client in us-east-1 sees it
	Stream string
	Status string // CREATING, ACTIVE, UPDATING or DELETING
}

// Queues lists the server's queues, oldest first.
func (s *Server) Queues() []QueueInfo {
	nowMs := s.clock.Now().UnixMilli()
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	var out []QueueInfo
	for _, q := range s.queues.liveLocked(nowMs) {
		out = append(out, QueueInfo{Name: q.name, ARN: q.arn(Region), Stream: q.stream.name, Status: q.statusLocked(nowMs)})
	}
	return out
}
