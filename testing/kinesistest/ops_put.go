package kinesistest

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// PutRecord and PutRecords.

const (
	maxPutRecordsEntries = 500
	// maxPutRecordsBytes caps a PutRecords request, data plus partition keys,
	// at the current API reference's 10 MiB (older documents said 5 MiB).
	maxPutRecordsBytes = 10 << 20
	// maxDataBytes is the model's bound on a Data blob; the stream's maximum
	// record size (1 MiB unless raised) is checked separately.
	maxDataBytes = 10 << 20
)

const (
	msgDryRun          = "Request would have succeeded, but DryRun flag is set."
	msgInternalFailure = "Internal service failure."
)

// entryInput is one record to store, as PutRecord or a PutRecords entry
// carries it.
type entryInput struct {
	Data            []byte
	PartitionKey    *string
	ExplicitHashKey *string
}

// checkEntry adds e's model violations to v; prefix is the member path of the
// entry ("records.3.member." in PutRecords, "" in PutRecord).
func checkEntry(e *entryInput, prefix string, v *violations) {
	switch {
	case e.PartitionKey == nil:
		v.addNull(prefix + "partitionKey")
	case *e.PartitionKey == "":
		v.add("", prefix+"partitionKey", "have length greater than or equal to 1")
	case utf8.RuneCountInString(*e.PartitionKey) > 256:
		v.add(*e.PartitionKey, prefix+"partitionKey", "have length less than or equal to 256")
	}
	switch {
	case e.Data == nil:
		v.addNull(prefix + "data")
	case len(e.Data) > maxDataBytes:
		v.add(fmt.Sprintf("java.nio.HeapByteBuffer[pos=0 lim=%d cap=%d]", len(e.Data), len(e.Data)),
			prefix+"data", fmt.Sprintf("have length less than or equal to %d", maxDataBytes))
	}
	if e.ExplicitHashKey != nil && !hashKeyPattern.MatchString(*e.ExplicitHashKey) {
		v.add(*e.ExplicitHashKey, prefix+"explicitHashKey", `satisfy regular expression pattern: 0|([1-9]\d{0,38})`)
	}
}

// routeKey returns the hash key that places e, checking what the model's
// pattern cannot: the explicit hash key's range and the stream's record size.
func routeKey(st *stream, e *entryInput) (uint128, error) {
	if size := len(e.Data) + len(*e.PartitionKey); size > st.maxRecordSize {
		return uint128{}, errorf(codeInvalidArgument,
			"Record size %d bytes (data plus partition key) exceeds the maximum record size of %d bytes for stream %s under account %s.",
			size, st.maxRecordSize, st.name, AccountID)
	}
	if e.ExplicitHashKey == nil {
		return partitionHashKey(*e.PartitionKey), nil
	}
	key, ok := parseHashKey(*e.ExplicitHashKey)
	if !ok {
		return uint128{}, errorf(codeInvalidArgument,
			"Invalid ExplicitHashKey. ExplicitHashKey must be in the range: [0, 2^128-1]. Specified value was %s", *e.ExplicitHashKey)
	}
	return key, nil
}

