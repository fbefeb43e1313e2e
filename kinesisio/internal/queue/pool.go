package queue

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
)

// Config is a Pool's configuration.
type Config struct {
	QueueARN string
	Side     Side
	// Receivers is how many receives the pool keeps going at once for each call that
	// takes from it at once (Call): a worker that runs more of the read's calls at once
	// receives for each of them.
	Receivers int
	// Visibility is the visibility timeout each receive asks for, and what an extension
	// sets.
	Visibility time.Duration
	// ProcessingTimeout is the most time since its receive for which a held record is
	// extended.
	ProcessingTimeout time.Duration
	// Wait is the long poll of a receive (at most MaxWait).
	Wait time.Duration
	// MaxBuffered is how many received records the pool buffers before its receivers
	// pause, and MaxBufferedBytes how many bytes of their data (0: no bound); a pool
	// with nothing buffered always receives.
	MaxBuffered      int
	MaxBufferedBytes int64
	// Policy is the backoff of failed calls; its Retries bound the retries of a settle
	// call (receives retry for as long as the pool runs).
	Policy backoff.Policy
	// IdleStop, when positive, stops the pool as Stop does once no Take came for that
	// long: the receivers of a read that went away (a job ended in a process that lives
	// on) must not go on receiving records nobody takes and keeping them invisible. A
	// later Take starts the pool again.
	IdleStop time.Duration
	// Logf reports what a user should see once (nil: the log package).
	Logf func(string, ...any)
}

// emptyReceiveGap is the least time between two receives of one receiver that return
// nothing: a long poll normally spaces them, but a service (or server) that answers at once
// must not be called in a tight loop.
const emptyReceiveGap = time.Second

// receiveMargin is how much longer than its long poll a receive may take before the pool
// gives up on it.
const receiveMargin = 10 * time.Second

// Pool is a queue's receivers in one process: Receivers goroutines for each call that takes
// from it at once (Call) long-poll the queue into a buffer that Take drains. Every record
// the pool received is held (its visibility extended by the pool's Holder) from its receive
// until the caller settles it, or drops it from the Holder (another step holds it), or the
// processing timeout passes. Buffered records not taken when the pool stops are released at
// once (visibility 0).
type Pool struct {
	api     API
	cfg     Config
	settler *Settler
	holder  *Holder

	mu       sync.Mutex
	buf      []Record
	bufBytes int64
	ready    chan struct{} // closed and replaced when records arrive
	space    chan struct{} // closed and replaced when Take makes room
	err      error         // a fatal receive error, for the next Take
	cancel   context.CancelFunc
	runCtx   context.Context
	done     chan struct{}
	running  bool
	// wg counts the receivers of the run (started, how many there are).
	wg      *sync.WaitGroup
	started int
	// calls is how many calls take from the pool now; peakCalls, the most at once since
	// the pool started.
	calls, peakCalls int
	// lastTake is when a Take last returned; taking, how many run now (IdleStop).
	lastTake time.Time
	taking   int
	// holding says the Holder's loop runs: from the first start until the receivers stopped
	// and the Holder holds nothing.
	holding bool
}

// NewPool returns a stopped pool; Take starts it.
func NewPool(api API, cfg Config) *Pool {
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	cfg.Wait = min(max(cfg.Wait, 0), MaxWait)
	cfg.Receivers = max(cfg.Receivers, 1)
	cfg.MaxBuffered = max(cfg.MaxBuffered, MaxBatch)
	s := NewSettler(api, cfg.QueueARN, cfg.Side, cfg.Policy, cfg.Logf)
	return &Pool{
		api:     api,
		cfg:     cfg,
		settler: s,
		holder:  NewHolder(s, cfg.Visibility, cfg.ProcessingTimeout),
		ready:   make(chan struct{}),
		space:   make(chan struct{}),
	}
}

// Settler is the pool's Settler: settle the records it received through it.
func (p *Pool) Settler() *Settler { return p.settler }

// Holder is the pool's Holder.
func (p *Pool) Holder() *Holder { return p.holder }

// TakeStats returns what the pool's receivers and extensions did since the last call (the
// acknowledgements and restores of its Settler are counted by their callers: Settled).
func (p *Pool) TakeStats() Stats { return p.settler.TakeStats() }

// Buffered is how many received records wait to be taken.
func (p *Pool) Buffered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.buf)
}

