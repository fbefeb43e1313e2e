package queue

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
)

// Per-entry error codes of the settle calls.
const (
	codeThrottling      = "ThrottlingException"
	codeInternalFailure = "InternalFailureException"
)

// op is one kind of settle call.
type op int

const (
	opAck op = iota
	opExtend
	opRestore
)

func (o op) String() string {
	switch o {
	case opExtend:
		return "visibility extension"
	case opRestore:
		return "restore"
	}
	return "acknowledgement"
}

// Settler makes the calls that settle or extend received records, for one queue and side:
// batches of up to MaxBatch entries, a failed call retried with backoff, and failed
// entries retried when their code says the service was busy (ThrottlingException,
// InternalFailureException). An entry that fails with any other code has a handle that no
// longer works (its record was delivered again, its visibility ran out, the queue was
// deleted): it is counted as stale and logged once per Settler, not an error, since its
// record will be delivered again.
type Settler struct {
	api    API
	arn    string
	side   Side
	policy backoff.Policy
	stats  *stats
	logf   func(string, ...any)

	staleOnce sync.Once
}

// NewSettler returns a Settler of queueARN's side. logf (nil: the log package) reports the
// first stale handle.
func NewSettler(api API, queueARN string, side Side, policy backoff.Policy, logf func(string, ...any)) *Settler {
	if logf == nil {
		logf = log.Printf
	}
	return &Settler{api: api, arn: queueARN, side: side, policy: policy, stats: &stats{}, logf: logf}
}

// TakeStats returns what the Settler's extensions (and its pool's receivers) did since the
// last call; Ack and Restore return their own statistics instead.
func (s *Settler) TakeStats() Stats { return s.stats.take() }

// Entry is one record to settle: its handle, and when it was received (for the ack lag;
// zero when unknown).
type Entry struct {
	Handle   string
	Received time.Time
}

// Settled is what one Ack or Restore did: the handles that failed for good (stale ones
// included), and the call's statistics (acknowledgements or restores, failed entries, stale
// handles, retries, throttles, ack lag). The statistics are the caller's to report and are
// not in TakeStats: a process's steps share a Settler, and what one step settled must be
// counted once, by that step.
type Settled struct {
	Lost  []string
	Stats Stats
}

// Ack acknowledges entries (on the dead-letter side: discards them). It returns an error
// only when the queue cannot be called at all (a fatal error, or ctx done); what was settled
// until then is in the Settled.
func (s *Settler) Ack(ctx context.Context, entries []Entry) (Settled, error) {
	var st Stats
	lost, err := s.settle(ctx, opAck, entries, 0, &st)
	return Settled{Lost: lost, Stats: st}, err
}

// Restore returns dead letters to the queue's normal side, their ReceiveCount reset.
func (s *Settler) Restore(ctx context.Context, entries []Entry) (Settled, error) {
	if s.side != DeadLetter {
		return Settled{}, fmt.Errorf("queue %s: restore is a dead-letter operation", s.arn)
	}
	var st Stats
	lost, err := s.settle(ctx, opRestore, entries, 0, &st)
	return Settled{Lost: lost, Stats: st}, err
}

// Extend sets the visibility of entries to vis from now, and returns the handles that
// failed for good. Its statistics go to TakeStats.
func (s *Settler) Extend(ctx context.Context, entries []Entry, vis time.Duration) ([]string, error) {
	var st Stats
	lost, err := s.settle(ctx, opExtend, entries, vis, &st)
	s.stats.update(func(all *Stats) { all.add(st) })
	return lost, err
}

// SettleCalls is how many calls one settle of many entries makes at once, batches of
// MaxBatch each: a call takes the network's and the service's time, and a bundle's
// thousands of acknowledgements one batch after another (10 per 20 ms, 500 a second) fell
// behind the receives (bench row 16 with --queue_latency=20ms).
const SettleCalls = 16

