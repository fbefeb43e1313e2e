package kinesistest

import (
	"math"
	"strconv"
	"time"
)

// GetShardIterator and GetRecords.

const (
	maxGetRecordsLimit = 10000
	// maxGetRecordsBytes caps one GetRecords page, counting data and
	// partition keys.
	maxGetRecordsBytes = 10 << 20
)

// Shard iterator types as the service spells them.
const (
	iterAtSequence    = "AT_SEQUENCE_NUMBER"
	iterAfterSequence = "AFTER_SEQUENCE_NUMBER"
	iterTrimHorizon   = "TRIM_HORIZON"
	iterLatest        = "LATEST"
	iterAtTimestamp   = "AT_TIMESTAMP"
)

type getShardIteratorInput struct {
	streamRef
	ShardId                *string //nolint:revive // the model's member name
	ShardIteratorType      *string
	StartingSequenceNumber *string
	Timestamp              *epochMillis
	DryRun                 *bool
}

type getShardIteratorOutput struct {
	ShardIterator string
}

func (s *Server) getShardIterator(r *request) (any, error) {
	var in getShardIteratorInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkShardIDMember(in.ShardId, "shardId", &v)
	if in.ShardIteratorType == nil {
		v.addNull("shardIteratorType")
	} else {
		switch *in.ShardIteratorType {
		case iterAtSequence, iterAfterSequence, iterTrimHorizon, iterLatest, iterAtTimestamp:
		default:
			v.add(*in.ShardIteratorType, "shardIteratorType",
				"satisfy enum value set: [AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, AT_TIMESTAMP, TRIM_HORIZON, LATEST]")
		}
	}
	if q := in.StartingSequenceNumber; q != nil && !seqNumberPattern.MatchString(*q) {
		v.add(*q, "startingSequenceNumber", `satisfy regular expression pattern: 0|([1-9]\d{0,128})`)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	typ := *in.ShardIteratorType
	switch {
	case (typ == iterTrimHorizon || typ == iterLatest) && in.StartingSequenceNumber != nil:
		return nil, errorf(codeInvalidArgument, "Must either specify (1) AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER and StartingSequenceNumber or (2) TRIM_HORIZON or LATEST and no StartingSequenceNumber. Request specified %s and also a StartingSequenceNumber.", typ)
	case (typ == iterAtSequence || typ == iterAfterSequence) && in.StartingSequenceNumber == nil:
		return nil, errorf(codeInvalidArgument, "Must either specify (1) AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER and StartingSequenceNumber or (2) TRIM_HORIZON or LATEST and no StartingSequenceNumber. Request specified %s and no StartingSequenceNumber.", typ)
	case typ == iterAtTimestamp && in.Timestamp == nil:
		return nil, errorf(codeInvalidArgument, "Must specify timestampInMillis parameter for iterator of type AT_TIMESTAMP. Current request has no timestamp parameter.")
	case typ == iterAtTimestamp && int64(*in.Timestamp) > r.nowMs:
		return nil, errorf(codeInvalidArgument, "The timestampInMillis parameter cannot be greater than the currentTimestampInMillis. timestampInMillis: %d, currentTimestampInMillis: %d", int64(*in.Timestamp), r.nowMs)
	}

	st, err := s.stream(in.streamRef)
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	if err := st.requireReadableLocked(r.nowMs); err != nil {
		return nil, err
	}
	sh := st.shardLocked(*in.ShardId, r.nowMs)
	if sh == nil {
		return nil, errShardNotFound(*in.ShardId, st.name)
	}
	var seq parsedSeq
	if in.StartingSequenceNumber != nil {
		if seq, err = checkStartingSequence(*in.StartingSequenceNumber, sh, st); err != nil {
			return nil, err
		}
	}
	if in.DryRun != nil && *in.DryRun {
		return nil, errorf(codeDryRun, msgDryRun)
	}

	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r.limits && !sh.buckets.iterators.take(r.nowMs, 1) {
		return nil, errorf(codeThroughput, "%s", errShardThroughput(sh, st))
	}
	sh.trimLocked(st.cutoffMsLocked(r.nowMs))
	var tsMs int64
	if in.Timestamp != nil {
		tsMs = int64(*in.Timestamp)
	}
	pos := sh.startPosLocked(typ, seq, tsMs)
	return getShardIteratorOutput{ShardIterator: s.encodeIterator(shardIterator{
		streamUID: st.uid,
		stream:    st.name,
		shardNum:  sh.num,
		pos:       pos,
		issuedMs:  r.nowMs,
	})}, nil
}

// startPosLocked is the position (the counter of the next record to read) an
// iterator of type typ starts from; seq is the parsed sequence number of the
// *_SEQUENCE_NUMBER types and tsMs the timestamp of AT_TIMESTAMP. Caller holds
// sh.mu and has trimmed the shard.
func (sh *shard) startPosLocked(typ string, seq parsedSeq, tsMs int64) uint64 {
	switch typ {
	case iterLatest:
		return sh.latestPosLocked()
	case iterAtSequence, iterAfterSequence:
		pos := seq.counter
		if seq.beyond {
			return math.MaxUint64
		}
		if typ == iterAfterSequence && pos < math.MaxUint64 {
			pos++
		}
		return pos
	case iterAtTimestamp:
		if i := sh.indexAtTimeLocked(tsMs); i < len(sh.records) {
			return sh.records[i].counter
		}
		return sh.latestPosLocked()
	}
	return 0 // TRIM_HORIZON
}

// checkStartingSequence checks that q is a sequence number of shard sh.
func checkStartingSequence(q string, sh *shard, st *stream) (parsedSeq, error) {
	p, ok := parseSeq(q)
	if !ok {
		return p, errorf(codeInvalidArgument, "StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid.",
			q, sh.id, st.name, AccountID)
	}
	if p.shardNum != sh.num {
		return p, errorf(codeInvalidArgument, "Invalid StartingSequenceNumber. It encodes %s, while it was used in a call to a shard with %s",
			shardID(p.shardNum), sh.id)
	}
	if !p.beyond && p.counter < sh.startCounter {
		return p, errorf(codeInvalidArgument, "StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid because it did not come from this stream.",
			q, sh.id, st.name, AccountID)
	}
	return p, nil
}

type getRecordsInput struct {
	ShardIterator *string
	Limit         *int32
	StreamARN     *string
	DryRun        *bool
}

type recordJSON struct {
	SequenceNumber              string
	ApproximateArrivalTimestamp epochMillis
	Data                        []byte
	// PartitionKey is absent for a record written to an AUTO stream without
	// one, as the service leaves it out (the SDKs read a null key).
	PartitionKey string `json:",omitempty"`
}

type childShardJSON struct {
	ShardId      string //nolint:revive // the model's member name
	ParentShards []string
	HashKeyRange hashKeyRangeJSON
}

type getRecordsOutput struct {
	Records []recordJSON
	// NextShardIterator is null once a closed shard has been read to its end.
	NextShardIterator  *string
	MillisBehindLatest int64
	ChildShards        []childShardJSON `json:",omitempty"`
}

func (s *Server) getRecords(r *request) (any, error) {
	var in getRecordsInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	switch {
	case in.ShardIterator == nil:
		v.addNull("shardIterator")
	case len(*in.ShardIterator) < 1 || len(*in.ShardIterator) > 512:
		v.add(*in.ShardIterator, "shardIterator", "have length between 1 and 512")
	}
	if in.Limit != nil && *in.Limit < 1 {
		v.add(strconv.Itoa(int(*in.Limit)), "limit", "have value greater than or equal to 1")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	limit := maxGetRecordsLimit
	if in.Limit != nil {
		if *in.Limit > maxGetRecordsLimit {
			return nil, errorf(codeInvalidArgument, "Limit %d is greater than the maximum of %d records per GetRecords call.", *in.Limit, maxGetRecordsLimit)
		}
		limit = int(*in.Limit)
	}
	it, ok := s.decodeIterator(*in.ShardIterator)
	if !ok {
		return nil, errorf(codeInvalidArgument, "Invalid ShardIterator.")
	}
	if age := r.nowMs - it.issuedMs; age > s.iteratorTTL.Milliseconds() {
		return nil, errorf(codeExpiredIterator, "Iterator expired. The iterator was created at time %s while right now it is %s which is further in the future than the tolerated delay of %d milliseconds.",
			amzTime(it.issuedMs), amzTime(r.nowMs), s.iteratorTTL.Milliseconds())
	}
	if r.faults != nil {
		if r.faults.hit(r.faults.f.ExpiredIteratorRate) {
			return nil, errorf(codeExpiredIterator, "Iterator expired (injected by kinesistest).")
		}
		if r.faults.hit(r.faults.f.GetRecordsThrottleRate) {
			return nil, errorf(codeThroughput, "Rate exceeded for shard %s in stream %s under account %s (injected by kinesistest).",
				shardID(it.shardNum), it.stream, AccountID)
		}
	}
	if in.StreamARN != nil {
		name, err := streamNameOf(nil, in.StreamARN)
		if err != nil {
			return nil, err
		}
		if name != it.stream {
			return nil, errorf(codeInvalidArgument, "StreamARN %s does not match the stream %s of the ShardIterator.", *in.StreamARN, it.stream)
		}
	}
	s.mu.RLock()
	st := s.streams[it.stream]
	s.mu.RUnlock()
	if st == nil || st.uid != it.streamUID {
		return nil, errShardNotFound(shardID(it.shardNum), it.stream)
	}
	if in.DryRun != nil && *in.DryRun {
		return nil, errorf(codeDryRun, msgDryRun)
	}

	st.mu.RLock()
	defer st.mu.RUnlock()
	if int(it.shardNum) >= len(st.shards) || st.expiredLocked(st.shards[it.shardNum], r.nowMs) {
		return nil, errShardNotFound(shardID(it.shardNum), it.stream)
	}
	sh := st.shards[it.shardNum]
	return s.readShardLocked(r, st, sh, it, limit)
}

// readShardLocked reads one page of sh from it. Caller holds the stream's
// read lock.
func (s *Server) readShardLocked(r *request, st *stream, sh *shard, it shardIterator, limit int) (any, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r.largeReads && r.nowMs < sh.readPausedUntilMs {
		return nil, errorf(codeThroughput, "%s", errShardThroughput(sh, st))
	}
	if r.limits && !(sh.buckets.readCalls.take(r.nowMs, 1) && sh.buckets.readBytes.positive(r.nowMs)) {
		return nil, errorf(codeThroughput, "%s", errShardThroughput(sh, st))
	}
	sh.trimLocked(st.cutoffMsLocked(r.nowMs))

	first := sh.indexAtLocked(it.pos)
	out := getRecordsOutput{}
	bytes := 0
	end := first
	cutoff, hidden := s.readableCutoff(r.nowMs), false
	for end < len(sh.records) && end-first < limit {
		rec := &sh.records[end]
		if rec.arrivalMs > cutoff {
			hidden = true // not readable yet: the page ends caught up
			break
		}
		// A page holds at least one record, however large.
		if end > first && bytes+rec.size() > maxGetRecordsBytes {
			break
		}
		bytes += rec.size()
		end++
	}
	out.Records = make([]recordJSON, end-first)
	for i := first; i < end; i++ {
		rec := &sh.records[i]
		out.Records[i-first] = recordJSON{
			SequenceNumber:              rec.seq,
			ApproximateArrivalTimestamp: epochMillis(rec.arrivalMs),
			Data:                        rec.data,
			PartitionKey:                rec.pk,
		}
	}
	if r.limits {
		sh.buckets.readBytes.charge(float64(bytes))
	}
	if r.largeReads && bytes > shardReadBytesPerSec {
		sh.readPausedUntilMs = r.nowMs + largeReadPauseMs(bytes)
	}

	next := it
	next.issuedMs = r.nowMs
	if end > first {
		next.pos = sh.records[end-1].counter + 1
	}
	if end < len(sh.records) && !hidden {
		// Never 0 while records wait: 0 means caught up, and readers act on it.
		out.MillisBehindLatest = max(1, r.nowMs-sh.records[end].arrivalMs)
	}
	if sh.closed && end == len(sh.records) {
		out.ChildShards = make([]childShardJSON, 0, len(sh.children))
		for _, c := range sh.children {
			out.ChildShards = append(out.ChildShards, childShardJSON{
				ShardId:      c.id,
				ParentShards: c.parentIDs(),
				HashKeyRange: hashKeyRangeJSON{StartingHashKey: c.startKey, EndingHashKey: c.endKey},
			})
		}
		return out, nil
	}
	tok := s.encodeIterator(next)
	out.NextShardIterator = &tok
	return out, nil
}

// amzTime formats ms the way the service's iterator messages print times.
func amzTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("Mon Jan 02 15:04:05 MST 2006")
}
