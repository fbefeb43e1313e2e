package kinesistest

import (
	"sort"
	"strconv"
	"time"
)

// Stream lifecycle and configuration operations.

type streamRef struct {
	StreamName *string
	StreamARN  *string
}

// stream resolves the stream a request names.
func (s *Server) stream(ref streamRef) (*stream, error) {
	name, err := streamNameOf(ref.StreamName, ref.StreamARN)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	st := s.streams[name]
	s.mu.RUnlock()
	if st == nil {
		return nil, errStreamNotFound(name)
	}
	return st, nil
}

// addStream creates and registers a stream; configure, if not nil, adjusts it
// before anyone can see it.
func (s *Server) addStream(name, mode string, shardCount int, nowMs int64, configure func(*stream)) error {
	if shardCount > maxShardsPerStream {
		return errorf(codeLimitExceeded, "This request would exceed the shard limit for the account %s in %s. Limit: %d. Requested: %d.",
			AccountID, Region, maxShardsPerStream, shardCount)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[name] != nil {
		return errorf(codeResourceInUse, "Stream %s under account %s already exists.", name, AccountID)
	}
	s.nextUID++
	st := newStream(s.nextUID, name, mode, shardCount, nowMs)
	if configure != nil {
		configure(st)
	}
	s.streams[name] = st
	s.logf("created stream %s (%s, %d shards)", name, mode, shardCount)
	return nil
}

type createStreamInput struct {
	StreamName         *string
	ShardCount         *int32
	StreamModeDetails  *streamModeDetailsJSON
	MaxRecordSizeInKiB *int32
	Tags               map[string]string

	RecordDistributionStrategy *string
	WarmThroughputMiBps        *int32
}

func (s *Server) createStream(r *request) (any, error) {
	var in createStreamInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	if in.StreamName == nil {
		v.addNull("streamName")
	} else {
		validateStreamName(*in.StreamName, "streamName", &v)
	}
	mode := modeProvisioned
	if in.StreamModeDetails != nil {
		switch m := in.StreamModeDetails.StreamMode; m {
		case modeProvisioned, modeOnDemand:
			mode = m
		default:
			v.add(m, "streamModeDetails.streamMode", "satisfy enum value set: [PROVISIONED, ON_DEMAND]")
		}
	}
	if in.ShardCount != nil && *in.ShardCount < 1 {
		v.add(strconv.Itoa(int(*in.ShardCount)), "shardCount", "have value greater than or equal to 1")
	}
	validateMaxRecordSize(in.MaxRecordSizeInKiB, &v)
	checkDistribution(in.RecordDistributionStrategy, "recordDistributionStrategy", &v)
	checkWarmThroughput(in.WarmThroughputMiBps, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	shards := onDemandShardCount
	if mode == modeProvisioned {
		if in.ShardCount == nil {
			return nil, errorf(codeInvalidArgument, "ShardCount is required for a stream in PROVISIONED mode.")
		}
		shards = int(*in.ShardCount)
	}
	strategy := distributionUserKey
	if in.RecordDistributionStrategy != nil {
		strategy = *in.RecordDistributionStrategy
	}
	if strategy == distributionAuto && mode != modeOnDemand {
		return nil, errAutoNeedsOnDemand(*in.StreamName)
	}
	if w := in.WarmThroughputMiBps; w != nil {
		if err := s.allowWarmThroughput(*in.StreamName, mode, int(*w), r.nowMs); err != nil {
			return nil, err
		}
	}
	return nil, s.addStream(*in.StreamName, mode, shards, r.nowMs, func(st *stream) {
		st.tags = in.Tags
		if in.MaxRecordSizeInKiB != nil {
			st.maxRecordSize = int(*in.MaxRecordSizeInKiB) << 10
		}
		st.strategy = strategy
		if w := in.WarmThroughputMiBps; w != nil {
			st.warm.set(int(*w), r.nowMs, s.transitionDelay.Milliseconds())
		}
		st.markBusyLocked(statusCreating, r.nowMs, s.transitionDelay)
	})
}

func validateMaxRecordSize(kib *int32, v *violations) {
	if kib != nil && (*kib < minMaxRecordSizeKiB || *kib > maxMaxRecordSizeKiB) {
		v.add(strconv.Itoa(int(*kib)), "maxRecordSizeInKiB", "have value between 1024 and 10240")
	}
}

func (s *Server) deleteStream(r *request) (any, error) {
	var in streamRef
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	st, err := s.stream(in)
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	status := st.statusLocked(r.nowMs)
	st.mu.RUnlock()
	if status == statusCreating {
		return nil, errorf(codeResourceInUse, "Stream %s under account %s not ACTIVE, instead in state %s", st.name, AccountID, status)
	}
	// Queues block deletion whatever EnforceConsumerDeletion says; the
	// registry's lock keeps a CreateQueue from slipping in between.
	s.queues.mu.Lock()
	if err := s.refuseIfQueuesLocked(st, r.nowMs, "delete the stream"); err != nil {
		s.queues.mu.Unlock()
		return nil, err
	}
	s.mu.Lock()
	if s.streams[st.name] == st {
		delete(s.streams, st.name)
	}
	s.mu.Unlock()
	s.queues.mu.Unlock()
	s.dropStreamConsumers(st, r.nowMs)
	s.logf("deleted stream %s", st.name)
	return nil, nil
}

type describeStreamInput struct {
	streamRef
	Limit                 *int32
	ExclusiveStartShardId *string //nolint:revive // the model's member name
}

type streamDescriptionJSON struct {
	StreamName              string
	StreamARN               string
	StreamStatus            string
	StreamModeDetails       streamModeDetailsJSON
	Shards                  []shardJSON
	HasMoreShards           bool
	RetentionPeriodHours    int
	StreamCreationTimestamp epochMillis
	EnhancedMonitoring      []enhancedMetricsJSON
	EncryptionType          string
}

type describeStreamOutput struct {
	StreamDescription streamDescriptionJSON
}

// pageSize returns the value of member, an optional page size (a Limit or
// MaxResults), or def when it is absent. The model bounds it to 1..10000; a
// value outside adds a violation to v.
func pageSize(n *int32, member string, def int, v *violations) int {
	if n == nil {
		return def
	}
	if *n < 1 || *n > 10000 {
		v.add(strconv.Itoa(int(*n)), member, "have value between 1 and 10000")
	}
	return int(*n)
}

func (s *Server) describeStream(r *request) (any, error) {
	var in describeStreamInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	limit := pageSize(in.Limit, "limit", 100, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	st, err := s.stream(in.streamRef)
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	var shards []shardJSON
	more := false
	for _, sh := range st.liveShardsLocked(r.nowMs) {
		if in.ExclusiveStartShardId != nil && sh.id <= *in.ExclusiveStartShardId {
			continue
		}
		if len(shards) == limit {
			more = true
			break
		}
		shards = append(shards, shardShape(sh))
	}
	return describeStreamOutput{StreamDescription: streamDescriptionJSON{
		StreamName:              st.name,
		StreamARN:               streamARN(r.region, st.name),
		StreamStatus:            st.statusLocked(r.nowMs),
		StreamModeDetails:       streamModeDetailsJSON{StreamMode: st.mode},
		Shards:                  nonNil(shards),
		HasMoreShards:           more,
		RetentionPeriodHours:    int(st.retention / time.Hour),
		StreamCreationTimestamp: epochMillis(st.createdMs),
		EnhancedMonitoring:      []enhancedMetricsJSON{{ShardLevelMetrics: []string{}}},
		EncryptionType:          "NONE",
	}}, nil
}

type streamDescriptionSummaryJSON struct {
	StreamName              string
	StreamARN               string
	StreamStatus            string
	StreamModeDetails       streamModeDetailsJSON
	RetentionPeriodHours    int
	StreamCreationTimestamp epochMillis
	EnhancedMonitoring      []enhancedMetricsJSON
	EncryptionType          string
	OpenShardCount          int
	ConsumerCount           int
	QueueCount              int
	MaxRecordSizeInKiB      int
	// RecordDistributionStrategy is present for ON_DEMAND streams only, and
	// WarmThroughput for those while the account's commitment is on.
	RecordDistributionStrategy string              `json:",omitempty"`
	WarmThroughput             *warmThroughputJSON `json:",omitempty"`
}

type describeStreamSummaryOutput struct {
	StreamDescriptionSummary streamDescriptionSummaryJSON
}

func (s *Server) describeStreamSummary(r *request) (any, error) {
	var in streamRef
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	st, err := s.stream(in)
	if err != nil {
		return nil, err
	}
	consumers := s.consumerCount(st, r.nowMs) // before st.mu: consumerMu comes first
	queues := s.queueCount(st, r.nowMs)
	st.mu.RLock()
	defer st.mu.RUnlock()
	strategy := ""
	var warm *warmThroughputJSON
	if st.mode == modeOnDemand {
		strategy = st.strategy
		if s.commitment.active(r.nowMs) {
			warm = st.warm.shape(r.nowMs)
		}
	}
	return describeStreamSummaryOutput{StreamDescriptionSummary: streamDescriptionSummaryJSON{
		StreamName:              st.name,
		StreamARN:               streamARN(r.region, st.name),
		StreamStatus:            st.statusLocked(r.nowMs),
		StreamModeDetails:       streamModeDetailsJSON{StreamMode: st.mode},
		RetentionPeriodHours:    int(st.retention / time.Hour),
		StreamCreationTimestamp: epochMillis(st.createdMs),
		EnhancedMonitoring:      []enhancedMetricsJSON{{ShardLevelMetrics: []string{}}},
		EncryptionType:          "NONE",
		OpenShardCount:          len(st.open),
		ConsumerCount:           consumers,
		QueueCount:              queues,
		MaxRecordSizeInKiB:      st.maxRecordSize >> 10,

		RecordDistributionStrategy: strategy,
		WarmThroughput:             warm,
	}}, nil
}

type listStreamsInput struct {
	Limit                    *int32
	ExclusiveStartStreamName *string
	NextToken                *string
}

// listStreamsToken is the payload of a ListStreams NextToken.
type listStreamsToken struct {
	After string `json:"a"`
}

type streamSummaryJSON struct {
	StreamName              string
	StreamARN               string
	StreamStatus            string
	StreamModeDetails       streamModeDetailsJSON
	StreamCreationTimestamp epochMillis
}

type listStreamsOutput struct {
	StreamNames     []string
	StreamSummaries []streamSummaryJSON
	HasMoreStreams  bool
	NextToken       *string `json:",omitempty"`
}

func (s *Server) listStreams(r *request) (any, error) {
	var in listStreamsInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	limit := pageSize(in.Limit, "limit", 100, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	after := ""
	if in.ExclusiveStartStreamName != nil {
		after = *in.ExclusiveStartStreamName
	}
	if in.NextToken != nil {
		if in.ExclusiveStartStreamName != nil {
			return nil, errorf(codeInvalidArgument, "NextToken and ExclusiveStartStreamName cannot be provided together.")
		}
		var tok listStreamsToken
		if !s.openJSON(*in.NextToken, &tok) {
			return nil, errorf(codeInvalidArgument, "Invalid NextToken.")
		}
		after = tok.After
	}

	type entry struct {
		name string
		st   *stream
	}
	s.mu.RLock()
	all := make([]entry, 0, len(s.streams))
	for name, st := range s.streams {
		if name > after {
			all = append(all, entry{name, st})
		}
	}
	s.mu.RUnlock()
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })

	out := listStreamsOutput{StreamNames: []string{}, StreamSummaries: []streamSummaryJSON{}}
	if len(all) > limit {
		all = all[:limit]
		out.HasMoreStreams = true
		tok := s.sealJSON(listStreamsToken{After: all[limit-1].name})
		out.NextToken = &tok
	}
	for _, e := range all {
		e.st.mu.RLock()
		status, mode := e.st.statusLocked(r.nowMs), e.st.mode
		e.st.mu.RUnlock()
		out.StreamNames = append(out.StreamNames, e.name)
		out.StreamSummaries = append(out.StreamSummaries, streamSummaryJSON{
			StreamName:              e.name,
			StreamARN:               streamARN(r.region, e.name),
			StreamStatus:            status,
			StreamModeDetails:       streamModeDetailsJSON{StreamMode: mode},
			StreamCreationTimestamp: epochMillis(e.st.createdMs),
		})
	}
	return out, nil
}

type retentionInput struct {
	streamRef
	RetentionPeriodHours *int32
}

func (s *Server) increaseRetention(r *request) (any, error) { return s.changeRetention(r, true) }

func (s *Server) decreaseRetention(r *request) (any, error) { return s.changeRetention(r, false) }

// changeRetention implements both retention operations; increase says which.
func (s *Server) changeRetention(r *request, increase bool) (any, error) {
	var in retentionInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if in.RetentionPeriodHours == nil {
		var v violations
		v.addNull("retentionPeriodHours")
		return nil, v.err()
	}
	hours := int(*in.RetentionPeriodHours)
	switch {
	case hours < minRetentionHours:
		return nil, errorf(codeInvalidArgument, "Minimum allowed retention period is %d hours. Requested retention period (%d hours) is too short.", minRetentionHours, hours)
	case hours > maxRetentionHours:
		return nil, errorf(codeInvalidArgument, "Maximum allowed retention period is %d hours. Requested retention period (%d hours) is too long.", maxRetentionHours, hours)
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
	current := int(st.retention / time.Hour)
	if increase && hours < current {
		return nil, errorf(codeInvalidArgument, "Requested retention period (%d hours) for stream %s can not be shorter than existing retention period (%d hours). Use DecreaseRetentionPeriod API.", hours, st.name, current)
	}
	if !increase && hours > current {
		return nil, errorf(codeInvalidArgument, "Requested retention period (%d hours) for stream %s can not be longer than existing retention period (%d hours). Use IncreaseRetentionPeriod API.", hours, st.name, current)
	}
	if hours == current {
		return nil, nil
	}
	// Records already past the old retention stay gone after an increase, so
	// trim them before the window widens.
	cutoff := st.cutoffMsLocked(r.nowMs)
	for _, sh := range st.shards {
		sh.mu.Lock()
		sh.trimLocked(cutoff)
		sh.mu.Unlock()
	}
	st.trimQueuesLocked(cutoff)
	st.retention = time.Duration(hours) * time.Hour
	st.markBusyLocked(statusUpdating, r.nowMs, s.transitionDelay)
	return nil, nil
}

type updateMaxRecordSizeInput struct {
	streamRef
	MaxRecordSizeInKiB *int32
}

func (s *Server) updateMaxRecordSize(r *request) (any, error) {
	var in updateMaxRecordSizeInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	if in.MaxRecordSizeInKiB == nil {
		v.addNull("maxRecordSizeInKiB")
	}
	validateMaxRecordSize(in.MaxRecordSizeInKiB, &v)
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
	st.maxRecordSize = int(*in.MaxRecordSizeInKiB) << 10
	return nil, nil
}

// nonNil makes an empty list encode as [] rather than null, as the service
// sends it.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
