package kinesistest

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// CreateQueue, UpdateQueue, DeleteQueue, DescribeQueue and ListQueues.

type queueStartJSON struct {
	Type      *string
	Timestamp *epochMillis `json:",omitempty"`
}

type queueStreamConfigJSON struct {
	StreamARN        *string
	StartingPosition *queueStartJSON `json:",omitempty"`
}

type deadLetterJSON struct {
	TargetType      *string
	MaxReceiveCount *int32 `json:",omitempty"`
}

type queueAttributesJSON struct {
	VisibilityTimeoutSeconds *int32          `json:",omitempty"`
	DeadLetterConfiguration  *deadLetterJSON `json:",omitempty"`
}

type queueDescriptionJSON struct {
	QueueARN                string
	QueueCreationTimestamp  epochMillis
	QueueName               string
	QueueStatus             string
	StreamConfigurationList []queueStreamConfigJSON
	QueueAttributes         *queueAttributesJSON
}

type queueDescriptionOutput struct {
	QueueDescription queueDescriptionJSON
}

// describeQueueLocked is q as DescribeQueue reports it at nowMs. Caller holds
// the registry's mu.
func (s *Server) describeQueueLocked(q *queue, region string, nowMs int64) queueDescriptionJSON {
	status := q.statusLocked(nowMs)
	start := &queueStartJSON{Type: &q.startType}
	switch {
	case status != queueCreating:
		ms := epochMillis(q.startMs)
		start.Timestamp = &ms
	case q.startType == queueStartAtTimestamp:
		ms := epochMillis(q.startGivenMs)
		start.Timestamp = &ms
	}
	arn := streamARN(region, q.stream.name)
	q.mu.Lock()
	attrs := q.describedAttrsLocked()
	q.mu.Unlock()
	return queueDescriptionJSON{
		QueueARN:                q.arn(region),
		QueueCreationTimestamp:  epochMillis(q.created),
		QueueName:               q.name,
		QueueStatus:             status,
		StreamConfigurationList: []queueStreamConfigJSON{{StreamARN: &arn, StartingPosition: start}},
		QueueAttributes:         attrs.shape(),
	}
}

func (a queueAttrs) shape() *queueAttributesJSON {
	vis := a.visibilitySec
	dl := &deadLetterJSON{TargetType: new(string)}
	*dl.TargetType = deadLetterNone
	if a.deadLetter {
		*dl.TargetType = deadLetterBuiltIn
		n := a.maxReceives
		dl.MaxReceiveCount = &n
	}
	return &queueAttributesJSON{VisibilityTimeoutSeconds: &vis, DeadLetterConfiguration: dl}
}

// checkQueueName adds the model's violations of a queue name.
func checkQueueName(name *string, v *violations) {
	switch {
	case name == nil:
		v.addNull("queueName")
	case len(*name) < 1 || len(*name) > 128:
		v.add(*name, "queueName", "have length between 1 and 128")
	case !streamNamePattern.MatchString(*name):
		v.add(*name, "queueName", "satisfy regular expression pattern: [a-zA-Z0-9_.-]+")
	}
}

// checkQueueARN adds the model's violations of a required QueueARN member.
func checkQueueARN(arn *string, v *violations) {
	switch {
	case arn == nil:
		v.addNull("queueARN")
	case len(*arn) < 1 || len(*arn) > 2048 || !queueARNPattern.MatchString(*arn):
		v.add(*arn, "queueARN", `satisfy regular expression pattern: arn:aws.*:kinesis:.*:\d{12}:queue/\S+`)
	}
}

// checkVisibility adds a violation when a visibility timeout is outside 0..43200.
func checkVisibility(sec *int32, member string, v *violations) {
	if sec != nil && (*sec < 0 || *sec > maxQueueVisibilitySec) {
		v.add(strconv.Itoa(int(*sec)), member, "have value between 0 and 43200")
	}
}

