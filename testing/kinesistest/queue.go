package kinesistest

import (
	"math/rand/v2"
	"regexp"
	"strconv"
	"sync"
)

// Kinesis queues (2026-11): a queue delivers the records of one ON_DEMAND
// stream to consumers that receive up to 10 at a time, each with a receipt
// handle, and acknowledge them. A received record is in flight, invisible to
// other receivers, until its visibility timeout runs out; then it is visible
// again with its receive count one higher, or, after MaxReceiveCount receives
// with dead-letter handling on, a dead-letter record that only the dead-letter
// operations return.
//
// Locking, outermost first: Server.consumerMu, Server.queues.mu (the registry
// and every queue's control state), Server.mu, stream.mu, shard.mu, queue.mu
// (a queue's records). A put holds its stream's read lock and its shard's lock
// while it hands the record to the stream's queues, so queue.mu never takes
// any other lock, and a long poll waits with no lock held.

// Queue statuses, dead-letter targets and starting positions as the service
// spells them.
const (
	queueCreating = "CREATING"
	queueActive   = "ACTIVE"
	queueUpdating = "UPDATING"
	queueDeleting = "DELETING"

	deadLetterBuiltIn = "BUILT_IN"
	deadLetterNone    = "NONE"

	queueStartLatest      = "LATEST"
	queueStartTrimHorizon = "TRIM_HORIZON"
	queueStartAtTimestamp = "AT_TIMESTAMP"

	codeThrottling = "ThrottlingException"
)

// Queue defaults and bounds. Those the service does not document are marked;
// testing/README.md lists them as assumptions.
const (
	defaultQueueVisibilitySec = 30
	maxQueueVisibilitySec     = 43200
	defaultMaxReceiveCount    = 6
	maxMaxReceiveCount        = 1000 // assumed, as SQS's maxReceiveCount
	defaultQueueInFlightLimit = 120_000
	maxQueuesTransitioning    = 5 // CREATING or DELETING per account
	maxQueueReceiveLimit      = 10
	defaultQueueWaitSec       = 9
	maxQueueWaitSec           = 20
	maxQueueEntries           = 10
	maxReceiptHandleLen       = 1024
	maxQueueTags              = 50
	// queueShuffleWindow is how far from the front of the visible records a
	// receive may pick: delivery order is shuffled within it.
	queueShuffleWindow = 32
)

// queueARNPattern is the model's pattern with the account and queue id
// captured.
var queueARNPattern = regexp.MustCompile(`^arn:aws.*:kinesis:.*:(\d{12}):queue/(\S+)$`)

// queueAttrs are the attributes a queue applies.
type queueAttrs struct {
	visibilitySec int32
	deadLetter    bool  // BUILT_IN
	maxReceives   int32 // meaningful when deadLetter
}

func defaultQueueAttrs() queueAttrs {
	return queueAttrs{visibilitySec: defaultQueueVisibilitySec, deadLetter: true, maxReceives: defaultMaxReceiveCount}
}

// qrec states. A record moves visible -> in flight -> acked, or back to
// visible when its visibility runs out, or to dead-visible after its last
// allowed receive; dead-visible -> dead-in-flight -> discarded (acknowledged)
// or back to visible (restored). Every state ends in gone when the stream's
// retention drops the record.
const (
	recVisible uint8 = iota
	recInFlight
	recDeadVisible
	recDeadInFlight
	recAcked
	recDiscarded
	recGone
)

var recStateNames = [...]string{"VISIBLE", "IN_FLIGHT", "DEAD_VISIBLE", "DEAD_IN_FLIGHT", "ACKED", "DISCARDED", "GONE"}

// qrec is one stream record as one queue holds it.
type qrec struct {
	serial    uint64 // position in the queue's intake, named by receipt handles
	id        string // RecordId: the same in every queue on the stream
	data      []byte // shared with the stream's copy, never modified
	pk        string // "" when the producer sent none (AUTO streams)
	arrivalMs int64

	state      uint8
	receives   int32 // since creation or the last restore
	deliveries int32 // every receive, both sides, ever
	firstMs    int64 // first receive; 0 until then
	deadlineMs int64 // while in flight
	gen        uint32
	epoch      uint32 // validates ring entries (visibleRing)
	heapIdx    int    // in queue.deadlines; -1 when not in flight
	ackLost    bool   // acknowledged, but the fault RedeliverAfterAck brings it back
	acks       int32  // successful acknowledgements on the normal side
}

