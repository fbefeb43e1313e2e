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

// key is the entry's partition key, "" when it has none (which only a stream
// with the AUTO strategy accepts; a key has at least one character).
func (e *entryInput) key() string {
	if e.PartitionKey == nil {
		return ""
	}
	return *e.PartitionKey
}

// size is what the entry counts against size limits: data plus partition key.
func (e *entryInput) size() int { return len(e.Data) + len(e.key()) }

// putChecks collects a put request's model violations twice over: strict as
// for a stream with the USER_PARTITION_KEY strategy, where every entry needs a
// partition key, and keyless as for an AUTO stream, where the key is optional.
// The two differ only by the missing keys.
type putChecks struct {
	strict, keyless violations
	missingKeys     int
}

func (c *putChecks) add(value, member, constraint string) {
	c.strict.add(value, member, constraint)
	c.keyless.add(value, member, constraint)
}

func (c *putChecks) addNull(member string) {
	c.strict.addNull(member)
	c.keyless.addNull(member)
}

func (c *putChecks) addMissingKey(member string) {
	c.strict.addNull(member)
	c.missingKeys++
}

// checkEntry adds e's model violations to c; prefix is the member path of the
// entry ("records.3.member." in PutRecords, "" in PutRecord).
func checkEntry(e *entryInput, prefix string, c *putChecks) {
	switch {
	case e.PartitionKey == nil:
		c.addMissingKey(prefix + "partitionKey")
	case *e.PartitionKey == "":
		c.add("", prefix+"partitionKey", "have length greater than or equal to 1")
	case utf8.RuneCountInString(*e.PartitionKey) > 256:
		c.add(*e.PartitionKey, prefix+"partitionKey", "have length less than or equal to 256")
	}
	switch {
	case e.Data == nil:
		c.addNull(prefix + "data")
	case len(e.Data) > maxDataBytes:
		c.add(fmt.Sprintf("java.nio.HeapByteBuffer[pos=0 lim=%d cap=%d]", len(e.Data), len(e.Data)),
			prefix+"data", fmt.Sprintf("have length less than or equal to %d", maxDataBytes))
	}
	if e.ExplicitHashKey != nil && !hashKeyPattern.MatchString(*e.ExplicitHashKey) {
		c.add(*e.ExplicitHashKey, prefix+"explicitHashKey", `satisfy regular expression pattern: 0|([1-9]\d{0,38})`)
	}
}

// checkPut answers a put request's model violations. Only an AUTO stream
// takes entries without a partition key, so when some lack one the stream's
// strategy decides which violations count; for any other stream, or an
// unknown one, the answer is the strict one, as before service-managed
// distribution existed. The caller checks the strategy again under the
// stream's lock, since it may change in between.
func (s *Server) checkPut(ref streamRef, c *putChecks) error {
	if c.missingKeys == 0 {
		return c.strict.err()
	}
	if st, err := s.stream(ref); err == nil && st.autoDistribution() {
		return c.keyless.err()
	}
	return c.strict.err()
}

// checkSizeLocked checks what the model cannot: the stream's record size.
// Caller holds the stream's read lock.
func (st *stream) checkSizeLocked(e *entryInput) error {
	if size := e.size(); size > st.maxRecordSize {
		return errorf(codeInvalidArgument,
			"Record size %d bytes (data plus partition key) exceeds the maximum record size of %d bytes for stream %s under account %s.",
			size, st.maxRecordSize, st.name, AccountID)
	}
	return nil
}