// checkQueueAttributes adds the model's violations of QueueAttributes and
// returns the rules between its members the model cannot state, as a
// ValidationException, or nil.
func checkQueueAttributes(a *queueAttributesJSON, v *violations) error {
	if a == nil {
		return nil
	}
	checkVisibility(a.VisibilityTimeoutSeconds, "queueAttributes.visibilityTimeoutSeconds", v)
	dl := a.DeadLetterConfiguration
	if dl == nil {
		return nil
	}
	const member = "queueAttributes.deadLetterConfiguration."
	switch {
	case dl.TargetType == nil:
		v.addNull(member + "targetType")
	case *dl.TargetType != deadLetterBuiltIn && *dl.TargetType != deadLetterNone:
		v.add(*dl.TargetType, member+"targetType", "satisfy enum value set: [BUILT_IN, NONE]")
	}
	if n := dl.MaxReceiveCount; n != nil && (*n < 1 || *n > maxMaxReceiveCount) {
		v.add(strconv.Itoa(int(*n)), member+"maxReceiveCount", "have value between 1 and 1000")
	}
	if dl.TargetType == nil {
		return nil
	}
	switch {
	case *dl.TargetType == deadLetterBuiltIn && dl.MaxReceiveCount == nil:
		return errorf(codeValidation, "MaxReceiveCount is required when the DeadLetterConfiguration's TargetType is BUILT_IN.")
	case *dl.TargetType == deadLetterNone && dl.MaxReceiveCount != nil:
		return errorf(codeValidation, "MaxReceiveCount can only be specified when the DeadLetterConfiguration's TargetType is BUILT_IN.")
	}
	return nil
}

// merged returns a with the attributes in set; omitted ones stay unchanged.
func (a queueAttrs) merged(in *queueAttributesJSON) queueAttrs {
	if in == nil {
		return a
	}
	if in.VisibilityTimeoutSeconds != nil {
		a.visibilitySec = *in.VisibilityTimeoutSeconds
	}
	if dl := in.DeadLetterConfiguration; dl != nil {
		a.deadLetter = *dl.TargetType == deadLetterBuiltIn
		a.maxReceives = 0
		if a.deadLetter {
			a.maxReceives = *dl.MaxReceiveCount
		}
	}
	return a
}

type createQueueInput struct {
	QueueName               *string
	StreamConfigurationList []queueStreamConfigJSON
	QueueAttributes         *queueAttributesJSON
	Tags                    map[string]string
}

