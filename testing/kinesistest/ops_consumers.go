package kinesistest

// RegisterStreamConsumer, DescribeStreamConsumer, ListStreamConsumers and
// DeregisterStreamConsumer.

type consumerJSON struct {
	ConsumerName              string
	ConsumerARN               string
	ConsumerStatus            string
	ConsumerCreationTimestamp epochMillis
}

type consumerDescriptionJSON struct {
	consumerJSON
	StreamARN string
}

func (s *Server) consumerShape(r *request, c *consumer) consumerJSON {
	return consumerJSON{
		ConsumerName:              c.name,
		ConsumerARN:               c.arn(r.region),
		ConsumerStatus:            c.statusLocked(r.nowMs),
		ConsumerCreationTimestamp: epochMillis(c.createdMs),
	}
}

// checkStreamARN adds the violations of a StreamARN member that the operation
// requires.
func checkStreamARN(arn *string, v *violations) {
	switch {
	case arn == nil:
		v.addNull("streamARN")
	case len(*arn) < 1 || len(*arn) > 2048 || !streamARNPattern.MatchString(*arn):
		v.add(*arn, "streamARN", `satisfy regular expression pattern: arn:aws.*:kinesis:.*:\d{12}:stream/\S+`)
	}
}

type registerStreamConsumerInput struct {
	StreamARN    *string
	ConsumerName *string
	Tags         map[string]string
}

type registerStreamConsumerOutput struct {
	Consumer consumerJSON
}

