package kinesistest

import (
	"context"
	"encoding/binary"
	"strconv"
	"time"
)

// ReceiveQueueRecords, AcknowledgeQueueRecords, UpdateQueueRecordsVisibility
// and the dead-letter operations ReceiveDeadLetterQueueRecords,
// AcknowledgeDeadLetterQueueRecords, UpdateDeadLetterQueueRecordsVisibility
// and RestoreDeadLetterQueueRecords.

// Receipt handles are sealed like iterators (token.go): the queue, the
// record, its delivery generation and the side (normal or dead-letter). A
// handle works only while the record is in flight from the delivery that
// issued it.
const handlePayloadLen = 8 + 8 + 4 + 1

type handlePayload struct {
	queue uint64
	rec   uint64
	gen   uint32
	dead  bool
}

func (s *Server) mintHandle(p handlePayload) string {
	var b [handlePayloadLen]byte
	binary.BigEndian.PutUint64(b[0:], p.queue)
	binary.BigEndian.PutUint64(b[8:], p.rec)
	binary.BigEndian.PutUint32(b[16:], p.gen)
	if p.dead {
		b[20] = 1
	}
	return s.seal(b[:])
}

func (s *Server) openHandle(h string) (handlePayload, bool) {
	b, ok := s.open(h)
	if !ok || len(b) != handlePayloadLen || b[20] > 1 {
		return handlePayload{}, false
	}
	return handlePayload{
		queue: binary.BigEndian.Uint64(b[0:]),
		rec:   binary.BigEndian.Uint64(b[8:]),
		gen:   binary.BigEndian.Uint32(b[16:]),
		dead:  b[20] == 1,
	}, true
}

// queueThrottled draws the fault QueueThrottleRate for a queue request.
func queueThrottled(r *request) error {
	if r.faults != nil && r.faults.hit(r.faults.f.QueueThrottleRate) {
		return errorf(codeThrottling, "Rate exceeded for queue operations under account %s (injected by kinesistest).", AccountID)
	}
	return nil
}

type receiveQueueRecordsInput struct {
	QueueARN                 *string
	Limit                    *int32
	VisibilityTimeoutSeconds *int32
	WaitTimeSeconds          *int32
}

type queueRecordJSON struct {
	RecordId                    string //nolint:revive // the model's member name
	ReceiptHandle               string
	Data                        []byte
	PartitionKey                string `json:",omitempty"`
	ApproximateArrivalTimestamp epochMillis
	FirstReceiveTimestamp       epochMillis
	ReceiveCount                int32
}

type receiveQueueRecordsOutput struct {
	QueueRecords []queueRecordJSON
}

func (s *Server) receiveQueueRecords(r *request) (any, error) { return s.receive(r, false) }

func (s *Server) receiveDeadLetterQueueRecords(r *request) (any, error) { return s.receive(r, true) }

