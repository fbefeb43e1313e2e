package kinesisio

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// holdForTable keeps the reader off d while the table says not to read it: while a parent
// is not at SHARD_END (checked until it is, at most every WithPollInterval), or for good
// once another job took the lease over.
func (r *shardReader) holdForTable(ctx context.Context, rt *sdf.LockRTracker, d shardDescriptor) (sdf.ProcessContinuation, bool, error) {
	if owner, lost := r.cp.LostTo(d.ShardID); lost {
		log.Infof(ctx, "kinesisio: no longer reading %v: owner %q holds its lease in checkpoint table %s", d, owner, r.spec.Checkpoint.Table)
		rt.TryClaim(shardEndClaim{})
		return sdf.StopProcessing(), true, nil
	}
	if d.ParentShardID == "" && d.AdjacentParentShardID == "" {
		return nil, false, nil
	}
	key := parentChecksOf(r.shardKey(d))
	if r.cp.ParentsSeenDone(d.ShardID) {
		return nil, false, nil
	}
	if cont, held, err := holdOff(ctx, calls.wait(key, time.Now())); held || err != nil {
		return cont, held, err
	}
	calls.notBefore(key, time.Now().Add(r.spec.PollInterval))
	p, err := r.cp.ParentsPending(ctx, tableShard(d))
	if err != nil {
		// One WARN per shard while the table does not answer; the checks go on.
		if r.cp.ParentsCheckFailed(d.ShardID, true) {
			log.Warnf(ctx, "%v; checking again every %v", err, r.spec.PollInterval)
		} else {
			log.Debugf(ctx, "%v; checking again in %v", err, r.spec.PollInterval)
		}
		return sdf.ResumeProcessingIn(r.spec.PollInterval), true, nil
	}
	r.cp.ParentsCheckFailed(d.ShardID, false)
	if p != "" {
		log.Debugf(ctx, "kinesisio: %v waits for its parent %s to reach SHARD_END in checkpoint table %s", d, p, r.spec.Checkpoint.Table)
		return sdf.ResumeProcessingIn(r.spec.PollInterval), true, nil
	}
	calls.forget(key)
	r.cp.MarkParentsDone(d.ShardID)
	log.Infof(ctx, "kinesisio: the parents of %v are read to their end; reading it", d)
	return nil, false, nil
}