// start starts the receivers and the holder's loop unless they run. The caller holds p.mu.
func (p *Pool) startLocked() {
	if p.running {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done, p.running = cancel, make(chan struct{}), true
	wg := &sync.WaitGroup{}
	p.wg, p.started, p.runCtx = wg, 0, ctx
	p.peakCalls = max(p.calls, 1)
	p.addReceiversLocked()
	// Stop cancels ctx; a receive under way is not cancelled with it, since the service
	// may deliver records to a receive whose caller went away: they would stay invisible
	// for their visibility timeout. Stop waits for it instead, and releases what it got.
	if !p.holding {
		p.holding = true
		go p.holder.Run(context.Background(), p.idle)
	}
	done := p.done
	go func() {
		wg.Wait()
		close(done)
	}()
	// The receivers above keep wg above 0 until ctx is cancelled, and receivers are added
	// only while the pool runs, so no Add races the Wait.
	if p.cfg.IdleStop > 0 {
		p.lastTake = time.Now()
		go p.stopWhenIdle(ctx)
	}
}

// addReceiversLocked starts receivers up to Receivers for each of the most calls that
// took from the pool at once. The caller holds p.mu, and the pool runs.
func (p *Pool) addReceiversLocked() {
	ctx := p.runCtx
	for ; p.started < p.cfg.Receivers*p.peakCalls; p.started++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.receive(ctx)
		}()
	}
}

// Call says that a call begins to take from the pool, and returns what says it ended. The
// pool keeps Receivers receives going for each call that runs at once: a worker that runs
// more of a read's calls at once (a runner's tasks sharing one worker process) receives
// for each of them. It does not shrink while the pool runs.
func (p *Pool) Call() (end func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.calls > p.peakCalls {
		p.peakCalls = p.calls
		if p.running {
			p.addReceiversLocked()
		}
	}
	return func() {
		p.mu.Lock()
		p.calls--
		p.mu.Unlock()
	}
}

// Receivers is how many receivers the pool runs (0 when it is stopped).
func (p *Pool) Receivers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return 0
	}
	return p.started
}

// stopWhenIdle stops the pool once no Take ran for IdleStop, or returns when the pool
// stops otherwise (ctx).
func (p *Pool) stopWhenIdle(ctx context.Context) {
	tick := time.NewTicker(max(p.cfg.IdleStop/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if p.stop(context.Background(), true) {
			return
		}
	}
}

// idle says the receivers stopped and the Holder holds nothing: its loop may end. It ends
// under p.mu, so that a start after it starts the loop again.
func (p *Pool) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running || p.holder.Len() > 0 {
		return false
	}
	p.holding = false
	return true
}