// settle settles entries in batches, up to SettleCalls at once, counting into st, which
// only the calling goroutine touches. On an error it returns the first, once every batch
// under way ended.
func (s *Settler) settle(ctx context.Context, o op, entries []Entry, vis time.Duration, st *Stats) ([]string, error) {
	var batches [][]Entry
	for len(entries) > 0 {
		n := min(len(entries), MaxBatch)
		batches = append(batches, entries[:n])
		entries = entries[n:]
	}
	if len(batches) == 1 {
		return s.batch(ctx, o, batches[0], vis, st)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		lost     []string
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan []Entry)
	)
	for range min(SettleCalls, len(batches)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var own Stats
			var ownLost []string
			for b := range next {
				l, err := s.batch(ctx, o, b, vis, &own)
				ownLost = append(ownLost, l...)
				if err != nil {
					// The first error is the cause; the others are the cancel's.
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			st.add(own)
			lost = append(lost, ownLost...)
		}()
	}
feed:
	for _, b := range batches {
		select {
		case next <- b:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return lost, firstErr
}

// failure is one failed entry of a response.
type failure struct{ handle, code, msg string }

// batch settles up to MaxBatch entries, retrying the call and its busy entries.
func (s *Settler) batch(ctx context.Context, o op, entries []Entry, vis time.Duration, st *Stats) ([]string, error) {
	byHandle := make(map[string]Entry, len(entries))
	for _, e := range entries {
		byHandle[e.Handle] = e
	}
	pending := entries
	var lost []string
	for attempt := 0; ; attempt++ {
		handles := make([]string, len(pending))
		for i, e := range pending {
			handles[i] = e.Handle
		}
		ok, failed, err := s.call(ctx, o, handles, vis)
		if err != nil {
			if ctx.Err() != nil {
				return lost, fmt.Errorf("queue %s: %v of %d entries: %w", s.arn, o, len(pending), ctx.Err())
			}
			class := classify(err)
			if class == backoff.Fatal {
				return lost, fatal(fmt.Sprintf("queue %s: %v of %d entries", s.arn, o, len(pending)), err)
			}
			// An outage is ridden out, as the receivers and the shard read do: a settle
			// that keeps failing holds its bundle, and the worst a late one meets is a
			// stale handle, whose record is delivered again (soak --queue --outage).
			if attempt == s.policy.Retries {
				s.logf("kinesisio: queue %s: %v of %d entries failed %d times (%v); retrying until the queue answers", s.arn, o, len(pending), attempt+1, err)
			}
			st.retry(class)
			if err := backoff.Sleep(ctx, s.policy.Delay(min(attempt, s.policy.Retries), class)); err != nil {
				return lost, fmt.Errorf("queue %s: %v: %w", s.arn, o, err)
			}
			continue
		}
		now := time.Now()
		switch o {
		case opAck:
			st.Acks += int64(len(ok))
			for _, h := range ok {
				if r := byHandle[h].Received; !r.IsZero() {
					st.AckLagMs = append(st.AckLagMs, now.Sub(r).Milliseconds())
				}
			}
		case opRestore:
			st.Restores += int64(len(ok))
		case opExtend:
			st.Extensions += int64(len(ok))
		}
		var retry []Entry
		busy := backoff.Retryable
		for _, f := range failed {
			switch {
			case (f.code == codeThrottling || f.code == codeInternalFailure) && attempt < s.policy.Retries:
				if f.code == codeThrottling {
					busy = backoff.Throttled
				}
				retry = append(retry, byHandle[f.handle])
			case f.code == codeThrottling || f.code == codeInternalFailure:
				lost = append(lost, f.handle)
				st.lost(o, false)
			case o == opExtend:
				// A handle settled elsewhere (the ack step ran on another worker) or
				// expired: the record is not held any more.
				lost = append(lost, f.handle)
				st.lost(o, true)
			default:
				lost = append(lost, f.handle)
				st.lost(o, true)
				s.staleOnce.Do(func() {
					s.logf("kinesisio: queue %s: a %v failed with %s (%s): the handle no longer works and its record will be delivered again; further stale handles are only counted", s.arn, o, f.code, f.msg)
				})
			}
		}
		if len(retry) == 0 {
			return lost, nil
		}
		st.retry(busy)
		if err := backoff.Sleep(ctx, s.policy.Delay(attempt, busy)); err != nil {
			return lost, fmt.Errorf("queue %s: %v: %w", s.arn, o, err)
		}
		pending = retry
	}
}

// lost counts an entry that failed for good.
func (st *Stats) lost(o op, stale bool) {
	switch {
	case o == opExtend:
		st.ExtensionsRefused++
	case stale:
		st.FailedAcks++
		st.StaleHandles++
	default:
		st.FailedAcks++
	}
}

// retry counts a retry of class.
func (st *Stats) retry(class backoff.Class) {
	st.Retries++
	if class == backoff.Throttled {
		st.Throttles++
	}
}

// call makes one settle call and returns the successful handles and the failed entries.
func (s *Settler) call(ctx context.Context, o op, handles []string, vis time.Duration) ([]string, []failure, error) {
	arn := aws.String(s.arn)
	var ok []string
	var failed []failure
	fail := func(h, code, msg *string) {
		failed = append(failed, failure{aws.ToString(h), aws.ToString(code), aws.ToString(msg)})
	}
	switch {
	case o == opAck && s.side == Normal:
		in := &kinesis.AcknowledgeQueueRecordsInput{QueueARN: arn}
		for _, h := range handles {
			in.Entries = append(in.Entries, types.AcknowledgeQueueRecordsRequestEntry{ReceiptHandle: aws.String(h)})
		}
		out, err := s.api.AcknowledgeQueueRecords(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range out.Successful {
			ok = append(ok, aws.ToString(e.ReceiptHandle))
		}
		for _, e := range out.Failed {
			fail(e.ReceiptHandle, e.ErrorCode, e.ErrorMessage)
		}
	case o == opAck:
		in := &kinesis.AcknowledgeDeadLetterQueueRecordsInput{QueueARN: arn}
		for _, h := range handles {
			in.Entries = append(in.Entries, types.AcknowledgeDeadLetterQueueRecordsRequestEntry{ReceiptHandle: aws.String(h)})
		}
		out, err := s.api.AcknowledgeDeadLetterQueueRecords(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range out.Successful {
			ok = append(ok, aws.ToString(e.ReceiptHandle))
		}
		for _, e := range out.Failed {
			fail(e.ReceiptHandle, e.ErrorCode, e.ErrorMessage)
		}
	case o == opRestore:
		in := &kinesis.RestoreDeadLetterQueueRecordsInput{QueueARN: arn}
		for _, h := range handles {
			in.Entries = append(in.Entries, types.RestoreDeadLetterQueueRecordsRequestEntry{ReceiptHandle: aws.String(h)})
		}
		out, err := s.api.RestoreDeadLetterQueueRecords(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range out.Successful {
			ok = append(ok, aws.ToString(e.ReceiptHandle))
		}
		for _, e := range out.Failed {
			fail(e.ReceiptHandle, e.ErrorCode, e.ErrorMessage)
		}
	case s.side == Normal:
		in := &kinesis.UpdateQueueRecordsVisibilityInput{QueueARN: arn}
		for _, h := range handles {
			in.Entries = append(in.Entries, types.UpdateQueueRecordsVisibilityRequestEntry{ReceiptHandle: aws.String(h), VisibilityTimeoutSeconds: aws.Int32(seconds(vis))})
		}
		out, err := s.api.UpdateQueueRecordsVisibility(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range out.Successful {
			ok = append(ok, aws.ToString(e.ReceiptHandle))
		}
		for _, e := range out.Failed {
			fail(e.ReceiptHandle, e.ErrorCode, e.ErrorMessage)
		}
	default:
		in := &kinesis.UpdateDeadLetterQueueRecordsVisibilityInput{QueueARN: arn}
		for _, h := range handles {
			in.Entries = append(in.Entries, types.UpdateDeadLetterQueueRecordsVisibilityRequestEntry{ReceiptHandle: aws.String(h), VisibilityTimeoutSeconds: aws.Int32(seconds(vis))})
		}
		out, err := s.api.UpdateDeadLetterQueueRecordsVisibility(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range out.Successful {
			ok = append(ok, aws.ToString(e.ReceiptHandle))
		}
		for _, e := range out.Failed {
			fail(e.ReceiptHandle, e.ErrorCode, e.ErrorMessage)
		}
	}
	return ok, failed, nil
}