func (s *Server) createQueue(r *request) (any, error) {
	var in createQueueInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkQueueName(in.QueueName, &v)
	switch n := len(in.StreamConfigurationList); {
	case in.StreamConfigurationList == nil:
		v.addNull("streamConfigurationList")
	case n != 1:
		v.add("["+strconv.Itoa(n)+" items]", "streamConfigurationList", "have length between 1 and 1")
	}
	var start queueStartJSON
	for i, c := range in.StreamConfigurationList {
		member := "streamConfigurationList." + strconv.Itoa(i+1) + ".member."
		switch {
		case c.StreamARN == nil:
			v.addNull(member + "streamARN")
		case len(*c.StreamARN) < 1 || len(*c.StreamARN) > 2048 || !streamARNPattern.MatchString(*c.StreamARN):
			v.add(*c.StreamARN, member+"streamARN", `satisfy regular expression pattern: arn:aws.*:kinesis:.*:\d{12}:stream/\S+`)
		}
		if p := c.StartingPosition; p != nil {
			switch {
			case p.Type == nil:
				v.addNull(member + "startingPosition.type")
			case *p.Type != queueStartLatest && *p.Type != queueStartTrimHorizon && *p.Type != queueStartAtTimestamp:
				v.add(*p.Type, member+"startingPosition.type", "satisfy enum value set: [TRIM_HORIZON, LATEST, AT_TIMESTAMP]")
			}
			start = *p
		}
	}
	attrErr := checkQueueAttributes(in.QueueAttributes, &v)
	if len(in.Tags) > maxQueueTags {
		v.add("{"+strconv.Itoa(len(in.Tags))+" tags}", "tags", "have length between 1 and 50")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	if attrErr != nil {
		return nil, attrErr
	}
	startType := queueStartLatest
	if start.Type != nil {
		startType = *start.Type
	}
	switch {
	case startType == queueStartAtTimestamp && start.Timestamp == nil:
		return nil, errorf(codeValidation, "StartingPosition Timestamp is required when its Type is AT_TIMESTAMP.")
	case startType != queueStartAtTimestamp && start.Timestamp != nil:
		return nil, errorf(codeValidation, "StartingPosition Timestamp can only be specified when its Type is AT_TIMESTAMP, not %s.", startType)
	}
	if err := queueThrottled(r); err != nil {
		return nil, err
	}
	streamARNIn := in.StreamConfigurationList[0].StreamARN
	st, err := s.stream(streamRef{StreamARN: streamARNIn})
	if err != nil {
		return nil, err
	}
	q, err := s.addQueue(*in.QueueName, st, r.nowMs, defaultQueueAttrs().merged(in.QueueAttributes), startType, start.Timestamp, in.Tags, false)
	if err != nil {
		return nil, err
	}
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	return queueDescriptionOutput{QueueDescription: s.describeQueueLocked(q, r.region, r.nowMs)}, nil
}

// addQueue creates queue name on st at nowMs; active skips CREATING.
func (s *Server) addQueue(name string, st *stream, nowMs int64, attrs queueAttrs, startType string, startAt *epochMillis, tags map[string]string, active bool) (*queue, error) {
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	reg := &s.queues
	if !s.streamLive(st) {
		return nil, errStreamNotFound(st.name)
	}
	st.mu.RLock()
	status, mode := st.statusLocked(nowMs), st.mode
	st.mu.RUnlock()
	switch {
	case status == statusCreating:
		return nil, errorf(codeResourceInUse, "Stream %s under account %s not ACTIVE, instead in state %s", st.name, AccountID, status)
	case mode != modeOnDemand:
		return nil, errorf(codeValidation, "Queues are not supported for stream %s under account %s because it is in %s capacity mode; queues need ON_DEMAND.", st.name, AccountID, mode)
	}
	reg.forgetLocked(nowMs)
	if reg.byName[name] != nil {
		return nil, errorf(codeResourceInUse, "Queue %s under account %s already exists.", name, AccountID)
	}
	if n := len(s.liveConsumersLocked(st, nowMs)) + reg.countOnLocked(st, nowMs); n >= s.consumerLimit(st, nowMs) {
		return nil, errorf(codeLimitExceeded, "Stream %s under account %s already has %d registered consumers and queues, the maximum.", st.name, AccountID, n)
	}
	if !active && reg.delay > 0 && reg.transitioningLocked(nowMs) >= maxQueuesTransitioning {
		return nil, errorf(codeLimitExceeded, "Account %s already has %d queues in CREATING or DELETING status, the maximum.", AccountID, maxQueuesTransitioning)
	}
	reg.next++
	q := newQueue(reg.next, name, st, nowMs, attrs, reg.seed, reg.inFlightLimit)
	q.startType, q.tags = startType, tags
	if startAt != nil {
		q.startGivenMs = int64(*startAt)
	}
	q.activeMs = nowMs
	if !active {
		q.activeMs += reg.delay.Milliseconds()
	}
	st.attachQueue(q, nowMs)
	reg.byID[q.id] = q
	reg.byName[name] = q
	s.logf("created queue %s on stream %s (%s)", name, st.name, q.arn(Region))
	return q, nil
}

type queueRefInput struct {
	QueueARN *string
}

// queueRef resolves a request's QueueARN member.
func (s *Server) queueRef(arn *string, nowMs int64) (*queue, string, error) {
	var v violations
	checkQueueARN(arn, &v)
	if err := v.err(); err != nil {
		return nil, "", err
	}
	return s.queueByARN(*arn, nowMs)
}

func (s *Server) describeQueue(r *request) (any, error) {
	var in queueRefInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	q, _, err := s.queueRef(in.QueueARN, r.nowMs)
	if err != nil {
		return nil, err
	}
	if err := queueThrottled(r); err != nil {
		return nil, err
	}
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	return queueDescriptionOutput{QueueDescription: s.describeQueueLocked(q, r.region, r.nowMs)}, nil
}

type updateQueueInput struct {
	QueueARN        *string
	QueueAttributes *queueAttributesJSON
}

func (s *Server) updateQueue(r *request) (any, error) {
	var in updateQueueInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkQueueARN(in.QueueARN, &v)
	if in.QueueAttributes == nil {
		v.addNull("queueAttributes")
	}
	attrErr := checkQueueAttributes(in.QueueAttributes, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	if attrErr != nil {
		return nil, attrErr
	}
	q, _, err := s.queueByARN(*in.QueueARN, r.nowMs)
	if err != nil {
		return nil, err
	}
	if err := queueThrottled(r); err != nil {
		return nil, err
	}
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	if status := q.statusLocked(r.nowMs); status != queueActive {
		return nil, errQueueNotActive(q, status)
	}
	delay := s.queues.delay.Milliseconds()
	q.mu.Lock()
	next := q.attrsLocked(r.nowMs).merged(in.QueueAttributes)
	if delay > 0 {
		q.pending, q.pendingMs = &next, r.nowMs+delay
		q.updateUntilMs = r.nowMs + delay
	} else {
		q.attrs = next
	}
	q.wakeLocked(false)
	q.mu.Unlock()
	return queueDescriptionOutput{QueueDescription: s.describeQueueLocked(q, r.region, r.nowMs)}, nil
}

func (s *Server) deleteQueue(r *request) (any, error) {
	var in queueRefInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	q, _, err := s.queueRef(in.QueueARN, r.nowMs)
	if err != nil {
		return nil, err
	}
	if err := queueThrottled(r); err != nil {
		return nil, err
	}
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	return nil, s.removeQueueLocked(q, r.nowMs, false)
}

// removeQueueLocked starts deleting q: DELETING for the queue transition
// delay (none when now), then gone. Caller holds the registry's mu.
func (s *Server) removeQueueLocked(q *queue, nowMs int64, now bool) error {
	if status := q.statusLocked(nowMs); status != queueActive {
		return errQueueNotActive(q, status)
	}
	if !now && s.queues.delay > 0 && s.queues.transitioningLocked(nowMs) >= maxQueuesTransitioning {
		return errorf(codeLimitExceeded, "Account %s already has %d queues in CREATING or DELETING status, the maximum.", AccountID, maxQueuesTransitioning)
	}
	q.deleting, q.deletedMs = true, nowMs
	if now {
		q.deletedMs -= s.queues.delay.Milliseconds()
	}
	q.stream.detachQueue(q)
	s.queues.forgetLocked(nowMs)
	s.logf("deleted queue %s", q.name)
	return nil
}

type queueStreamFilterJSON struct {
	StreamARN               *string
	StreamCreationTimestamp *epochMillis
}

type listQueuesInput struct {
	MaxResults   *int32
	NextToken    *string
	StreamFilter []queueStreamFilterJSON
}

type queueStreamIdentifierJSON struct {
	StreamARN               string
	StreamCreationTimestamp epochMillis
}

type queueSummaryJSON struct {
	QueueARN               string
	QueueCreationTimestamp epochMillis
	QueueName              string
	QueueStatus            string
	Streams                []queueStreamIdentifierJSON
}

type listQueuesOutput struct {
	QueueSummaries []queueSummaryJSON
	NextToken      *string `json:",omitempty"`
}

// listQueuesToken is the payload of a ListQueues NextToken: the last queue
// listed, a digest of the filter it was issued for, and when.
type listQueuesToken struct {
	After    uint64 `json:"a"`
	Filter   string `json:"f"`
	IssuedMs int64  `json:"i"`
}

// queueFilter is a decoded StreamFilter: stream names, each with the
// creation time it must have (0: any).
type queueFilter map[string][]int64

func (f queueFilter) matches(q *queue) bool {
	if f == nil {
		return true
	}
	times, ok := f[q.stream.name]
	if !ok {
		return false
	}
	for _, ms := range times {
		if ms == 0 || ms == q.stream.createdMs {
			return true
		}
	}
	return false
}

func (s *Server) listQueues(r *request) (any, error) {
	var in listQueuesInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	limit := pageSize(in.MaxResults, "maxResults", 100, &v)
	if t := in.NextToken; t != nil && (len(*t) < 1 || len(*t) > 1048576) {
		v.add(*t, "nextToken", "have length between 1 and 1048576")
	}
	var filter queueFilter
	digest := sha256.New()
	if in.StreamFilter != nil {
		if n := len(in.StreamFilter); n < 1 || n > 10000 {
			v.add("["+strconv.Itoa(n)+" items]", "streamFilter", "have length between 1 and 10000")
		}
		filter = make(queueFilter)
		for i, f := range in.StreamFilter {
			member := "streamFilter." + strconv.Itoa(i+1) + ".member.streamARN"
			name, err := streamNameOf(nil, f.StreamARN)
			switch {
			case f.StreamARN == nil:
				v.addNull(member)
				continue
			case err != nil:
				v.add(*f.StreamARN, member, `satisfy regular expression pattern: arn:aws.*:kinesis:.*:\d{12}:stream/\S+`)
				continue
			}
			var ms int64
			if f.StreamCreationTimestamp != nil {
				ms = int64(*f.StreamCreationTimestamp)
			}
			filter[name] = append(filter[name], ms)
			digest.Write([]byte(name + "@" + strconv.FormatInt(ms, 10) + ";"))
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	if err := queueThrottled(r); err != nil {
		return nil, err
	}
	filterDigest := hex.EncodeToString(digest.Sum(nil)[:8])
	var after uint64
	if in.NextToken != nil {
		var tok listQueuesToken
		if !s.openJSON(*in.NextToken, &tok) {
			return nil, errorf(codeInvalidArgument, "Invalid NextToken.")
		}
		if r.nowMs-tok.IssuedMs > nextTokenTTLMs {
			return nil, errorf(codeExpiredNextToken, "The NextToken has expired; tokens are valid for 300 seconds. Start the listing again.")
		}
		if tok.Filter != filterDigest {
			return nil, errorf(codeInvalidArgument, "NextToken was issued for another StreamFilter.")
		}
		after = tok.After
	}

	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	out := listQueuesOutput{QueueSummaries: []queueSummaryJSON{}}
	for _, q := range s.queues.liveLocked(r.nowMs) {
		if q.serial <= after || !filter.matches(q) {
			continue
		}
		if len(out.QueueSummaries) == limit {
			tok := s.sealJSON(listQueuesToken{After: after, Filter: filterDigest, IssuedMs: r.nowMs})
			out.NextToken = &tok
			break
		}
		after = q.serial
		out.QueueSummaries = append(out.QueueSummaries, queueSummaryJSON{
			QueueARN:               q.arn(r.region),
			QueueCreationTimestamp: epochMillis(q.created),
			QueueName:              q.name,
			QueueStatus:            q.statusLocked(r.nowMs),
			Streams: []queueStreamIdentifierJSON{{
				StreamARN:               streamARN(r.region, q.stream.name),
				StreamCreationTimestamp: epochMillis(q.stream.createdMs),
			}},
		})
	}
	return out, nil
}
