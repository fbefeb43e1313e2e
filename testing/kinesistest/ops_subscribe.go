package kinesistest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"time"
)

// SubscribeToShard: validation and the 400 errors before the stream, then an
// event stream (eventstream.go) pushing SubscribeToShardEvent frames until the
// shard ends, the lifetime passes, another subscription takes over, the client
// goes away or the server shuts down.

const (
	// An event carries at most this many records and, beyond its first
	// record, this many bytes of data and partition keys. The service's caps
	// are not documented; these keep 2 MiB/s pacing smooth.
	maxEventRecords = 10000
	maxEventBytes   = 1 << 20
)

type startingPositionJSON struct {
	Type           *string
	SequenceNumber *string
	Timestamp      *epochMillis
}

type subscribeToShardInput struct {
	ConsumerARN      *string
	ShardId          *string //nolint:revive // the model's member name
	StartingPosition *startingPositionJSON
}

// subscribeEvent is the payload of a SubscribeToShardEvent frame.
type subscribeEvent struct {
	Records []recordJSON
	// ContinuationSequenceNumber is null in the last event of a closed shard.
	ContinuationSequenceNumber *string `json:",omitempty"`
	MillisBehindLatest         int64
	ChildShards                []childShardJSON `json:",omitempty"`
}

func (s *Server) subscribeToShard(r *request) (any, error) {
	var in subscribeToShardInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	switch a := in.ConsumerARN; {
	case a == nil:
		v.addNull("consumerARN")
	case len(*a) < 1 || len(*a) > 2048 || !consumerARNPattern.MatchString(*a):
		v.add(*a, "consumerARN", `satisfy regular expression pattern: ^(arn):aws.*:kinesis:.*:\d{12}:.*stream\/[a-zA-Z0-9_.-]+\/consumer\/[a-zA-Z0-9_.-]+:[0-9]+`)
	}
	checkShardIDMember(in.ShardId, "shardId", &v)
	p := in.StartingPosition
	if p == nil {
		v.addNull("startingPosition")
	} else if p.Type == nil {
		v.addNull("startingPosition.type")
	} else {
		switch *p.Type {
		case iterAtSequence, iterAfterSequence, iterTrimHorizon, iterLatest, iterAtTimestamp:
		default:
			v.add(*p.Type, "startingPosition.type",
				"satisfy enum value set: [AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, AT_TIMESTAMP, TRIM_HORIZON, LATEST]")
		}
	}
	if p != nil && p.SequenceNumber != nil && !seqNumberPattern.MatchString(*p.SequenceNumber) {
		v.add(*p.SequenceNumber, "startingPosition.sequenceNumber", `satisfy regular expression pattern: 0|([1-9]\d{0,128})`)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	typ := *p.Type
	switch {
	case (typ == iterAtSequence || typ == iterAfterSequence) && p.SequenceNumber == nil:
		return nil, errorf(codeInvalidArgument, "StartingPosition of type %s requires a SequenceNumber.", typ)
	case typ != iterAtSequence && typ != iterAfterSequence && p.SequenceNumber != nil:
		return nil, errorf(codeInvalidArgument, "StartingPosition of type %s must not have a SequenceNumber.", typ)
	case typ == iterAtTimestamp && p.Timestamp == nil:
		return nil, errorf(codeInvalidArgument, "StartingPosition of type AT_TIMESTAMP requires a Timestamp.")
	case typ == iterAtTimestamp && int64(*p.Timestamp) > r.nowMs:
		return nil, errorf(codeInvalidArgument, "The timestampInMillis parameter cannot be greater than the currentTimestampInMillis. timestampInMillis: %d, currentTimestampInMillis: %d", int64(*p.Timestamp), r.nowMs)
	case typ != iterAtTimestamp && p.Timestamp != nil:
		return nil, errorf(codeInvalidArgument, "StartingPosition of type %s must not have a Timestamp.", typ)
	}

	s.consumerMu.Lock()
	c, err := s.consumerByARNLocked(*in.ConsumerARN, r.nowMs)
	var status string
	if err == nil {
		status = c.statusLocked(r.nowMs)
	}
	s.consumerMu.Unlock()
	if err != nil {
		return nil, err
	}
	if status != consumerActive {
		return nil, errorf(codeResourceInUse, "Consumer %s under account %s is not ACTIVE, instead in state %s.", *in.ConsumerARN, AccountID, status)
	}
	pos, err := s.subscribePosition(r, c.stream, *in.ShardId, p)
	if err != nil {
		return nil, err
	}

	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	if c.deleting || s.consumerLocked(c.stream, c.name, r.nowMs) != c {
		return nil, errConsumerNotFound(*in.ConsumerARN) // deregistered meanwhile
	}
	if s.subsClosed {
		return nil, errorf(codeServiceUnavailable, "The server is shutting down.")
	}
	cs := c.shardLocked(*in.ShardId)
	if cs.hasSub && r.nowMs-cs.lastSubMs < s.resubWindow.Milliseconds() {
		return nil, errorf(codeResourceInUse, "Another active subscription exists for consumer %s on shard %s, or one started less than %v ago.", *in.ConsumerARN, *in.ShardId, s.resubWindow)
	}
	sub := &subscription{
		consumer: c,
		shard:    *in.ShardId,
		arn:      *in.ConsumerARN,
		startMs:  r.nowMs,
		pacer:    cs.pacer,
		stop:     make(chan struct{}),
	}
	if old := cs.active; old != nil {
		old.end(errorf(codeResourceInUse, "Another subscription for consumer %s on shard %s took over this one.", *in.ConsumerARN, *in.ShardId))
	}
	cs.active, cs.lastSubMs, cs.hasSub = sub, r.nowMs, true
	s.subs[sub] = struct{}{}
	s.subsWG.Add(1)
	s.subscriptionsChangedLocked()
	return &subscriptionStream{s: s, sub: sub, pos: pos, codec: r.codec}, nil
}

// subscribePosition checks the shard and starting position of a subscription
// and returns the position it starts from.
func (s *Server) subscribePosition(r *request, st *stream, shardID string, p *startingPositionJSON) (uint64, error) {
	if !s.streamLive(st) {
		return 0, errStreamNotFound(st.name)
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	if err := st.requireReadableLocked(r.nowMs); err != nil {
		return 0, err
	}
	sh := st.shardLocked(shardID, r.nowMs)
	if sh == nil {
		return 0, errShardNotFound(shardID, st.name)
	}
	var seq parsedSeq
	if p.SequenceNumber != nil {
		var err error
		if seq, err = checkStartingSequence(*p.SequenceNumber, sh, st); err != nil {
			return 0, err
		}
	}
	var tsMs int64
	if p.Timestamp != nil {
		tsMs = int64(*p.Timestamp)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.trimLocked(st.cutoffMsLocked(r.nowMs))
	return sh.startPosLocked(*p.Type, seq, tsMs), nil
}

// finishSubscription forgets a subscription that has ended.
func (s *Server) finishSubscription(sub *subscription) {
	s.consumerMu.Lock()
	if cs := sub.consumer.shards[sub.shard]; cs != nil && cs.active == sub {
		cs.active = nil
	}
	delete(s.subs, sub)
	s.subscriptionsChangedLocked()
	s.consumerMu.Unlock()
	s.subsWG.Done()
}

// subscriptionStream writes one subscription's event stream.
type subscriptionStream struct {
	s   *Server
	sub *subscription
	pos uint64 // the next record to send is the first with counter >= pos

	w     http.ResponseWriter
	rc    *http.ResponseController
	buf   bytes.Buffer
	codec codec // the request's protocol, which the events' payloads use too
}

// errStopped ends the serve loop without writing anything more.
var errStopped = errors.New("subscription stopped")

func (ss *subscriptionStream) serve(w http.ResponseWriter, r *http.Request) {
	s, sub := ss.s, ss.sub
	defer s.finishSubscription(sub)
	ss.w, ss.rc = w, http.NewResponseController(w)
	w.Header()["Content-Type"] = []string{eventStreamContentType}
	w.WriteHeader(http.StatusOK)
	frame, err := initialResponseFrame(ss.codec)
	if err != nil || ss.write(frame) != nil {
		return
	}
	ctx := r.Context()
	heartbeat := time.NewTimer(s.subHeartbeat)
	defer heartbeat.Stop()
	lifetime := time.NewTimer(s.subLifetime)
	defer lifetime.Stop()
	// The first event goes out at once, records or not, so the client learns
	// a continuation number even on an idle shard.
	due := true
	for {
		// A ManualClock's change channel is taken before the clock is read, so
		// a move in between is not missed.
		var moved <-chan struct{}
		if cn, ok := s.clock.(changeNotifier); ok {
			moved = cn.changed()
		}
		select {
		case <-sub.stop:
			ss.stopped()
			return
		case <-s.quit:
			return
		case <-ctx.Done():
			return
		default:
		}
		nowMs := s.clock.Now().UnixMilli()
		left := time.Duration(sub.startMs+s.subLifetime.Milliseconds()-nowMs) * time.Millisecond
		if left <= 0 {
			return // lifetime over: end the body normally
		}
		lifetime.Reset(left)
		ev, bytes, wake, err := ss.next(nowMs)
		if err != nil {
			ss.writeException(err)
			return
		}
		if len(ev.Records) > 0 || ev.ContinuationSequenceNumber == nil || due {
			if err := ss.send(ctx, &ev, bytes); err != nil {
				return
			}
			if ev.ContinuationSequenceNumber == nil {
				return // the shard has ended
			}
			due = false
			heartbeat.Reset(s.subHeartbeat)
			if len(ev.Records) > 0 {
				continue // more may be waiting
			}
		}
		select {
		case <-wake:
		case <-heartbeat.C:
			due = true
		case <-moved:
		case <-lifetime.C:
		case <-sub.stop:
			ss.stopped()
			return
		case <-s.quit:
			return
		case <-ctx.Done():
			return
		}
	}
}

// next reads the event to send from the subscription's position at nowMs and
// moves the position past its records. wake is closed when the shard next
// changes. The event has no continuation number when it is the shard's last.
func (ss *subscriptionStream) next(nowMs int64) (ev subscribeEvent, size int, wake <-chan struct{}, err error) {
	s, sub := ss.s, ss.sub
	st := sub.consumer.stream
	if !s.streamLive(st) {
		return ev, 0, nil, errStreamNotFound(st.name)
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	sh := st.shardLocked(sub.shard, nowMs)
	if sh == nil {
		return ev, 0, nil, errShardNotFound(sub.shard, st.name)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.trimLocked(st.cutoffMsLocked(nowMs))
	first := sh.indexAtLocked(ss.pos)
	end := first
	cutoff, hidden := s.readableCutoff(nowMs), false
	for end < len(sh.records) && end-first < maxEventRecords {
		rec := &sh.records[end]
		if rec.arrivalMs > cutoff {
			hidden = true // not readable yet
			break
		}
		if end > first && size+rec.size() > maxEventBytes {
			break
		}
		size += rec.size()
		end++
	}
	ev.Records = make([]recordJSON, end-first)
	for i := first; i < end; i++ {
		rec := &sh.records[i]
		ev.Records[i-first] = recordJSON{
			SequenceNumber:              rec.seq,
			ApproximateArrivalTimestamp: epochMillis(rec.arrivalMs),
			Data:                        rec.data,
			PartitionKey:                rec.pk,
		}
	}
	if end > first {
		ss.pos = sh.records[end-1].counter + 1
	}
	if hidden {
		// Caught up as far as a reader can see; the event after the record becomes
		// readable delivers it. The continuation stays before it.
		cont := formatSeq(max(ss.pos-1, sh.startCounter), sh.num)
		ev.ContinuationSequenceNumber = &cont
		wait := time.Duration(sh.records[end].arrivalMs-cutoff) * time.Millisecond
		return ev, size, readableIn(wait), nil
	}
	if end < len(sh.records) {
		// Never 0 while records wait: 0 means caught up.
		ev.MillisBehindLatest = max(1, nowMs-sh.records[end].arrivalMs)
		cont := formatSeq(ss.pos-1, sh.num)
		ev.ContinuationSequenceNumber = &cont
		return ev, size, sh.arrivalLocked(), nil
	}
	if sh.closed {
		ev.ChildShards = make([]childShardJSON, 0, len(sh.children))
		for _, c := range sh.children {
			ev.ChildShards = append(ev.ChildShards, childShardJSON{
				ShardId:      c.id,
				ParentShards: c.parentIDs(),
				HashKeyRange: hashKeyRangeJSON{StartingHashKey: c.startKey, EndingHashKey: c.endKey},
			})
		}
		return ev, size, nil, nil
	}
	// Caught up. Every record this shard stores from now on takes a counter
	// above the stream's current one (counters are taken under sh.mu), so the
	// continuation advances while the shard is idle, as the service's does,
	// and AFTER_SEQUENCE_NUMBER of it misses nothing.
	if c := st.counter.Load(); c < math.MaxUint64 {
		ss.pos = max(ss.pos, c+1)
	}
	cont := formatSeq(max(ss.pos-1, sh.startCounter), sh.num)
	ev.ContinuationSequenceNumber = &cont
	return ev, size, sh.arrivalLocked(), nil
}

// send writes one SubscribeToShardEvent, applying the injected faults and
// charging the pacer.
func (ss *subscriptionStream) send(ctx context.Context, ev *subscribeEvent, size int) error {
	s := ss.s
	if in := s.faults.Load(); in.appliesTo("SubscribeToShard") {
		if in.f.EventLatency > 0 {
			if err := ss.wait(ctx, in.f.EventLatency); err != nil {
				return err
			}
		}
		if in.hit(in.f.SubscriptionDropRate) {
			resetConnection(ss.w)
			return errStopped
		}
	}
	if s.limits.Load() && size > 0 {
		if err := ss.wait(ctx, ss.sub.pacer.reserve(size)); err != nil {
			return err
		}
	}
	frame, err := encodeEvent(&ss.buf, ev, ss.codec)
	if err != nil {
		s.logf("SubscribeToShard %s %s: %v", ss.sub.arn, ss.sub.shard, err)
		return err
	}
	return ss.write(frame)
}

// encodeEvent returns the event-stream frame of one SubscribeToShardEvent in
// the subscription's protocol; buf is scratch space for the payload.
func encodeEvent(buf *bytes.Buffer, ev *subscribeEvent, c codec) ([]byte, error) {
	buf.Reset()
	if err := c.encode(buf, ev); err != nil {
		return nil, fmt.Errorf("encoding an event: %w", err)
	}
	payload := buf.Bytes()
	if !c.cbor {
		payload = bytes.TrimRight(payload, "\n") // the JSON encoder's line end
	}
	frame, err := eventFrame(nil, payload, c)
	if err != nil {
		return nil, fmt.Errorf("framing an event: %w", err)
	}
	return frame, nil
}

// wait sleeps d in real time unless the subscription ends first.
func (ss *subscriptionStream) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ss.sub.stop:
		ss.stopped()
	case <-ss.s.quit:
	case <-ctx.Done():
	}
	return errStopped
}

// stopped sends the reason the subscription was ended, if any.
func (ss *subscriptionStream) stopped() {
	if ss.sub.reason != nil {
		ss.writeException(ss.sub.reason)
	}
}

// writeException ends the stream with err as an exception frame.
func (ss *subscriptionStream) writeException(err error) {
	ae, ok := err.(*apiError)
	if !ok {
		ae = errorf(codeInternalFailure, "%v", err)
	}
	ss.s.logf("SubscribeToShard %s %s ends with %s: %s", ss.sub.arn, ss.sub.shard, ae.code, ae.message)
	frame, ferr := exceptionFrame(ss.codec, ae.code, ae.message)
	if ferr != nil {
		ss.s.logf("SubscribeToShard %s %s: %v", ss.sub.arn, ss.sub.shard, ferr)
		return
	}
	ss.write(frame) //nolint:errcheck // the stream ends either way
}

// write sends one frame and flushes it, so the client sees it at once.
func (ss *subscriptionStream) write(frame []byte) error {
	if _, err := ss.w.Write(frame); err != nil {
		return fmt.Errorf("writing a frame: %w", err)
	}
	if err := ss.rc.Flush(); err != nil {
		return fmt.Errorf("flushing a frame: %w", err)
	}
	return nil
}

// jsonMarshal encodes v as the service does, without HTML escaping.
func jsonMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := newJSONEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// newJSONEncoder returns an encoder that writes JSON as the service does,
// without HTML escaping.
func newJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// resetConnection aborts the client's connection with a TCP reset. A
// connection that is merely closed, even in the middle of a frame, reads as
// a normal end of the event stream to aws-sdk-go-v2 (its decoder maps
// io.ErrUnexpectedEOF to io.EOF); a reset surfaces as the stream's Err(), as a
// broken connection to the service does.
func resetConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) //nolint:errcheck // best effort: a plain close still ends the stream
			}
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // net/http closes the connection quietly
}
