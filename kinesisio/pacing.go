package kinesisio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
)

// A runner may call ProcessElement again at once, whatever delay ResumeProcessingIn asked for:
// Flink fires every processing-time timer immediately while it drains a job at the end of
// its input, and discovery then called ListShards about 870 times a second. So the
// connector keeps its own clock of when each kind of call may next be made, per read and
// shard, in the worker process, and a call that comes early waits or asks to be resumed
// later without calling the service.

// pacingSleepMax is the longest an early call waits inside ProcessElement. The rest of a
// longer wait is returned to the runner as a resume delay, so that a call never holds its
// bundle (and the bundle's other shards) for long; under a runner that ignores the delay, an
// idle shard then costs at most one ProcessElement call per pacingSleepMax and no API call.
const pacingSleepMax = 200 * time.Millisecond

// tipReadsPerSecond is the read budget of a caught-up shard, per read and shard: its
// GetRecords calls whose answer found the shard caught up are at least 1/tipReadsPerSecond
// apart. Kinesis allows 5 reads per second per shard, shared by every consumer of the
// stream; this leaves one to another consumer (a second application, a KCL worker taking
// over, the AWS CLI). The reads are spread evenly: a budget spent in bursts (reading again
// at once after every answer with records) left gaps of up to 750 ms at 25 records/s per
// shard, and a p99 latency of 730 ms instead of 250 ms. A shard with a backlog reads back
// to back instead, paced by the service's 2 MiB/s and 5 reads/s with backoff on
// throttling.
const tipReadsPerSecond = 4

// tipReadGap is the least time between two caught-up reads of a shard.
const tipReadGap = time.Second / tipReadsPerSecond

// pacer holds, per key, the earliest time of the next call, and for shard readers when they
// last read at the tip of their shard.
type pacer struct {
	mu   sync.Mutex
	next map[string]time.Time
	tips map[string]time.Time
}

// calls is the worker process's pacer for ListShards polls and GetRecords reads.
var calls = &pacer{next: map[string]time.Time{}, tips: map[string]time.Time{}}

// tipRead records a read of key sent at sent whose answer found the shard caught up.
func (p *pacer) tipRead(key string, sent time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sent.After(p.tips[key]) {
		p.tips[key] = sent
	}
}

// nextTipRead is the earliest time at which key may read again at the tip of its shard
// within the budget: tipReadGap after its last tip read.
func (p *pacer) nextTipRead(key string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.tips[key]
	if !ok {
		return time.Time{}
	}
	return at.Add(tipReadGap)
}

// wait returns how long from now the call for key must wait; 0 when it may go now.
func (p *pacer) wait(key string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if at, ok := p.next[key]; ok && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// notBefore makes the next call for key wait until at (or later, if already so).
func (p *pacer) notBefore(key string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.next[key]; !ok || at.After(cur) {
		p.next[key] = at
	}
}

// forget drops key, once its shard or discovery is done.
func (p *pacer) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.next, key)
	delete(p.tips, key)
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

// newReadID names one Read or ReadBounded transform, so that its workers' pacing keys are
// its own and two reads of one stream in a pipeline do not slow each other down.
func newReadID() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("kinesisio: reading random bytes for a read id: %v", err))
	}
	return hex.EncodeToString(b)
}
