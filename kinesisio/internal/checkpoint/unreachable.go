package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// An unreachable checkpoint table. A commit the table cannot take because it does not
// answer (no connection, timeouts, 5xx, throttling past the client's retries) does not fail
// the commit step's bundle: Prism does not retry a failed bundle, so that would end the job,
// and the records were read and committed by the runner already. The checkpointer holds the
// shard's furthest such position (a later token replaces it, an earlier one never does, so
// SHARD_END, the highest, is never dropped) and a retrier goroutine writes it once the table
// answers again, with a backoff from heldRetryFirst doubling to heldRetryMax. The user sees
// one WARN per shard when its commits start failing, the counter
// kinesisio/checkpoint_table_unavailable, and one INFO per shard when its position is
// written again.
//
// A held position lives in this process only: if the process dies before the table comes
// back, the table stays behind the read, and the next job on it reads the records after
// the table's position again (duplicates, never loss). A bounded read does not end with a
// position unwritten: its commit bundles wait for their shards' held positions up to
// HeldWaitBounded, then fail with a line naming the table.

// Backoff of the retrier of held positions.
const (
	heldRetryFirst = time.Second
	heldRetryMax   = 30 * time.Second
)

// HeldWaitBounded is how long a bounded read's commit bundle waits for the table to take
// its held positions.
const HeldWaitBounded = 2 * time.Minute

// Unreachable reports whether err, from a write of the table, means that the table did
// not answer (and the write may land later) rather than that it refused the write: DynamoDB
// client errors other than throttling (validation, a missing table, denied access), a
// deleted lease item and cancellation are answers.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, leasetable.ErrLeaseGone) || errors.Is(err, leasetable.ErrLeaseLost) {
		return false
	}
	var refused *refusedError
	if errors.As(err, &refused) {
		return false
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded",
			"LimitExceededException", "InternalServerError", "ServiceUnavailable", "TransactionInProgressException":
			return true
		}
		return api.ErrorFault() == smithy.FaultServer
	}
	// No answer from DynamoDB: a refused or dropped connection, a timeout, the client's
	// retry quota spent.
	return true
}

// holdLocked keeps tok as s's held position if it is further than the one held; cause is
// the error of the write that failed (nil: a write was held already). It reports whether
// s's writes began to be held, so that the caller starts the retrier (startRetrier) once
// s.mu is released. s.mu is held.
func (c *Checkpointer) holdLocked(ctx context.Context, s *shardLease, tok Token, cause error) (started bool) {
	c.stats.unavailable.Add(1)
	if h := s.held; h != nil {
		if leasetable.Compare(tok.Position(), h.Position()) > 0 {
			tok.Records += h.Records
			s.held = &tok
		} else {
			h.Records += tok.Records
		}
		return false
	}
	s.held = &tok
	if cause == nil {
		return false
	}
	c.heldStartedLocked(ctx, s, fmt.Sprintf("%s/%d", tok.Seq, tok.Sub), cause)
	return true
}

// heldStartedLocked says that s's writes start waiting for the table. s.mu is held; the
// caller starts the retrier after releasing it.
func (c *Checkpointer) heldStartedLocked(ctx context.Context, s *shardLease, what string, cause error) {
	if s.heldSince.IsZero() {
		s.heldSince = time.Now()
		log.Warnf(ctx, "kinesisio: checkpoint table %s unreachable; holding shard %s's position %s (stream %s) and retrying from %v, backing off to %v, while the read goes on; a job that dies meanwhile resumes from the table's older position (records read again, none lost): %v",
			c.cfg.Table, s.lease.ShardID, what, s.stream, heldRetryFirst, heldRetryMax, cause)
	}
}

// startRetrier starts the retrier of held positions unless it runs. No shard's mu may be
// held: the retrier holds c.mu while it takes each shard's mu (anyHeldLocked), so taking
// c.mu under a shard's mu could deadlock (TestAHeldCommitAndTheRetrierDoNotDeadlock).
func (c *Checkpointer) startRetrier() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.retrying {
		c.retrying = true
		go c.retryHeld()
	}
}

