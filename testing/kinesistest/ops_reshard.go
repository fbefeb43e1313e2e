package kinesistest

import (
	"strconv"
)

// SplitShard, MergeShards and UpdateShardCount. Resharding takes effect at
// once: parents close (EndingSequenceNumber set) and children open in the same
// call, while the stream reports UPDATING for the transition delay.

const scalingWindowMs = 24 * 60 * 60 * 1000

// splitLocked closes sh and opens two children, the upper one starting at key.
// Caller holds the stream's write lock.
func (st *stream) splitLocked(sh *shard, key uint128, nowMs int64) {
	st.closeShardLocked(sh, nowMs)
	st.addShardLocked(sh.id, "", sh.start, key.sub1(), nowMs)
	st.addShardLocked(sh.id, "", key, sh.end, nowMs)
	st.rebuildOpenLocked()
}

// mergeLocked closes a and b, adjacent open shards, and opens their child,
// whose ParentShardId is a and AdjacentParentShardId b.
func (st *stream) mergeLocked(a, b *shard, nowMs int64) *shard {
	lo, hi := a, b
	if b.start.cmp(a.start) < 0 {
		lo, hi = b, a
	}
	st.closeShardLocked(a, nowMs)
	st.closeShardLocked(b, nowMs)
	child := st.addShardLocked(a.id, b.id, lo.start, hi.end, nowMs)
	st.rebuildOpenLocked()
	return child
}

// scaleUniformLocked reshapes the open shards into n shards of equal hash
// ranges with splits, then merges, as UNIFORM_SCALING does; the shards in
// between live for no time, like the service's short-lived shards.
func (st *stream) scaleUniformLocked(n int, nowMs int64) {
	starts := evenSplit(n)
	for _, b := range starts[1:] {
		if sh := st.route(b); sh.start.cmp(b) != 0 {
			st.splitLocked(sh, b, nowMs)
		}
	}
	for i, lo := range starts {
		hi := maxHashKey
		if i+1 < len(starts) {
			hi = starts[i+1].sub1()
		}
		var parts []*shard
		for _, sh := range st.open {
			if sh.start.cmp(lo) >= 0 && sh.end.cmp(hi) <= 0 {
				parts = append(parts, sh)
			}
		}
		acc := parts[0]
		for _, p := range parts[1:] {
			acc = st.mergeLocked(acc, p, nowMs)
		}
	}
}

// requireReshardableLocked refuses resharding on on-demand streams and on
// streams that are not ACTIVE.
func (st *stream) requireReshardableLocked(op string, nowMs int64) error {
	if st.mode == modeOnDemand {
		return errorf(codeValidation, "%s is not supported for stream %s under account %s because it is in ON_DEMAND capacity mode.", op, st.name, AccountID)
	}
	return st.requireActiveLocked(nowMs)
}

// openShardLocked finds the open shard a resharding call names; verb is
// "splitting" or "merging" for the message.
func (st *stream) openShardLocked(id, verb string, nowMs int64) (*shard, error) {
	sh := st.shardLocked(id, nowMs)
	if sh == nil {
		return nil, errorf(codeResourceNotFound, "Could not find shard %s in stream %s under account %s.", id, st.name, AccountID)
	}
	if sh.closed {
		return nil, errorf(codeInvalidArgument, "Shard %s in stream %s under account %s has already been merged or split, and thus is not eligible for %s.", id, st.name, AccountID, verb)
	}
	return sh, nil
}

func checkShardIDMember(id *string, member string, v *violations) {
	switch {
	case id == nil:
		v.addNull(member)
	case len(*id) < 1 || len(*id) > 128 || !streamNamePattern.MatchString(*id):
		v.add(*id, member, "satisfy regular expression pattern: [a-zA-Z0-9_.-]+")
	}
}

// adjacent reports whether b's range starts right after a's.
func adjacent(a, b *shard) bool {
	return a.end != maxHashKey && a.end.add1() == b.start
}

type splitShardInput struct {
	streamRef
	ShardToSplit       *string
	NewStartingHashKey *string
}