// routeKey returns the hash key that places e on a stream with the
// USER_PARTITION_KEY strategy, checking what the model's pattern cannot: the
// explicit hash key's range.
func routeKey(e *entryInput) (uint128, error) {
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

// placement is where the records of one put request go: by their hash keys,
// or, on an AUTO stream, wherever the stream deals them.
type placement struct {
	auto bool
	keys []uint128 // by entry, unless auto
}

// placeLocked checks a put request's entries against the stream and works
// out their placement. Entries without a partition key fail here when the
// stream's strategy is (or has just become) USER_PARTITION_KEY. Caller holds
// the stream's read lock.
func (st *stream) placeLocked(entries []entryInput, c *putChecks) (placement, error) {
	p := placement{auto: st.strategy == distributionAuto}
	if c.missingKeys > 0 && !p.auto {
		return p, c.strict.err()
	}
	if !p.auto {
		p.keys = make([]uint128, len(entries))
	}
	for i := range entries {
		e := &entries[i]
		if err := st.checkSizeLocked(e); err != nil {
			return p, err
		}
		if p.auto {
			continue // keys and explicit hash keys are ignored
		}
		var err error
		if p.keys[i], err = routeKey(e); err != nil {
			return p, err
		}
	}
	return p, nil
}

// shardLocked is the shard entry i goes to. Caller holds the stream's read
// lock.
func (p *placement) shardLocked(st *stream, i int) *shard {
	if p.auto {
		return st.autoShardLocked()
	}
	return st.route(p.keys[i])
}

// storeLocked stores one record in shard sh. It returns the sequence number,
// or an error code (throttling or an injected failure) for the entry. Caller
// holds the stream's read lock.
func (st *stream) storeLocked(r *request, sh *shard, e *entryInput) (seq, errCode string) {
	if r.faults != nil {
		if code := r.faults.putEntryFault(st.name); code != "" {
			return "", code
		}
	}
	ehk := ""
	if e.ExplicitHashKey != nil {
		ehk = *e.ExplicitHashKey
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.trimLocked(st.cutoffMsLocked(r.nowMs))
	if r.limits && !sh.buckets.takeWrite(r.nowMs, e.size()) {
		return "", codeThroughput
	}
	counter := st.counter.Add(1)
	seq = formatSeq(counter, sh.num)
	sh.records = append(sh.records, record{
		counter:   counter,
		seq:       seq,
		pk:        e.key(),
		ehk:       ehk,
		data:      e.Data,
		arrivalMs: r.nowMs,
	})
	st.feedQueuesLocked(&sh.records[len(sh.records)-1])
	sh.wakeLocked()
	return seq, ""
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
	var c putChecks
	checkEntry(&in.entryInput, "", &c)
	if o := in.SequenceNumberForOrdering; o != nil && !seqNumberPattern.MatchString(*o) {
		c.add(*o, "sequenceNumberForOrdering", `satisfy regular expression pattern: 0|([1-9]\d{0,128})`)
	}
	if err := s.checkPut(in.streamRef, &c); err != nil {
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
	entries := []entryInput{in.entryInput}
	p, err := st.placeLocked(entries, &c)
	if err != nil {
		return nil, err
	}
	if p.auto && in.SequenceNumberForOrdering != nil {
		return nil, errorf(codeInvalidArgument,
			"SequenceNumberForOrdering is not supported for stream %s under account %s because its record distribution strategy is AUTO.", st.name, AccountID)
	}
	if in.DryRun != nil && *in.DryRun {
		return nil, errorf(codeDryRun, msgDryRun)
	}
	// Every record gets a larger sequence number than the ones before it, so
	// SequenceNumberForOrdering holds without further work.
	sh := p.shardLocked(st, 0)
	seq, code := st.storeLocked(r, sh, &entries[0])
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
	var c putChecks
	switch n := len(in.Records); {
	case in.Records == nil:
		c.addNull("records")
	case n < 1:
		c.add("[]", "records", "have length greater than or equal to 1")
	case n > maxPutRecordsEntries:
		c.add(fmt.Sprintf("[%d records]", n), "records", "have length less than or equal to "+strconv.Itoa(maxPutRecordsEntries))
	default:
		for i := range in.Records {
			checkEntry(&in.Records[i], "records."+strconv.Itoa(i+1)+".member.", &c)
		}
	}
	if err := s.checkPut(in.streamRef, &c); err != nil {
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
	p, err := st.placeLocked(in.Records, &c)
	if err != nil {
		return nil, err
	}
	total := 0
	for i := range in.Records {
		total += in.Records[i].size()
	}
	if total > maxPutRecordsBytes {
		return nil, errorf(codeInvalidArgument, "Records size exceeds %d bytes (10 MiB) limit: %d bytes including partition keys.", maxPutRecordsBytes, total)
	}
	if in.DryRun != nil && *in.DryRun {
		return nil, errorf(codeDryRun, msgDryRun)
	}

	out := putRecordsOutput{Records: make([]putRecordsResultEntry, len(in.Records))}
	for i := range in.Records {
		sh := p.shardLocked(st, i)
		seq, code := st.storeLocked(r, sh, &in.Records[i])
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
