package kinesistest

// UpdateStreamMode switches a stream between PROVISIONED and ON_DEMAND. The
// shards stay as they are (the service rescales an on-demand stream by its
// own rules, which this server does not model); the stream is UPDATING for
// WithTransitionDelay. A stream with queues cannot become PROVISIONED, and
// neither can one whose record distribution strategy is AUTO (an ON_DEMAND
// setting).
//
// Locking: the mode is read under the stream's lock, and also under
// consumerMu (the registered-consumer limit depends on it), so the switch
// takes consumerMu, the queue registry's lock and the stream's write lock.

type updateStreamModeInput struct {
	StreamARN           *string
	StreamModeDetails   *streamModeDetailsJSON
	WarmThroughputMiBps *int32
}

func (s *Server) updateStreamMode(r *request) (any, error) {
	var in updateStreamModeInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkStreamARN(in.StreamARN, &v)
	switch {
	case in.StreamModeDetails == nil:
		v.addNull("streamModeDetails")
	case in.StreamModeDetails.StreamMode != modeProvisioned && in.StreamModeDetails.StreamMode != modeOnDemand:
		v.add(in.StreamModeDetails.StreamMode, "streamModeDetails.streamMode", "satisfy enum value set: [PROVISIONED, ON_DEMAND]")
	}
	checkWarmThroughput(in.WarmThroughputMiBps, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	st, err := s.stream(streamRef{StreamARN: in.StreamARN})
	if err != nil {
		return nil, err
	}
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	target := in.StreamModeDetails.StreamMode
	if target == modeProvisioned {
		if err := s.refuseIfQueuesLocked(st, r.nowMs, "switch the stream to PROVISIONED"); err != nil {
			return nil, err
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.requireActiveLocked(r.nowMs); err != nil {
		return nil, err
	}
	switch {
	case target == st.mode:
		return nil, errorf(codeInvalidArgument, "Stream %s under account %s is already in %s capacity mode.", st.name, AccountID, target)
	case target == modeProvisioned && st.strategy == distributionAuto:
		return nil, errorf(codeInvalidArgument,
			"Stream %s under account %s uses record distribution strategy AUTO, which needs ON_DEMAND; switch it to USER_PARTITION_KEY first.", st.name, AccountID)
	case target == modeProvisioned && in.WarmThroughputMiBps != nil:
		return nil, errorf(codeInvalidArgument, "WarmThroughputMiBps is only valid when the stream is updated to ON_DEMAND.")
	}
	if w := in.WarmThroughputMiBps; w != nil {
		if err := s.allowWarmThroughput(st.name, target, int(*w), r.nowMs); err != nil {
			return nil, err
		}
		st.warm.set(int(*w), r.nowMs, s.transitionDelay.Milliseconds())
	}
	st.mode = target
	st.markBusyLocked(statusUpdating, r.nowMs, s.transitionDelay)
	s.logf("stream %s switched to %s", st.name, target)
	return nil, nil
}