// storeLocked stores one record in the shard its key routes to. It returns
// the shard and sequence number, or an error code (throttling or an injected
// failure) for the entry. Caller holds the stream's read lock.
func (st *stream) storeLocked(r *request, key uint128, e *entryInput) (sh *shard, seq, errCode string) {
	sh = st.route(key)
	if r.faults != nil {
		if code := r.faults.putEntryFault(st.name); code != "" {
			return sh, "", code
		}
	}
	ehk := ""
	if e.ExplicitHashKey != nil {
		ehk = *e.ExplicitHashKey
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.trimLocked(st.cutoffMsLocked(r.nowMs))
	if r.limits && !sh.buckets.takeWrite(r.nowMs, len(e.Data)+len(*e.PartitionKey)) {
		return sh, "", codeThroughput
	}
	counter := st.counter.Add(1)
	seq = formatSeq(counter, sh.num)
	sh.records = append(sh.records, record{
		counter:   counter,
		seq:       seq,
		pk:        *e.PartitionKey,
		ehk:       ehk,
		data:      e.Data,
		arrivalMs: r.nowMs,
	})
	sh.wakeLocked()
	return sh, seq, ""
}

func errShardThroughput(sh *shard, st *stream) string {
	return fmt.Sprintf("Rate exceeded for shard %s in stream %s under account %s.", sh.id, st.name, AccountID)
}

// requireReadableLocked refuses data operations on a stream still CREATING.
func (st *stream) requireReadableLocked(nowMs int64) error {
	if st.statusLocked(nowMs) == statusCreating {
		return errorf(codeResourceNotFound, "Stream %s under account %s is not ACTIVE, instead in state CREATING.", st.name, AccountID)
	}
	return nil
}

type putRecordInput struct {
	streamRef
	entryInput
	SequenceNumberForOrdering *string
	DryRun                    *bool
}

type putRecordOutput struct {
	ShardId        string //nolint:revive // the model's member name
	SequenceNumber string
}

func (s *Server) putRecord(r *request) (any, error) {
	var in putRecordInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkEntry(&in.entryInput, "", &v)
	if o := in.SequenceNumberForOrdering; o != nil && !seqNumberPattern.MatchString(*o) {
		v.add(*o, "sequenceNumberForOrdering", `satisfy regular expression pattern: 0|([1-9]\d{0,128})`)
	}
	if err := v.err(); err != nil {
		return nil, err
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
	key, err := routeKey(st, &in.entryInput)
	if err != nil {
		return nil, err
	}
	if in.DryRun != nil && *in.DryRun {
		return nil, errorf(codeDryRun, msgDryRun)
	}
	// Every record gets a larger sequence number than the ones before it, so
	// SequenceNumberForOrdering holds without further work.
	sh, seq, code := st.storeLocked(r, key, &in.entryInput)
	switch code {
	case "":
		return putRecordOutput{ShardId: sh.id, SequenceNumber: seq}, nil
	case codeThroughput:
		return nil, errorf(codeThroughput, "%s", errShardThroughput(sh, st))
	default:
		return nil, errorf(codeInternalFailure, msgInternalFailure)
	}
}

type putRecordsInput struct {
	streamRef
	Records []entryInput
	DryRun  *bool
}

type putRecordsResultEntry struct {
	SequenceNumber string `json:",omitempty"`
	ShardId        string `json:",omitempty"` //nolint:revive // the model's member name
	ErrorCode      string `json:",omitempty"`
	ErrorMessage   string `json:",omitempty"`
}

type putRecordsOutput struct {
	FailedRecordCount int
	Records           []putRecordsResultEntry
}

func (s *Server) putRecords(r *request) (any, error) {
	var in putRecordsInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	switch n := len(in.Records); {
	case in.Records == nil:
		v.addNull("records")
	case n < 1:
		v.add("[]", "records", "have length greater than or equal to 1")
	case n > maxPutRecordsEntries:
		v.add(fmt.Sprintf("[%d records]", n), "records", "have length less than or equal to "+strconv.Itoa(maxPutRecordsEntries))
	default:
		for i := range in.Records {
			checkEntry(&in.Records[i], "records."+strconv.Itoa(i+1)+".member.", &v)
		}
	}
	if err := v.err(); err != nil {
		return nil, err
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
	keys := make([]uint128, len(in.Records))
	total := 0
	for i := range in.Records {
		e := &in.Records[i]
		if keys[i], err = routeKey(st, e); err != nil {
			return nil, err
		}
		total += len(e.Data) + len(*e.PartitionKey)
	}
	if total > maxPutRecordsBytes {
		return nil, errorf(codeInvalidArgument, "Records size exceeds %d bytes (10 MiB) limit: %d bytes including partition keys.", maxPutRecordsBytes, total)
	}
	if in.DryRun != nil && *in.DryRun {
		return nil, errorf(codeDryRun, msgDryRun)
	}

	out := putRecordsOutput{Records: make([]putRecordsResultEntry, len(in.Records))}
	for i := range in.Records {
		sh, seq, code := st.storeLocked(r, keys[i], &in.Records[i])
		res := &out.Records[i]
		switch code {
		case "":
			res.SequenceNumber, res.ShardId = seq, sh.id
			continue
		case codeThroughput:
			res.ErrorMessage = errShardThroughput(sh, st)
		default:
			res.ErrorMessage = msgInternalFailure
		}
		res.ErrorCode = code
		out.FailedRecordCount++
	}
	return out, nil
}