// Take returns up to max buffered records, waiting up to wait for the first. It starts the
// receivers if they do not run. Taken records stay held by the pool's Holder.
func (p *Pool) Take(ctx context.Context, max int, wait time.Duration) ([]Record, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	p.mu.Lock()
	p.taking++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.taking--
		p.lastTake = time.Now()
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		p.startLocked()
		if err := p.err; err != nil {
			p.err = nil
			p.mu.Unlock()
			return nil, err
		}
		if len(p.buf) > 0 {
			n := min(max, len(p.buf))
			out := make([]Record, n)
			copy(out, p.buf)
			for _, r := range out {
				p.bufBytes -= int64(len(r.Data))
			}
			p.buf = append(p.buf[:0], p.buf[n:]...)
			close(p.space)
			p.space = make(chan struct{})
			p.mu.Unlock()
			return out, nil
		}
		ready := p.ready
		p.mu.Unlock()
		select {
		case <-ready:
		case <-deadline.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Stop stops the receivers and releases the buffered records (they become visible at once).
// It waits for the receives under way, up to the long poll. Records taken and not settled
// stay held: the Holder extends them until they are settled, dropped or past the processing
// timeout, and then its loop ends. A later Take starts the pool again.
func (p *Pool) Stop(ctx context.Context) { p.stop(ctx, false) }

// stop stops the pool if it runs and, with idle, only if no Take ran for IdleStop. It
// reports whether the pool is stopped.
func (p *Pool) stop(ctx context.Context, idle bool) bool {
	p.mu.Lock()
	if !p.running {
		p.mu.Unlock()
		return true
	}
	if idle && (p.taking > 0 || time.Since(p.lastTake) < p.cfg.IdleStop) {
		p.mu.Unlock()
		return false
	}
	cancel, done := p.cancel, p.done
	p.running = false
	p.mu.Unlock()
	cancel()
	<-done
	p.mu.Lock()
	buf := p.buf
	p.buf, p.bufBytes = nil, 0
	p.mu.Unlock()
	entries := make([]Entry, len(buf))
	for i, r := range buf {
		entries[i] = Entry{Handle: r.Handle, Received: r.Received}
	}
	p.Release(ctx, entries)
	return true
}

// Release lets entries go back to the queue at once: the Holder stops extending them and
// their visibility is set to 0, so that they are delivered again. Best effort: a release
// that fails leaves the records to their visibility timeout.
func (p *Pool) Release(ctx context.Context, entries []Entry) {
	if len(entries) == 0 {
		return
	}
	handles := make([]string, len(entries))
	for i, e := range entries {
		handles[i] = e.Handle
	}
	p.holder.Drop(handles)
	_, _ = p.settler.Extend(ctx, entries, 0)
}

// receive is one receiver's loop.
func (p *Pool) receive(ctx context.Context) {
	attempt := 0
	for ctx.Err() == nil {
		p.mu.Lock()
		full := len(p.buf) >= p.cfg.MaxBuffered ||
			(p.cfg.MaxBufferedBytes > 0 && len(p.buf) > 0 && p.bufBytes >= p.cfg.MaxBufferedBytes)
		space := p.space
		p.mu.Unlock()
		if full {
			select {
			case <-space:
			case <-ctx.Done():
				return
			}
			continue
		}
		sent := time.Now()
		callCtx, cancel := context.WithTimeout(context.Background(), p.cfg.Wait+receiveMargin)
		recs, err := p.call(callCtx)
		cancel()
		got := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			class := classify(err)
			if class == backoff.Fatal {
				p.mu.Lock()
				p.err = fatal(fmt.Sprintf("queue %s: receiving %v records", p.cfg.QueueARN, p.cfg.Side), err)
				p.mu.Unlock()
				attempt = max(attempt, 4)
			}
			p.settler.stats.update(func(s *Stats) { s.retry(class) })
			_ = backoff.Sleep(ctx, p.cfg.Policy.Delay(attempt, class))
			attempt++
			continue
		}
		attempt = 0
		if len(recs) == 0 {
			p.settler.stats.update(func(s *Stats) { s.Receives++; s.EmptyReceives++ })
			_ = backoff.Sleep(ctx, emptyReceiveGap-got.Sub(sent))
			continue
		}
		out := make([]Record, len(recs))
		entries := make([]Entry, len(recs))
		var bytes int64
		for i, r := range recs {
			out[i] = recordOf(r, got)
			entries[i] = Entry{Handle: out[i].Handle, Received: got}
			bytes += int64(len(out[i].Data))
		}
		// The deadline counts from the call, as the service counts it from the receive.
		p.holder.Hold(entries, sent.Add(p.cfg.Visibility))
		p.settler.stats.update(func(s *Stats) { s.Receives++; s.Records += int64(len(out)); s.Bytes += bytes })
		p.mu.Lock()
		p.buf = append(p.buf, out...)
		p.bufBytes += bytes
		close(p.ready)
		p.ready = make(chan struct{})
		p.mu.Unlock()
	}
}

// call makes one receive of the pool's side.
func (p *Pool) call(ctx context.Context) ([]types.QueueRecord, error) {
	arn, limit := aws.String(p.cfg.QueueARN), aws.Int32(MaxBatch)
	vis, wait := aws.Int32(seconds(p.cfg.Visibility)), aws.Int32(int32(p.cfg.Wait/time.Second))
	if p.cfg.Side == DeadLetter {
		out, err := p.api.ReceiveDeadLetterQueueRecords(ctx, &kinesis.ReceiveDeadLetterQueueRecordsInput{QueueARN: arn, Limit: limit, VisibilityTimeoutSeconds: vis, WaitTimeSeconds: wait})
		if err != nil {
			return nil, err
		}
		return out.QueueRecords, nil
	}
	out, err := p.api.ReceiveQueueRecords(ctx, &kinesis.ReceiveQueueRecordsInput{QueueARN: arn, Limit: limit, VisibilityTimeoutSeconds: vis, WaitTimeSeconds: wait})
	if err != nil {
		return nil, err
	}
	return out.QueueRecords, nil
}

// IsFatal reports whether err is one the engine cannot ride out.
func IsFatal(err error) bool { return errors.Is(err, ErrFatal) }