func (s *Server) splitShard(r *request) (any, error) {
	var in splitShardInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkShardIDMember(in.ShardToSplit, "shardToSplit", &v)
	switch k := in.NewStartingHashKey; {
	case k == nil:
		v.addNull("newStartingHashKey")
	case !hashKeyPattern.MatchString(*k):
		v.add(*k, "newStartingHashKey", `satisfy regular expression pattern: 0|([1-9]\d{0,38})`)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	st, err := s.stream(in.streamRef)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.requireReshardableLocked("SplitShard", r.nowMs); err != nil {
		return nil, err
	}
	sh, err := st.openShardLocked(*in.ShardToSplit, "splitting", r.nowMs)
	if err != nil {
		return nil, err
	}
	key, ok := parseHashKey(*in.NewStartingHashKey)
	if !ok || key.cmp(sh.start.add1()) <= 0 || key.cmp(sh.end) >= 0 {
		return nil, errorf(codeInvalidArgument, "NewStartingHashKey %s used in SplitShard() on shard %s in stream %s under account %s is not both greater than one plus the shard's StartingHashKey %s and less than the shard's EndingHashKey %s.",
			*in.NewStartingHashKey, sh.id, st.name, AccountID, sh.startKey, sh.endKey)
	}
	if len(st.open)+1 > maxShardsPerStream {
		return nil, errorf(codeLimitExceeded, "This request would exceed the shard limit of %d for stream %s under account %s.", maxShardsPerStream, st.name, AccountID)
	}
	st.splitLocked(sh, key, r.nowMs)
	st.markBusyLocked(statusUpdating, r.nowMs, s.transitionDelay)
	return nil, nil
}

type mergeShardsInput struct {
	streamRef
	ShardToMerge         *string
	AdjacentShardToMerge *string
}

func (s *Server) mergeShards(r *request) (any, error) {
	var in mergeShardsInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkShardIDMember(in.ShardToMerge, "shardToMerge", &v)
	checkShardIDMember(in.AdjacentShardToMerge, "adjacentShardToMerge", &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	st, err := s.stream(in.streamRef)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.requireReshardableLocked("MergeShards", r.nowMs); err != nil {
		return nil, err
	}
	a, err := st.openShardLocked(*in.ShardToMerge, "merging", r.nowMs)
	if err != nil {
		return nil, err
	}
	b, err := st.openShardLocked(*in.AdjacentShardToMerge, "merging", r.nowMs)
	if err != nil {
		return nil, err
	}
	if a == b || !(adjacent(a, b) || adjacent(b, a)) {
		return nil, errorf(codeInvalidArgument, "Shards %s and %s in stream %s under account %s are not an adjacent pair of shards eligible for merging",
			a.id, b.id, st.name, AccountID)
	}
	st.mergeLocked(a, b, r.nowMs)
	st.markBusyLocked(statusUpdating, r.nowMs, s.transitionDelay)
	return nil, nil
}

type updateShardCountInput struct {
	streamRef
	TargetShardCount *int32
	ScalingType      *string
}

type updateShardCountOutput struct {
	StreamName        string
	StreamARN         string
	CurrentShardCount int
	TargetShardCount  int
}

func (s *Server) updateShardCount(r *request) (any, error) {
	var in updateShardCountInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	switch t := in.TargetShardCount; {
	case t == nil:
		v.addNull("targetShardCount")
	case *t < 1:
		v.add(strconv.Itoa(int(*t)), "targetShardCount", "have value greater than or equal to 1")
	}
	switch t := in.ScalingType; {
	case t == nil:
		v.addNull("scalingType")
	case *t != "UNIFORM_SCALING":
		v.add(*t, "scalingType", "satisfy enum value set: [UNIFORM_SCALING]")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	target := int(*in.TargetShardCount)
	st, err := s.stream(in.streamRef)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.requireReshardableLocked("UpdateShardCount", r.nowMs); err != nil {
		return nil, err
	}
	current := len(st.open)
	if target > maxShardsPerStream {
		return nil, errorf(codeLimitExceeded, "UpdateShardCount cannot scale stream %s under account %s above %d shards; requested %d.", st.name, AccountID, maxShardsPerStream, target)
	}
	// Keep the calls of the last 24 hours for the daily quota.
	recent := st.scalingsMs[:0]
	for _, ms := range st.scalingsMs {
		if r.nowMs-ms < scalingWindowMs {
			recent = append(recent, ms)
		}
	}
	st.scalingsMs = recent
	if r.limits {
		switch {
		case target > 2*current:
			return nil, errorf(codeLimitExceeded, "UpdateShardCount cannot scale up stream %s under account %s to more than double its current open shard count %d; requested %d.", st.name, AccountID, current, target)
		case 2*target < current:
			return nil, errorf(codeLimitExceeded, "UpdateShardCount cannot scale down stream %s under account %s to below half its current open shard count %d; requested %d.", st.name, AccountID, current, target)
		case len(st.scalingsMs) >= maxScalingsPerDay:
			return nil, errorf(codeLimitExceeded, "UpdateShardCount has already scaled stream %s under account %s %d times in the last 24 hours, the limit.", st.name, AccountID, maxScalingsPerDay)
		}
	}
	st.scalingsMs = append(st.scalingsMs, r.nowMs)
	st.scaleUniformLocked(target, r.nowMs)
	st.markBusyLocked(statusUpdating, r.nowMs, s.transitionDelay)
	return updateShardCountOutput{
		StreamName:        st.name,
		StreamARN:         streamARN(r.region, st.name),
		CurrentShardCount: current,
		TargetShardCount:  target,
	}, nil
}