// retryHeld writes the held positions until none is left.
func (c *Checkpointer) retryHeld() {
	wait := heldRetryFirst
	for {
		time.Sleep(wait)
		if !c.retryHeldOnce() {
			c.mu.Lock()
			// A write held while the pass ran started no retrier: look again under c.mu.
			if !c.anyHeldLocked() {
				c.retrying = false
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
			continue
		}
		wait = min(2*wait, heldRetryMax)
	}
}

func (c *Checkpointer) anyHeldLocked() bool {
	for _, s := range c.shards {
		s.mu.Lock()
		h := s.held != nil || s.heldPrepare
		s.mu.Unlock()
		if h {
			return true
		}
	}
	return false
}

// retryHeldOnce tries each held write once; it reports whether any is still held because
// the table is unreachable.
func (c *Checkpointer) retryHeldOnce() bool {
	c.mu.Lock()
	shards := make([]*shardLease, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	ctx := context.Background()
	still := false
	for _, s := range shards {
		s.mu.Lock()
		if c.retryShardLocked(ctx, s) {
			still = true
		}
		s.mu.Unlock()
	}
	return still
}

// retryShardLocked tries s's held writes; it reports whether they are still held. s.mu is
// held.
func (c *Checkpointer) retryShardLocked(ctx context.Context, s *shardLease) bool {
	if s.held == nil && !s.heldPrepare {
		return false
	}
	if s.lost != nil {
		s.held, s.heldPrepare, s.heldSince = nil, false, time.Time{}
		return false
	}
	var err error
	what := ""
	switch {
	case s.held != nil:
		// A SHARD_END commit clears the preparation with it.
		what = fmt.Sprintf("%s/%d", s.held.Seq, s.held.Sub)
		if err = c.writeLocked(ctx, s, *s.held); err == nil {
			s.held = nil
			if s.lease.Checkpoint == leasetable.ShardEnd {
				s.heldPrepare = false
			}
		}
	default:
		what = "SHARD_END (prepared)"
	}
	if err == nil && s.held == nil && s.heldPrepare {
		if err = c.prepareLocked(ctx, s, s.stream); err == nil {
			s.heldPrepare = false
		}
	}
	switch {
	case err != nil && Unreachable(err):
		return true
	case err != nil:
		s.refused = fmt.Errorf("kinesisio: checkpoint table %s refused shard %s's held position %s once it answered again: %w", c.cfg.Table, s.lease.ShardID, what, err)
		log.Error(ctx, s.refused.Error())
		s.held, s.heldPrepare = nil, false
	default:
		log.Infof(ctx, "kinesisio: checkpoint table %s reachable again after %v: wrote shard %s's held position %s", c.cfg.Table, time.Since(s.heldSince).Round(time.Second), s.lease.ShardID, what)
	}
	s.heldSince = time.Time{}
	return false
}

// AwaitHeld waits until the table took the held positions of shards, for at most budget,
// and fails with the table's name when it did not.
func (c *Checkpointer) AwaitHeld(ctx context.Context, shards []string, budget time.Duration) error {
	deadline := time.Now().Add(budget)
	for {
		var held []string
		for _, id := range shards {
			s := c.shard(id)
			s.mu.Lock()
			if s.refused != nil {
				err := s.refused
				s.mu.Unlock()
				return err
			}
			if s.held != nil || s.heldPrepare {
				held = append(held, id)
			}
			s.mu.Unlock()
		}
		if len(held) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			slices.Sort(held)
			return fmt.Errorf("kinesisio: checkpoint table %s unreachable for more than %v at the end of a bounded read: the positions of shards %v are not written, so the next read on the table reads their records again; check that DynamoDB (endpoint %q) is reachable and run the read again", c.cfg.Table, budget, held, c.cfg.Endpoint)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kinesisio: waiting for checkpoint table %s to take the positions of shards %v: %w", c.cfg.Table, held, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
