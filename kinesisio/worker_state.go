package kinesisio

import (
	"context"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
)

// What a worker process keeps between ProcessElement calls, for every read it runs: when
// each shard (and discovery) may next call Kinesis (the pacer), and what a call left for the
// next one on the same shard (the memo: an open iterator, the byte rate and backlog). Both
// are keyed by typed keys: a shard of a read (shardKey), and the kind of call paced
// (callKey). Enhanced fan-out keeps its open subscriptions in its own cache
// (fetch_efo_subscriptions.go), and the checkpoint tables their handles (checkpoint.go).

// shardKey names one shard of one Read or ReadBounded transform in the worker's state.
type shardKey struct {
	read, stream, shard string
}

// shardKeyOf is the key of shard d of the read readID.
func shardKeyOf(readID string, d shardDescriptor) shardKey {
	return shardKey{read: readID, stream: d.Stream, shard: d.ShardID}
}

// callKind is a kind of call the pacer paces.
type callKind uint8

const (
	// shardReads are a shard's GetRecords calls (and the calls of a reader riding out an
	// unreachable Kinesis).
	shardReads callKind = iota
	// discoveryPolls are a read's ListShards polls; their key has no stream or shard.
	discoveryPolls
	// parentChecks are a shard's reads of its parents' items in the checkpoint table.
	parentChecks
)

// callKey names the calls of one kind for one shard (or one read, for discovery).
type callKey struct {
	kind  callKind
	shard shardKey
}

func readsOf(k shardKey) callKey { return callKey{kind: shardReads, shard: k} }
func pollsOf(readID string) callKey {
	return callKey{kind: discoveryPolls, shard: shardKey{read: readID}}
}
func parentChecksOf(k shardKey) callKey {
	return callKey{kind: parentChecks, shard: k}
}

// A runner may call ProcessElement again at once, whatever delay ResumeProcessingIn asked for
// (Flink fires every processing-time timer immediately while it drains a job at the end of
// its input). So the connector keeps its own clock of when each kind of call may next be
// made, per read and shard, in the worker process, and a call that comes early waits or asks
// to be resumed later without calling the service
// (TestDiscoveryPollsNoMoreOftenThanItsIntervalWhateverTheRunnerDoes,
// TestShardReaderPollsNoMoreOftenThanItsIntervalWhateverTheRunnerDoes).

// pacingSleepMax is the longest an early call waits inside ProcessElement. The rest of a
// longer wait is returned to the runner as a resume delay, so that a call never holds its
// bundle (and the bundle's other shards) for long; under a runner that ignores the delay, an
// idle shard then costs at most one ProcessElement call per pacingSleepMax and no API call.
const pacingSleepMax = 200 * time.Millisecond

// tipReadsPerSecond is the read budget of a caught-up shard, per read and shard: its
// GetRecords calls whose answer found the shard caught up are at least 1/tipReadsPerSecond
// apart. Kinesis allows 5 reads per second per shard, shared by every consumer of the
// stream; this leaves one to another consumer (a second application, a KCL worker taking
// over, the AWS CLI). The reads are spread evenly, not spent in bursts, so that a record
// that arrives at the tip waits at most one gap for its read (TestTipBudget,
// TestReadsAgainWithinTheBudgetAfterRecordsAtTheTip). A shard with a backlog reads back to
// back instead, paced by the service's 2 MiB/s and 5 reads/s with backoff on throttling.
const tipReadsPerSecond = 4

// tipReadGap is the least time between two caught-up reads of a shard.
const tipReadGap = time.Second / tipReadsPerSecond

// pacer holds, per key, the earliest time of the next call, and for shard readers when they
// last read at the tip of their shard.
type pacer struct {
	mu   sync.Mutex
	next map[callKey]time.Time
	tips map[shardKey]time.Time
}

// calls is the worker process's pacer for ListShards polls and GetRecords reads.
var calls = &pacer{next: map[callKey]time.Time{}, tips: map[shardKey]time.Time{}}

// tipRead records a read of key sent at sent whose answer found the shard caught up.
func (p *pacer) tipRead(key shardKey, sent time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sent.After(p.tips[key]) {
		p.tips[key] = sent
	}
}

// nextTipRead is the earliest time at which key may read again at the tip of its shard
// within the budget: tipReadGap after its last tip read.
func (p *pacer) nextTipRead(key shardKey) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.tips[key]
	if !ok {
		return time.Time{}
	}
	return at.Add(tipReadGap)
}

