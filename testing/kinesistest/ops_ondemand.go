package kinesistest

// Operations that only on-demand streams support:
// UpdateStreamRecordDistributionStrategy.

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
