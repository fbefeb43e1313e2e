package kinesistest

import "strconv"

// Operations that only on-demand streams support:
// UpdateStreamRecordDistributionStrategy and UpdateStreamWarmThroughput.

type updateDistributionInput struct {
	StreamARN                  *string
	RecordDistributionStrategy *string
}

// updateRecordDistributionStrategy switches a stream between the two
// strategies. The switch applies to the next record stored: puts read the
// strategy under the stream's read lock and the switch takes the write lock.
// Records already stored stay where they are. The service documents the
// switch as immediate and without downtime, so the stream stays ACTIVE.
func (s *Server) updateRecordDistributionStrategy(r *request) (any, error) {
	var in updateDistributionInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkStreamARN(in.StreamARN, &v)
	if in.RecordDistributionStrategy == nil {
		v.addNull("recordDistributionStrategy")
	}
	checkDistribution(in.RecordDistributionStrategy, "recordDistributionStrategy", &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	st, err := s.stream(streamRef{StreamARN: in.StreamARN})
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if status := st.statusLocked(r.nowMs); status == statusCreating {
		return nil, errorf(codeResourceInUse, "Stream %s under account %s not ACTIVE, instead in state %s", st.name, AccountID, status)
	}
	// The operation is for on-demand streams, whatever the strategy asked for.
	if st.mode != modeOnDemand {
		return nil, errorf(codeInvalidArgument,
			"UpdateStreamRecordDistributionStrategy is not supported for stream %s under account %s because it is in PROVISIONED capacity mode; the record distribution strategy is a setting of ON_DEMAND streams.",
			st.name, AccountID)
	}
	st.strategy = *in.RecordDistributionStrategy
	return nil, nil
}

func errAutoNeedsOnDemand(stream string) error {
	return errorf(codeInvalidArgument,
		"Record distribution strategy AUTO is not supported for stream %s under account %s because it is in PROVISIONED capacity mode; AUTO needs ON_DEMAND.",
		stream, AccountID)
}

// Warm throughput (On-demand Advantage): how many MiB/s of writes an ON_DEMAND
// stream is scaled to take at once. A stream starts at 1 MiB/s per shard (4
// MiB/s for one created over HTTP, the service's figure for a new on-demand
// stream). UpdateStreamWarmThroughput sets a target and puts the stream in
// UPDATING for WithTransitionDelay; the current value reaches the target when
// that ends, at once without a delay. The stream's shards do not change: the
// figures are reported, not enforced.

// maxWarmThroughputMiBps is the service's default limit, 10 GiB/s.
const maxWarmThroughputMiBps = 10240

// warmThroughput is a stream's warm throughput; guarded by the stream's mu.
type warmThroughput struct {
	target   int
	previous int   // the current value until atMs
	atMs     int64 // when the current value reaches target
}

func (w *warmThroughput) current(nowMs int64) int {
	if nowMs >= w.atMs {
		return w.target
	}
	return w.previous
}

// set starts scaling toward mibps at nowMs, for delay milliseconds.
func (w *warmThroughput) set(mibps int, nowMs int64, delay int64) {
	w.previous, w.target, w.atMs = w.current(nowMs), mibps, nowMs+delay
}

type warmThroughputJSON struct {
	TargetMiBps  int
	CurrentMiBps int
}

func (w *warmThroughput) shape(nowMs int64) *warmThroughputJSON {
	return &warmThroughputJSON{TargetMiBps: w.target, CurrentMiBps: w.current(nowMs)}
}

// checkWarmThroughput adds the model's violations of a WarmThroughputMiBps
// member (a natural number) to v.
func checkWarmThroughput(mibps *int32, v *violations) {
	if mibps != nil && *mibps < 0 {
		v.add(strconv.Itoa(int(*mibps)), "warmThroughputMiBps", "have value greater than or equal to 0")
	}
}

// allowWarmThroughput checks that stream (in mode) may be given mibps of warm
// throughput at nowMs: an ON_DEMAND stream, in an account with the billing
// commitment on, and at most 10 GiB/s.
func (s *Server) allowWarmThroughput(stream, mode string, mibps int, nowMs int64) error {
	switch {
	case mode != modeOnDemand:
		return errorf(codeInvalidArgument,
			"Warm throughput is not supported for stream %s under account %s because it is in PROVISIONED capacity mode; it is a setting of ON_DEMAND streams.",
			stream, AccountID)
	case !s.commitment.active(nowMs):
		return errorf(codeInvalidArgument,
			"Warm throughput for stream %s needs the MinimumThroughputBillingCommitment of account %s, which is DISABLED; enable it with UpdateAccountSettings.",
			stream, AccountID)
	case mibps > maxWarmThroughputMiBps:
		return errorf(codeLimitExceeded,
			"Warm throughput of %d MiB/s for stream %s under account %s exceeds the limit of %d MiB/s.",
			mibps, stream, AccountID, maxWarmThroughputMiBps)
	}
	return nil
}

type updateWarmThroughputInput struct {
	streamRef
	WarmThroughputMiBps *int32
}

type updateWarmThroughputOutput struct {
	StreamARN      string
	StreamName     string
	WarmThroughput *warmThroughputJSON
}

func (s *Server) updateStreamWarmThroughput(r *request) (any, error) {
	var in updateWarmThroughputInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	if in.WarmThroughputMiBps == nil {
		v.addNull("warmThroughputMiBps")
	}
	checkWarmThroughput(in.WarmThroughputMiBps, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	st, err := s.stream(in.streamRef)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.requireActiveLocked(r.nowMs); err != nil {
		return nil, err
	}
	mibps := int(*in.WarmThroughputMiBps)
	if err := s.allowWarmThroughput(st.name, st.mode, mibps, r.nowMs); err != nil {
		return nil, err
	}
	st.warm.set(mibps, r.nowMs, s.transitionDelay.Milliseconds())
	st.markBusyLocked(statusUpdating, r.nowMs, s.transitionDelay)
	return updateWarmThroughputOutput{
		StreamARN:      streamARN(r.region, st.name),
		StreamName:     st.name,
		WarmThroughput: st.warm.shape(r.nowMs),
	}, nil
}