// wait returns how long from now the call for key must wait; 0 when it may go now.
func (p *pacer) wait(key callKey, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if at, ok := p.next[key]; ok && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// notBefore makes the next call for key wait until at (or later, if already so).
func (p *pacer) notBefore(key callKey, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.next[key]; !ok || at.After(cur) {
		p.next[key] = at
	}
}

// forget drops key, once its shard or discovery is done.
func (p *pacer) forget(key callKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.next, key)
	if key.kind == shardReads {
		delete(p.tips, key.shard)
	}
}

// holdOff makes an early call of an unbounded DoFn wait, for at most pacingSleepMax. If the
// wait is over by then it returns held false: go ahead with the call. Otherwise it returns
// held true and the continuation that resumes the call when it is due.
func holdOff(ctx context.Context, wait time.Duration) (cont sdf.ProcessContinuation, held bool, err error) {
	if wait <= 0 {
		return nil, false, nil
	}
	if err := backoff.Sleep(ctx, min(wait, pacingSleepMax)); err != nil {
		return nil, true, err
	}
	if wait > pacingSleepMax {
		return sdf.ResumeProcessingIn(wait - pacingSleepMax), true, nil
	}
	return nil, false, nil
}

// A polling reader's ProcessElement call ends at every checkpoint, and the runner resumes
// the residual in a new call, often on the same worker a moment later. An iterator opened
// for each call would cost an idle shard one GetShardIterator per GetRecords, against the
// separate 5/s-per-shard GetShardIterator limit. So a call that ends at a checkpoint leaves the
// shard's NextShardIterator (and, with read-ahead, the pages fetched after it) in the
// worker's read-ahead entry (read_ahead.go), under the position its residual starts at; the
// next call takes it only if its restriction starts at exactly that position. A restriction
// resumed on another worker, or at another position (a retried bundle resumes an earlier
// checkpoint), finds no entry or one for another position, and opens its own from the
// restriction: no call can read from a wrong iterator
// (TestIteratorReusedAcrossCheckpoints, TestIteratorNotReusedAtAnotherPosition). The memo
// keeps what the reader observed of the shard's byte rate, for the backlog.

const (
	// iteratorReuseAge is the age up to which a memorised iterator is used. Iterators
	// expire five minutes after they are issued; an older one is renewed from the position.
	iteratorReuseAge = 4 * time.Minute
	// memoIdleAge is how long a shard's memo lives without being touched (its shard moved to
	// another worker, or the read ended without the reader seeing the shard end).
	memoIdleAge = 10 * time.Minute
)

// shardMemo is what the worker remembers of one shard of one read between calls.
type shardMemo struct {
	// backlogAt and backlog: the estimated unread bytes of the shard for a residual that
	// starts at backlogAt.
	backlogAt  startKey
	backlog    float64
	hasBacklog bool
	samples    []rateSample
	touched    time.Time
}

// memoCache holds the worker process's shard memos.
type memoCache struct {
	mu    sync.Mutex
	memos map[shardKey]*shardMemo
	puts  int
}

// memos is the worker process's memo cache.
var memos = &memoCache{memos: map[shardKey]*shardMemo{}}

// get returns key's memo, creating it. The caller holds c.mu.
func (c *memoCache) get(key shardKey, now time.Time) *shardMemo {
	m := c.memos[key]
	if m == nil {
		c.puts++
		if c.puts%1024 == 0 {
			for k, old := range c.memos {
				if now.Sub(old.touched) > memoIdleAge {
					delete(c.memos, k)
				}
			}
		}
		m = &shardMemo{}
		c.memos[key] = m
	}
	m.touched = now
	return m
}

// observe adds one response's bytes and arrival times to key's byte rate and returns the
// shard's estimated unread bytes given millisBehind: see estimateBacklog.
func (c *memoCache) observe(key shardKey, s rateSample, records int, millisBehind int64, now time.Time) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.get(key, now)
	if records > 0 {
		m.samples = append(m.samples, s)
		newest := s.last
		drop := 0
		for drop < len(m.samples)-1 && (len(m.samples)-drop > rateSamples || newest-m.samples[drop].last > rateWindow.Milliseconds()) {
			drop++
		}
		m.samples = append(m.samples[:0], m.samples[drop:]...)
	}
	return estimateBacklog(m.samples, millisBehind)
}

// setBacklog records the backlog of the residual that starts at at.
func (c *memoCache) setBacklog(key shardKey, at startKey, bytes float64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.get(key, now)
	m.backlogAt, m.backlog, m.hasBacklog = at, bytes, true
}

// backlog returns the backlog recorded for a residual of key that starts at at.
func (c *memoCache) backlog(key shardKey, at startKey) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.memos[key]
	if m == nil || !m.hasBacklog || m.backlogAt != at {
		return 0, false
	}
	return m.backlog, true
}

// forget drops key's memo, once its shard is done.
func (c *memoCache) forget(key shardKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.memos, key)
}