// queue is one Kinesis queue.
type queue struct {
	serial  uint64 // creation order on this server; in receipt handles
	id      string
	name    string
	stream  *stream
	created int64 // ms
	tags    map[string]string

	startType    string
	startGivenMs int64 // AT_TIMESTAMP's timestamp
	startMs      int64 // the effective position, reported once ACTIVE
	fromMs       int64 // records that arrived earlier are not delivered

	// Control state, guarded by queueRegistry.mu.
	activeMs      int64
	updateUntilMs int64
	deleting      bool
	deletedMs     int64

	mu            sync.Mutex
	attrs         queueAttrs  // applied now
	pending       *queueAttrs // set by UpdateQueue, applied from pendingMs
	pendingMs     int64
	closed        bool // deleted: delivers nothing, every handle is invalid
	rng           *rand.Rand
	inFlightLimit int
	recs          []*qrec // by serial - base, in intake order
	base          uint64
	visible       visibleRing
	deadVisible   visibleRing
	deadlines     deadlineHeap // in-flight records of both sides
	counts        QueueStats
	acked         map[string]int // RecordId -> successful acknowledgements
	visibleCh     chan struct{}  // closed when a record may have become visible
	changedCh     chan struct{}  // closed on any change
}

// arn is the queue's ARN as a client in region sees it.
func (q *queue) arn(region string) string {
	if region == "" {
		region = Region
	}
	return "arn:aws:kinesis:" + region + ":" + AccountID + ":queue/" + q.id
}

// statusLocked is the queue's status at nowMs. Caller holds the registry's mu.
func (q *queue) statusLocked(nowMs int64) string {
	switch {
	case q.deleting:
		return queueDeleting
	case nowMs < q.activeMs:
		return queueCreating
	case nowMs < q.updateUntilMs:
		return queueUpdating
	}
	return queueActive
}

// attrsLocked returns the attributes in force at nowMs, applying an update
// whose UPDATING period is over. Caller holds q.mu.
func (q *queue) attrsLocked(nowMs int64) queueAttrs {
	if q.pending != nil && nowMs >= q.pendingMs {
		q.attrs, q.pending = *q.pending, nil
	}
	return q.attrs
}

// describedAttrsLocked is what DescribeQueue reports: the last attributes
// asked for. Caller holds q.mu.
func (q *queue) describedAttrsLocked() queueAttrs {
	if q.pending != nil {
		return *q.pending
	}
	return q.attrs
}

// recordID is the RecordId of the stream record with counter counter, the
// same in every queue on the stream: a bijective mix of the counter, so ids
// are unique and do not sort in arrival order, and the stream's uid, so a
// stream created again under the same name gives new ids.
func recordID(streamUID, counter uint64) string {
	x := counter
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	var b [24]byte
	const hexDigits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		b[i] = hexDigits[x&0xf]
		x >>= 4
	}
	u := uint32(streamUID)
	for i := 23; i >= 16; i-- {
		b[i] = hexDigits[u&0xf]
		u >>= 4
	}
	return string(b[:])
}

// queueID mints the opaque id of the queue with serial n: not derived from
// its name, a valid DNS label (the SDK puts it in the endpoint's host name),
// and the same on every run, so tests that print ARNs are reproducible.
func queueID(n uint64) string {
	x := n + 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return "q" + strconv.FormatUint(x, 36)
}

// newQueue makes a queue; it is not yet attached to its stream.
func newQueue(serial uint64, name string, st *stream, nowMs int64, attrs queueAttrs, seed int64, inFlightLimit int) *queue {
	return &queue{
		serial:        serial,
		id:            queueID(serial),
		name:          name,
		stream:        st,
		created:       nowMs,
		attrs:         attrs,
		rng:           rand.New(rand.NewPCG(uint64(seed), serial)),
		inFlightLimit: inFlightLimit,
		acked:         make(map[string]int),
	}
}

// ingestLocked takes a new stream record into the queue. Caller holds q.mu.
func (q *queue) ingestLocked(id string, r *record) {
	if q.closed || r.arrivalMs < q.fromMs {
		return
	}
	rec := &qrec{serial: q.base + uint64(len(q.recs)), id: id, data: r.data, pk: r.pk, arrivalMs: r.arrivalMs, heapIdx: -1}
	q.recs = append(q.recs, rec)
	q.makeVisibleLocked(rec)
	q.counts.Ingested++
}

// ingest takes a new stream record into the queue; the put that stored it
// holds the stream's read lock and the shard's lock.
func (q *queue) ingest(id string, r *record) {
	q.mu.Lock()
	q.ingestLocked(id, r)
	q.mu.Unlock()
}

// makeVisibleLocked puts rec on the normal side's visible records.
func (q *queue) makeVisibleLocked(rec *qrec) {
	rec.state = recVisible
	rec.epoch++
	q.visible.push(rec)
	q.counts.Visible++
	q.wakeLocked(true)
}

// makeDeadVisibleLocked puts rec on the dead-letter side's visible records.
func (q *queue) makeDeadVisibleLocked(rec *qrec) {
	rec.state = recDeadVisible
	rec.epoch++
	q.deadVisible.push(rec)
	q.counts.DeadVisible++
	q.wakeLocked(true)
}