func (s *Server) registerStreamConsumer(r *request) (any, error) {
	var in registerStreamConsumerInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkStreamARN(in.StreamARN, &v)
	if in.ConsumerName == nil {
		v.addNull("consumerName")
	} else {
		validateConsumerName(*in.ConsumerName, &v)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	st, err := s.stream(streamRef{StreamARN: in.StreamARN})
	if err != nil {
		return nil, err
	}
	st.mu.RLock()
	status := st.statusLocked(r.nowMs)
	st.mu.RUnlock()
	if status == statusCreating {
		return nil, errorf(codeResourceInUse, "Stream %s under account %s not ACTIVE, instead in state %s", st.name, AccountID, status)
	}
	c, err := s.addConsumer(st, *in.ConsumerName, r.nowMs, false)
	if err != nil {
		return nil, err
	}
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	return registerStreamConsumerOutput{Consumer: s.consumerShape(r, c)}, nil
}

// consumerRefInput addresses a consumer by ConsumerARN, or by StreamARN and
// ConsumerName.
type consumerRefInput struct {
	StreamARN    *string
	ConsumerName *string
	ConsumerARN  *string
}

// findConsumerLocked resolves a consumerRefInput. Caller holds consumerMu.
func (s *Server) findConsumerLocked(in consumerRefInput, nowMs int64) (*consumer, error) {
	var v violations
	if in.StreamARN != nil {
		checkStreamARN(in.StreamARN, &v)
	}
	if in.ConsumerName != nil {
		validateConsumerName(*in.ConsumerName, &v)
	}
	if a := in.ConsumerARN; a != nil && (len(*a) < 1 || len(*a) > 2048 || !consumerARNPattern.MatchString(*a)) {
		v.add(*a, "consumerARN", `satisfy regular expression pattern: ^(arn):aws.*:kinesis:.*:\d{12}:.*stream\/[a-zA-Z0-9_.-]+\/consumer\/[a-zA-Z0-9_.-]+:[0-9]+`)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	if in.ConsumerARN != nil {
		c, err := s.consumerByARNLocked(*in.ConsumerARN, nowMs)
		if err != nil {
			return nil, err
		}
		if in.ConsumerName != nil && *in.ConsumerName != c.name {
			return nil, errorf(codeInvalidArgument, "ConsumerARN %s and ConsumerName %s do not identify the same consumer.", *in.ConsumerARN, *in.ConsumerName)
		}
		if in.StreamARN != nil {
			if name, err := streamNameOf(nil, in.StreamARN); err != nil || name != c.stream.name {
				return nil, errorf(codeInvalidArgument, "ConsumerARN %s and StreamARN %s do not identify the same stream.", *in.ConsumerARN, *in.StreamARN)
			}
		}
		return c, nil
	}
	if in.StreamARN == nil || in.ConsumerName == nil {
		return nil, errorf(codeInvalidArgument, "Either ConsumerARN or both StreamARN and ConsumerName must be provided.")
	}
	st, err := s.stream(streamRef{StreamARN: in.StreamARN})
	if err != nil {
		return nil, err
	}
	c := s.consumerLocked(st, *in.ConsumerName, nowMs)
	if c == nil {
		return nil, errConsumerNotFound(*in.StreamARN + "/consumer/" + *in.ConsumerName)
	}
	return c, nil
}

type describeStreamConsumerOutput struct {
	ConsumerDescription consumerDescriptionJSON
}

func (s *Server) describeStreamConsumer(r *request) (any, error) {
	var in consumerRefInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	c, err := s.findConsumerLocked(in, r.nowMs)
	if err != nil {
		return nil, err
	}
	return describeStreamConsumerOutput{ConsumerDescription: consumerDescriptionJSON{
		consumerJSON: s.consumerShape(r, c),
		StreamARN:    streamARN(r.region, c.stream.name),
	}}, nil
}

func (s *Server) deregisterStreamConsumer(r *request) (any, error) {
	var in consumerRefInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	c, err := s.findConsumerLocked(in, r.nowMs)
	if err != nil {
		return nil, err
	}
	if c.deleting {
		return nil, errorf(codeResourceInUse, "Consumer %s under stream %s for account %s is already in state DELETING.", c.name, c.stream.name, AccountID)
	}
	s.removeConsumerLocked(c, r.nowMs, "Consumer "+c.arn(r.region)+" was deregistered.")
	return nil, nil
}

type listStreamConsumersInput struct {
	StreamARN               *string
	MaxResults              *int32
	NextToken               *string
	StreamCreationTimestamp *epochMillis
}

// listConsumersToken is the payload of a ListStreamConsumers NextToken: the
// stream, and the creation time and name of the last consumer listed.
type listConsumersToken struct {
	Stream    string `json:"s"`
	StreamUID uint64 `json:"u"`
	AfterMs   int64  `json:"m"`
	AfterName string `json:"n"`
	IssuedMs  int64  `json:"i"`
}

type listStreamConsumersOutput struct {
	Consumers []consumerJSON
	NextToken *string `json:",omitempty"`
}

func (s *Server) listStreamConsumers(r *request) (any, error) {
	var in listStreamConsumersInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	checkStreamARN(in.StreamARN, &v)
	limit := pageSize(in.MaxResults, "maxResults", 100, &v)
	if t := in.NextToken; t != nil && (len(*t) < 1 || len(*t) > 1048576) {
		v.add(*t, "nextToken", "have length between 1 and 1048576")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	st, err := s.stream(streamRef{StreamARN: in.StreamARN})
	if err != nil {
		return nil, err
	}
	if in.StreamCreationTimestamp != nil && int64(*in.StreamCreationTimestamp) != st.createdMs {
		return nil, errorf(codeResourceNotFound, "Stream %s with creation timestamp %d under account %s not found.",
			st.name, int64(*in.StreamCreationTimestamp), AccountID)
	}
	var after *listConsumersToken
	if in.NextToken != nil {
		var tok listConsumersToken
		if !s.openJSON(*in.NextToken, &tok) {
			return nil, errorf(codeInvalidArgument, "Invalid NextToken.")
		}
		if r.nowMs-tok.IssuedMs > nextTokenTTLMs {
			return nil, errorf(codeExpiredNextToken, "The NextToken has expired; tokens are valid for 300 seconds. Start the listing again.")
		}
		if tok.Stream != st.name || tok.StreamUID != st.uid {
			return nil, errorf(codeInvalidArgument, "NextToken was issued for another stream than %s.", st.name)
		}
		after = &tok
	}

	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	out := listStreamConsumersOutput{Consumers: []consumerJSON{}}
	for _, c := range s.liveConsumersLocked(st, r.nowMs) {
		if after != nil && (c.createdMs < after.AfterMs || c.createdMs == after.AfterMs && c.name <= after.AfterName) {
			continue
		}
		if len(out.Consumers) == limit {
			last := out.Consumers[limit-1]
			tok := s.sealJSON(listConsumersToken{
				Stream: st.name, StreamUID: st.uid,
				AfterMs: int64(last.ConsumerCreationTimestamp), AfterName: last.ConsumerName,
				IssuedMs: r.nowMs,
			})
			out.NextToken = &tok
			break
		}
		out.Consumers = append(out.Consumers, s.consumerShape(r, c))
	}
	return out, nil
}