// receive answers a receive of either side: at once when records are
// visible, otherwise when one becomes visible (a put, a visibility timeout
// running out, a release or restore), when WaitTimeSeconds have passed in
// real time or on the server clock, whichever comes first, or when the client
// or the server goes away. No lock is held while it waits.
func (s *Server) receive(r *request, dead bool) (any, error) {
	var in receiveQueueRecordsInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkQueueARN(in.QueueARN, &v)
	limit := maxQueueReceiveLimit
	if in.Limit != nil {
		limit = int(*in.Limit)
		if limit < 1 || limit > maxQueueReceiveLimit {
			v.add(strconv.Itoa(limit), "limit", "have value between 1 and 10")
		}
	}
	checkVisibility(in.VisibilityTimeoutSeconds, "visibilityTimeoutSeconds", &v)
	waitSec := int64(defaultQueueWaitSec)
	if in.WaitTimeSeconds != nil {
		waitSec = int64(*in.WaitTimeSeconds)
		if waitSec < 0 || waitSec > maxQueueWaitSec {
			v.add(strconv.FormatInt(waitSec, 10), "waitTimeSeconds", "have value between 0 and 20")
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	q, status, err := s.queueByARN(*in.QueueARN, r.nowMs)
	if err != nil {
		return nil, err
	}
	if status != queueActive && status != queueUpdating {
		return nil, errQueueNotActive(q, status)
	}
	if err := queueThrottled(r); err != nil {
		return nil, err
	}
	ctx := r.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	notifier, _ := s.clock.(changeNotifier)
	realEnd := time.Now().Add(time.Duration(waitSec) * time.Second)
	clockEndMs := r.nowMs + waitSec*1000
	out := receiveQueueRecordsOutput{QueueRecords: []queueRecordJSON{}}
	polling := false
	defer func() {
		if polling {
			q.addPolling(-1)
		}
	}()
	for {
		// Take the clock's channel first, so a move during the take is not missed.
		var clockMoved <-chan struct{}
		if notifier != nil {
			clockMoved = notifier.changed()
		}
		nowMs := s.clock.Now().UnixMilli()
		recs, wake, nextDueMs, err := s.takeQueueRecords(q, nowMs, q.stream.cutoffMs(nowMs), limit, in.VisibilityTimeoutSeconds, dead)
		if err != nil {
			return nil, err
		}
		if len(recs) > 0 {
			out.QueueRecords = recs
			return out, nil
		}
		remaining := time.Until(realEnd)
		if wake == nil || remaining <= 0 || nowMs >= clockEndMs {
			q.countEmptyReceive()
			return out, nil
		}
		// A clock that does not say when it moves is read again when the
		// next visibility timeout is due.
		if notifier == nil && nextDueMs > 0 {
			remaining = min(remaining, max(time.Duration(nextDueMs-nowMs)*time.Millisecond, time.Millisecond))
		}
		if !polling {
			polling = true
			q.addPolling(1)
		}
		t := time.NewTimer(remaining)
		select {
		case <-wake:
		case <-clockMoved:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return out, nil // nobody reads the answer
		case <-s.quit:
			t.Stop()
			return out, nil
		}
		t.Stop()
	}
}

// takeQueueRecords receives up to limit records of one side of q at nowMs.
// With none visible it returns a channel closed when one may have become
// visible (nil once the queue is deleted) and the next visibility deadline (0:
// none). The receipt handles are sealed after the queue's lock is released.
func (s *Server) takeQueueRecords(q *queue, nowMs, cutoffMs int64, limit int, visibility *int32, dead bool) ([]queueRecordJSON, <-chan struct{}, int64, error) {
	var minted []handlePayload
	out, wake, next, err := q.take(nowMs, cutoffMs, limit, visibility, dead, &minted)
	for i := range out {
		out[i].ReceiptHandle = s.mintHandle(minted[i])
	}
	return out, wake, next, err
}

// take is takeQueueRecords under the queue's lock; minted gets each record's
// handle payload.
func (q *queue) take(nowMs, cutoffMs int64, limit int, visibility *int32, dead bool, minted *[]handlePayload) ([]queueRecordJSON, <-chan struct{}, int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, nil, 0, nil
	}
	q.advanceLocked(nowMs, cutoffMs)
	attrs := q.attrsLocked(nowMs)
	visSec := attrs.visibilitySec
	if visibility != nil {
		visSec = *visibility
	}
	room := q.inFlightLimit - q.counts.InFlight - q.counts.DeadInFlight
	if room <= 0 {
		return nil, nil, 0, errorf(codeLimitExceeded, "Queue %s under account %s has %d records in flight, the maximum; acknowledge records or change their visibility before receiving more.",
			q.name, AccountID, q.inFlightLimit)
	}
	ring, want, inFlight := &q.visible, recVisible, recInFlight
	if dead {
		ring, want, inFlight = &q.deadVisible, recDeadVisible, recDeadInFlight
	}
	var out []queueRecordJSON
	for len(out) < min(limit, room) {
		rec := ring.pick(q.rng, want)
		if rec == nil {
			break
		}
		if q.expiredLocked(rec, cutoffMs) {
			continue
		}
		q.leaveLocked(rec)
		// A record can reach its last receive while visible when UpdateQueue
		// lowers MaxReceiveCount; it becomes a dead letter when next met.
		if !dead && attrs.deadLetter && rec.receives >= attrs.maxReceives {
			q.counts.DeadLettered++
			q.makeDeadVisibleLocked(rec)
			continue
		}
		rec.receives++
		rec.deliveries++
		if rec.firstMs == 0 {
			rec.firstMs = nowMs
		}
		rec.gen++
		rec.state = inFlight
		rec.deadlineMs = nowMs + int64(visSec)*1000
		q.deadlines.push(rec)
		if dead {
			q.counts.DeadInFlight++
			q.counts.DeadReceived++
		} else {
			q.counts.InFlight++
			q.counts.Received++
			if rec.receives > 1 {
				q.counts.Redelivered++
			}
		}
		*minted = append(*minted, handlePayload{queue: q.serial, rec: rec.serial, gen: rec.gen, dead: dead})
		out = append(out, queueRecordJSON{
			RecordId:                    rec.id,
			Data:                        rec.data,
			PartitionKey:                rec.pk,
			ApproximateArrivalTimestamp: epochMillis(rec.arrivalMs),
			FirstReceiveTimestamp:       epochMillis(rec.firstMs),
			ReceiveCount:                rec.receives,
		})
	}
	if len(out) > 0 {
		q.wakeLocked(false)
		return out, nil, 0, nil
	}
	var next int64
	if len(q.deadlines) > 0 {
		next = q.deadlines[0].deadlineMs
	}
	return nil, q.visibleWaitLocked(), next, nil
}

// addPolling counts long polls starting (1) or ending (-1) to wait.
func (q *queue) addPolling(d int) {
	q.mu.Lock()
	q.counts.Polling += d
	q.wakeLocked(false)
	q.mu.Unlock()
}

// countEmptyReceive counts a receive that ended with no records.
func (q *queue) countEmptyReceive() {
	q.mu.Lock()
	q.counts.EmptyReceives++
	q.wakeLocked(false)
	q.mu.Unlock()
}

// entryOp is what an entry operation does with each record.
type entryOp int

const (
	opAcknowledge entryOp = iota
	opVisibility
	opRestore
)

type queueEntryInput struct {
	ReceiptHandle            *string
	VisibilityTimeoutSeconds *int32
}

type queueEntriesInput struct {
	QueueARN *string
	Entries  []queueEntryInput
}

type queueEntryResultJSON struct {
	ReceiptHandle string
}

type queueEntryErrorJSON struct {
	ReceiptHandle string
	ErrorCode     string
	ErrorMessage  string
}

type queueEntriesOutput struct {
	Successful []queueEntryResultJSON
	Failed     []queueEntryErrorJSON
}

func (s *Server) acknowledgeQueueRecords(r *request) (any, error) {
	return s.settle(r, opAcknowledge, false)
}

func (s *Server) updateQueueRecordsVisibility(r *request) (any, error) {
	return s.settle(r, opVisibility, false)
}

func (s *Server) acknowledgeDeadLetterQueueRecords(r *request) (any, error) {
	return s.settle(r, opAcknowledge, true)
}

func (s *Server) updateDeadLetterQueueRecordsVisibility(r *request) (any, error) {
	return s.settle(r, opVisibility, true)
}

func (s *Server) restoreDeadLetterQueueRecords(r *request) (any, error) {
	return s.settle(r, opRestore, true)
}

// settle carries out an entry operation on one side of a queue: each entry
// succeeds or fails on its own, and the request succeeds as a whole.
func (s *Server) settle(r *request, op entryOp, dead bool) (any, error) {
	var in queueEntriesInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkQueueARN(in.QueueARN, &v)
	switch n := len(in.Entries); {
	case in.Entries == nil:
		v.addNull("entries")
	case n < 1 || n > maxQueueEntries:
		v.add("["+strconv.Itoa(n)+" entries]", "entries", "have length between 1 and 10")
	}
	for i, e := range in.Entries {
		member := "entries." + strconv.Itoa(i+1) + ".member."
		switch h := e.ReceiptHandle; {
		case h == nil:
			v.addNull(member + "receiptHandle")
		case len(*h) < 1 || len(*h) > maxReceiptHandleLen:
			v.add(*h, member+"receiptHandle", "have length between 1 and 1024")
		}
		if op == opVisibility {
			if e.VisibilityTimeoutSeconds == nil {
				v.addNull(member + "visibilityTimeoutSeconds")
			}
			checkVisibility(e.VisibilityTimeoutSeconds, member+"visibilityTimeoutSeconds", &v)
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	q, status, err := s.queueByARN(*in.QueueARN, r.nowMs)
	if err != nil {
		return nil, err
	}
	if status == queueCreating {
		return nil, errQueueNotActive(q, status)
	}
	if err := queueThrottled(r); err != nil {
		return nil, err
	}
	cutoff := q.stream.cutoffMs(r.nowMs)
	out := queueEntriesOutput{Successful: []queueEntryResultJSON{}, Failed: []queueEntryErrorJSON{}}
	// Check the handles' seals before taking the queue's lock.
	opened := make([]openedHandle, len(in.Entries))
	for i, e := range in.Entries {
		opened[i].p, opened[i].ok = s.openHandle(*e.ReceiptHandle)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.advanceLocked(r.nowMs, cutoff)
	}
	for i, e := range in.Entries {
		h := *e.ReceiptHandle
		code, msg := "", ""
		if r.faults != nil {
			if code = r.faults.queueEntryFault(); code != "" {
				msg = "Injected by kinesistest."
			}
		}
		if code == "" {
			code, msg = q.settleLocked(r, opened[i], op, dead, e.VisibilityTimeoutSeconds, cutoff)
		}
		if code != "" {
			out.Failed = append(out.Failed, queueEntryErrorJSON{ReceiptHandle: h, ErrorCode: code, ErrorMessage: msg})
			continue
		}
		out.Successful = append(out.Successful, queueEntryResultJSON{ReceiptHandle: h})
	}
	q.wakeLocked(false)
	return out, nil
}

// openedHandle is a receipt handle whose seal was checked (ok) and opened.
type openedHandle struct {
	p  handlePayload
	ok bool
}

// settleLocked applies one entry; it returns the entry's error code and
// message, or "" when it succeeded. Caller holds q.mu.
func (q *queue) settleLocked(r *request, h openedHandle, op entryOp, dead bool, visibility *int32, cutoffMs int64) (code, msg string) {
	p := h.p
	switch {
	case !h.ok:
		return codeInvalidArgument, "The receipt handle is not valid."
	case p.queue != q.serial:
		return codeInvalidArgument, "The receipt handle was not issued by queue " + q.name + "."
	case q.closed:
		return codeInvalidArgument, "Queue " + q.name + " is being deleted; its receipt handles are no longer valid."
	case p.dead != dead && dead:
		return codeInvalidArgument, "The receipt handle is not a dead-letter record's; use the queue record operations."
	case p.dead != dead:
		return codeInvalidArgument, "The receipt handle is a dead-letter record's; use the dead-letter operations."
	}
	rec, trimmed := q.lookupLocked(p.rec)
	if rec == nil && !trimmed {
		return codeInvalidArgument, "The receipt handle is not valid."
	}
	if rec == nil || q.expiredLocked(rec, cutoffMs) {
		return codeResourceNotFound, "The record has left the stream's retention period."
	}
	want := recInFlight
	if dead {
		want = recDeadInFlight
	}
	if rec.state != want || rec.gen != p.gen {
		q.counts.StaleHandles++
		return codeInvalidArgument, "The receipt handle has expired: the record was acknowledged, received again, or its visibility timeout ran out."
	}
	switch {
	case op == opAcknowledge && !dead:
		q.counts.Acked++
		rec.acks++
		q.acked[rec.id]++
		if r.faults != nil && r.faults.hit(r.faults.f.QueueRedeliverAfterAckRate) {
			// Reported done, but the record stays in flight and comes back
			// when its visibility runs out; the handle is spent either way.
			rec.ackLost = true
			rec.gen++
			return "", ""
		}
		q.leaveLocked(rec)
		rec.state = recAcked
	case op == opAcknowledge:
		q.counts.DeadAcked++
		q.leaveLocked(rec)
		rec.state = recDiscarded
	case op == opVisibility:
		rec.deadlineMs = r.nowMs + int64(*visibility)*1000
		q.deadlines.fix(rec)
		if *visibility == 0 {
			q.timeoutLocked(rec, q.attrsLocked(r.nowMs))
		}
	case op == opRestore:
		q.counts.Restored++
		q.leaveLocked(rec)
		rec.receives = 0
		q.makeVisibleLocked(rec)
	}
	return "", ""
}