// leaveLocked takes rec out of its current state's count (and the deadline
// heap), before it moves to another state.
func (q *queue) leaveLocked(rec *qrec) {
	switch rec.state {
	case recVisible:
		q.counts.Visible--
	case recInFlight:
		q.counts.InFlight--
	case recDeadVisible:
		q.counts.DeadVisible--
	case recDeadInFlight:
		q.counts.DeadInFlight--
	}
	if rec.heapIdx >= 0 {
		q.deadlines.remove(rec)
	}
	rec.epoch++ // ring entries of rec are stale now
}

// wakeLocked tells waiters that something changed; visible says a record may
// have become visible, which wakes long polls too.
func (q *queue) wakeLocked(visible bool) {
	if visible && q.visibleCh != nil {
		close(q.visibleCh)
		q.visibleCh = nil
	}
	if q.changedCh != nil {
		close(q.changedCh)
		q.changedCh = nil
	}
}

// visibleWaitLocked returns a channel closed when a record may have become
// visible.
func (q *queue) visibleWaitLocked() <-chan struct{} {
	if q.visibleCh == nil {
		q.visibleCh = make(chan struct{})
	}
	return q.visibleCh
}

// changedWaitLocked returns a channel closed at the queue's next change.
func (q *queue) changedWaitLocked() <-chan struct{} {
	if q.changedCh == nil {
		q.changedCh = make(chan struct{})
	}
	return q.changedCh
}

// advanceLocked brings the queue to nowMs: records past the stream's
// retention (arrived at or before cutoffMs) leave, and in-flight records whose
// visibility has run out become visible again (or dead letters).
func (q *queue) advanceLocked(nowMs, cutoffMs int64) {
	attrs := q.attrsLocked(nowMs)
	q.trimLocked(cutoffMs)
	for len(q.deadlines) > 0 && q.deadlines[0].deadlineMs <= nowMs {
		q.timeoutLocked(q.deadlines[0], attrs)
	}
}

// trimLocked drops the records at the front of the intake that the stream's
// retention has dropped. Records taken in slightly out of arrival order (two
// puts racing) leave with the first one after them that expires, or when a
// receive or acknowledgement meets them (expiredLocked).
func (q *queue) trimLocked(cutoffMs int64) {
	n := 0
	for n < len(q.recs) && q.recs[n].arrivalMs <= cutoffMs {
		q.dropLocked(q.recs[n])
		n++
	}
	if n == 0 {
		return
	}
	clear(q.recs[:n])
	q.recs = q.recs[n:]
	q.base += uint64(n)
	// Records that left while visible leave stale ring entries; nobody may
	// receive them soon (dead letters nobody reads), so sweep when they
	// outnumber the live ones.
	q.visible.sweep(recVisible, q.counts.Visible)
	q.deadVisible.sweep(recDeadVisible, q.counts.DeadVisible)
}

// dropLocked marks rec gone, counting it as trimmed unless it was settled.
func (q *queue) dropLocked(rec *qrec) {
	if rec.state == recGone {
		return
	}
	if rec.state != recAcked && rec.state != recDiscarded {
		q.counts.Trimmed++
	}
	q.leaveLocked(rec)
	rec.state = recGone
	rec.data = nil
	q.wakeLocked(false)
}

// expiredLocked drops rec if the stream's retention has, and says so.
func (q *queue) expiredLocked(rec *qrec, cutoffMs int64) bool {
	if rec.state == recGone {
		return true
	}
	if rec.arrivalMs <= cutoffMs {
		q.dropLocked(rec)
		return true
	}
	return false
}

// timeoutLocked ends rec's visibility timeout: a normal record becomes
// visible again, or a dead letter after its MaxReceiveCount-th receive; a dead
// letter becomes visible on the dead-letter side again.
func (q *queue) timeoutLocked(rec *qrec, attrs queueAttrs) {
	dead := rec.state == recDeadInFlight
	q.leaveLocked(rec)
	if dead {
		q.makeDeadVisibleLocked(rec)
		return
	}
	q.counts.Expired++
	if rec.ackLost {
		rec.ackLost = false
		q.counts.RedeliveredAfterAck++
	}
	if attrs.deadLetter && rec.receives >= attrs.maxReceives {
		q.counts.DeadLettered++
		q.makeDeadVisibleLocked(rec)
		return
	}
	q.makeVisibleLocked(rec)
}

// lookupLocked returns the record a handle's serial names, or nil when the
// queue no longer holds it (retention) or never did.
func (q *queue) lookupLocked(serial uint64) (rec *qrec, trimmed bool) {
	if serial < q.base {
		return nil, true
	}
	if i := serial - q.base; i < uint64(len(q.recs)) {
		return q.recs[i], false
	}
	return nil, false
}
