package kinesistest

import (
	"math"
	"sort"
	"sync"
	"time"
)

// The server's queues, and how they hang on their streams.

// queueRegistry holds the server's queues.
type queueRegistry struct {
	mu     sync.Mutex
	byID   map[string]*queue
	byName map[string]*queue
	next   uint64

	// From Start's options.
	delay         time.Duration
	seed          int64
	inFlightLimit int
}

// goneLocked reports whether a deleted queue has finished deleting.
func (reg *queueRegistry) goneLocked(q *queue, nowMs int64) bool {
	return q.deleting && nowMs >= q.deletedMs+reg.delay.Milliseconds()
}

// forgetLocked removes deleted queues whose DELETING period is over.
func (reg *queueRegistry) forgetLocked(nowMs int64) {
	for id, q := range reg.byID {
		if reg.goneLocked(q, nowMs) {
			delete(reg.byID, id)
			if reg.byName[q.name] == q {
				delete(reg.byName, q.name)
			}
		}
	}
}

// liveLocked lists the queues that exist at nowMs (DELETING included), oldest
// first.
func (reg *queueRegistry) liveLocked(nowMs int64) []*queue {
	reg.forgetLocked(nowMs)
	out := make([]*queue, 0, len(reg.byID))
	for _, q := range reg.byID {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].serial < out[j].serial })
	return out
}

// countOnLocked counts the queues on st that exist at nowMs.
func (reg *queueRegistry) countOnLocked(st *stream, nowMs int64) int {
	reg.forgetLocked(nowMs)
	n := 0
	for _, q := range reg.byID {
		if q.stream == st {
			n++
		}
	}
	return n
}

// transitioningLocked counts the queues CREATING or DELETING at nowMs.
func (reg *queueRegistry) transitioningLocked(nowMs int64) int {
	n := 0
	for _, q := range reg.byID {
		if s := q.statusLocked(nowMs); s == queueCreating || s == queueDeleting {
			n++
		}
	}
	return n
}

// queueCount is what DescribeStreamSummary reports as QueueCount.
func (s *Server) queueCount(st *stream, nowMs int64) int {
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	return s.queues.countOnLocked(st, nowMs)
}

// refuseIfQueuesLocked refuses what a stream with queues may not do (be
// deleted, become PROVISIONED). Caller holds the registry's mu.
func (s *Server) refuseIfQueuesLocked(st *stream, nowMs int64, what string) error {
	if n := s.queues.countOnLocked(st, nowMs); n > 0 {
		return errorf(codeResourceInUse, "Stream %s under account %s has %d queues; delete them with DeleteQueue before you %s.", st.name, AccountID, n, what)
	}
	return nil
}

// queueByARN finds the queue an ARN names and its status. The ARN's pattern
// has been checked.
func (s *Server) queueByARN(arn string, nowMs int64) (*queue, string, error) {
	m := queueARNPattern.FindStringSubmatch(arn)
	if m == nil {
		return nil, "", errorf(codeValidation, "1 validation error detected: Value '%s' at 'queueARN' failed to satisfy constraint: Member must satisfy regular expression pattern: arn:aws.*:kinesis:.*:\\d{12}:queue/\\S+", arn)
	}
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	q := s.queues.byID[m[2]]
	if q == nil || m[1] != AccountID || s.queues.goneLocked(q, nowMs) {
		return nil, "", errorf(codeResourceNotFound, "Queue %s under account %s not found.", arn, AccountID)
	}
	return q, q.statusLocked(nowMs), nil
}

// cutoffMs is the arrival time at or before which st's retention has dropped
// records, at nowMs.
func (st *stream) cutoffMs(nowMs int64) int64 {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.cutoffMsLocked(nowMs)
}

// feedQueuesLocked hands a record just stored in st to st's queues. Caller
// holds st's read lock and the shard's lock, so the queues see each shard's
// records in order and none that a queue created meanwhile already copied.
func (st *stream) feedQueuesLocked(r *record) {
	if len(st.queues) == 0 {
		return
	}
	id := recordID(st.uid, r.counter)
	for _, q := range st.queues {
		q.ingest(id, r)
	}
}

// trimQueuesLocked drops from st's queues the records past cutoffMs; a
// retention change calls it before it widens the window, so that records the
// old retention dropped do not come back. Caller holds st's write lock.
func (st *stream) trimQueuesLocked(cutoffMs int64) {
	for _, q := range st.queues {
		q.mu.Lock()
		q.trimLocked(cutoffMs)
		q.mu.Unlock()
	}
}

// attachQueue starts q's intake: the records the stream retains from q's
// starting position, then every record stored later.
func (st *stream) attachQueue(q *queue, nowMs int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	cutoff := st.cutoffMsLocked(nowMs)
	earliest := max(st.createdMs, cutoff+1)
	switch q.startType {
	case queueStartLatest:
		// Every record stored from now on, whatever time its put read.
		q.startMs, q.fromMs = nowMs, math.MinInt64
	case queueStartTrimHorizon:
		q.startMs, q.fromMs = earliest, math.MinInt64
	case queueStartAtTimestamp:
		q.startMs, q.fromMs = max(q.startGivenMs, earliest), q.startGivenMs
	}
	if q.startType != queueStartLatest {
		type retained struct {
			rec record
			id  string
		}
		var old []retained
		for _, sh := range st.shards {
			sh.mu.Lock()
			sh.trimLocked(cutoff)
			for i := sh.indexAtTimeLocked(q.fromMs); i < len(sh.records); i++ {
				old = append(old, retained{sh.records[i], recordID(st.uid, sh.records[i].counter)})
			}
			sh.mu.Unlock()
		}
		sort.Slice(old, func(i, j int) bool {
			if old[i].rec.arrivalMs != old[j].rec.arrivalMs {
				return old[i].rec.arrivalMs < old[j].rec.arrivalMs
			}
			return old[i].rec.counter < old[j].rec.counter
		})
		q.mu.Lock()
		for i := range old {
			q.ingestLocked(old[i].id, &old[i].rec)
		}
		q.mu.Unlock()
	}
	st.queues = append(append([]*queue(nil), st.queues...), q)
}

// detachQueue ends q's intake and releases its records: a deleted queue
// delivers nothing more and every receipt handle it issued is invalid.
func (st *stream) detachQueue(q *queue) {
	st.mu.Lock()
	kept := make([]*queue, 0, len(st.queues))
	for _, o := range st.queues {
		if o != q {
			kept = append(kept, o)
		}
	}
	st.queues = kept
	st.mu.Unlock()

	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.recs, q.deadlines = nil, nil
	q.visible, q.deadVisible = visibleRing{}, visibleRing{}
	q.counts.Visible, q.counts.InFlight, q.counts.DeadVisible, q.counts.DeadInFlight = 0, 0, 0, 0
	q.wakeLocked(true)
}

func errQueueNotActive(q *queue, status string) error {
	return errorf(codeResourceInUse, "Queue %s under account %s is not ACTIVE, instead in state %s.", q.name, AccountID, status)
}
