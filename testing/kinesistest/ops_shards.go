package kinesistest

// ListShards.

const (
	listShardsDefaultMax = 1000
	nextTokenTTLMs       = 300_000 // ListShards tokens expire after 300 s
)

// Shard filter types as the service spells them.
const (
	filterAfterShardID    = "AFTER_SHARD_ID"
	filterAtTrimHorizon   = "AT_TRIM_HORIZON"
	filterFromTrimHorizon = "FROM_TRIM_HORIZON"
	filterAtLatest        = "AT_LATEST"
	filterAtTimestamp     = "AT_TIMESTAMP"
	filterFromTimestamp   = "FROM_TIMESTAMP"
)

type shardFilterJSON struct {
	Type      string
	ShardId   *string //nolint:revive // the model's member name
	Timestamp *epochMillis
}

type listShardsInput struct {
	streamRef
	NextToken               *string
	ExclusiveStartShardId   *string //nolint:revive // the model's member name
	MaxResults              *int32
	StreamCreationTimestamp *epochMillis
	ShardFilter             *shardFilterJSON
}

// listShardsToken is the payload of a ListShards NextToken: the stream, the
// listing's filter and where the next page starts.
type listShardsToken struct {
	UID         uint64 `json:"u"`
	Stream      string `json:"s"`
	After       string `json:"a"`
	Filter      string `json:"f,omitempty"`
	FilterShard string `json:"fs,omitempty"`
	FilterMs    int64  `json:"ft,omitempty"`
	IssuedMs    int64  `json:"i"`
}

type listShardsOutput struct {
	Shards    []shardJSON
	NextToken *string `json:",omitempty"`
}

func (s *Server) listShards(r *request) (any, error) {
	var in listShardsInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	maxResults := min(pageSize(in.MaxResults, "maxResults", listShardsDefaultMax, &v), listShardsDefaultMax)
	if err := v.err(); err != nil {
		return nil, err
	}

	var (
		st   *stream
		page listShardsToken
		err  error
	)
	if in.NextToken != nil {
		st, page, err = s.continueListShards(r, &in)
	} else {
		st, page, err = s.startListShards(r, &in)
	}
	if err != nil {
		return nil, err
	}
	if r.limits && !s.control.allow("ListShards/"+st.name, controlPlaneTPS["ListShards"], r.nowMs) {
		return nil, errorf(codeLimitExceeded, "Rate exceeded for ListShards on stream %s under account %s.", st.name, AccountID)
	}

	st.mu.RLock()
	defer st.mu.RUnlock()
	keep := shardFilterFunc(st, page, r.nowMs)
	out := listShardsOutput{Shards: []shardJSON{}}
	for _, sh := range st.liveShardsLocked(r.nowMs) {
		// Shard ids have a fixed width, so string order is number order.
		if sh.id <= page.After || !keep(sh) {
			continue
		}
		if len(out.Shards) == maxResults {
			page.After = out.Shards[len(out.Shards)-1].ShardId
			page.IssuedMs = r.nowMs
			tok := s.sealJSON(page)
			out.NextToken = &tok
			break
		}
		out.Shards = append(out.Shards, shardShape(sh))
	}
	return out, nil
}

// startListShards reads the first page's parameters.
func (s *Server) startListShards(r *request, in *listShardsInput) (*stream, listShardsToken, error) {
	var page listShardsToken
	if in.StreamName == nil && in.StreamARN == nil {
		return nil, page, errorf(codeInvalidArgument, "Either NextToken or StreamName/StreamARN should be provided.")
	}
	if f := in.ShardFilter; f != nil {
		switch f.Type {
		case filterAtTrimHorizon, filterFromTrimHorizon, filterAtLatest:
		case filterAfterShardID:
			if f.ShardId == nil {
				return nil, page, errorf(codeInvalidArgument, "ShardId must be provided for ShardFilter type AFTER_SHARD_ID.")
			}
			page.FilterShard = *f.ShardId
		case filterAtTimestamp, filterFromTimestamp:
			if f.Timestamp == nil {
				return nil, page, errorf(codeInvalidArgument, "Timestamp must be provided for ShardFilter type %s.", f.Type)
			}
			page.FilterMs = int64(*f.Timestamp)
		default:
			var v violations
			v.add(f.Type, "shardFilter.type", "satisfy enum value set: [AFTER_SHARD_ID, AT_TRIM_HORIZON, FROM_TRIM_HORIZON, AT_LATEST, AT_TIMESTAMP, FROM_TIMESTAMP]")
			return nil, page, v.err()
		}
		page.Filter = f.Type
	}
	st, err := s.stream(in.streamRef)
	if err != nil {
		return nil, page, err
	}
	if in.StreamCreationTimestamp != nil && int64(*in.StreamCreationTimestamp) != st.createdMs {
		return nil, page, errorf(codeResourceNotFound, "Stream %s under account %s with creation timestamp %d ms not found.",
			st.name, AccountID, int64(*in.StreamCreationTimestamp))
	}
	page.UID, page.Stream = st.uid, st.name
	if in.ExclusiveStartShardId != nil {
		page.After = *in.ExclusiveStartShardId
	}
	if page.Filter == filterAfterShardID && page.FilterShard > page.After {
		page.After = page.FilterShard
	}
	return st, page, nil
}

// continueListShards reads a later page's parameters from its NextToken. A
// ShardFilter sent with a token is ignored: the token carries the listing's.
func (s *Server) continueListShards(r *request, in *listShardsInput) (*stream, listShardsToken, error) {
	var page listShardsToken
	switch {
	case in.StreamName != nil:
		return nil, page, errorf(codeInvalidArgument, "NextToken and StreamName cannot be provided together.")
	case in.StreamCreationTimestamp != nil:
		return nil, page, errorf(codeInvalidArgument, "NextToken and StreamCreationTimestamp cannot be provided together.")
	case in.ExclusiveStartShardId != nil:
		return nil, page, errorf(codeInvalidArgument, "NextToken and ExclusiveStartShardId cannot be provided together.")
	}
	if !s.openJSON(*in.NextToken, &page) {
		return nil, page, errorf(codeInvalidArgument, "Invalid NextToken.")
	}
	if r.nowMs-page.IssuedMs > nextTokenTTLMs {
		return nil, page, errorf(codeExpiredNextToken, "The NextToken has expired; tokens are valid for 300 seconds. Start the listing again.")
	}
	if in.StreamARN != nil {
		name, err := streamNameOf(nil, in.StreamARN)
		if err != nil {
			return nil, page, err
		}
		if name != page.Stream {
			return nil, page, errorf(codeInvalidArgument, "NextToken was issued for stream %s, not %s.", page.Stream, name)
		}
	}
	s.mu.RLock()
	st := s.streams[page.Stream]
	s.mu.RUnlock()
	if st == nil || st.uid != page.UID {
		return nil, page, errStreamNotFound(page.Stream)
	}
	return st, page, nil
}

// shardFilterFunc returns the predicate for the listing's ShardFilter. Caller
// holds the stream's read lock; expired shards are excluded before this.
func shardFilterFunc(st *stream, page listShardsToken, nowMs int64) func(*shard) bool {
	switch page.Filter {
	case filterAtTrimHorizon:
		// The shards open at the trim horizon are the roots of what retention
		// keeps: those without a parent that is still retained. Deciding by
		// lineage rather than by time keeps parents and children apart even
		// when a reshard happened at the instant the stream was created.
		return func(sh *shard) bool {
			for _, p := range sh.parentIDs() {
				if st.shardLocked(p, nowMs) != nil {
					return false
				}
			}
			return true
		}
	case filterAtLatest:
		return func(sh *shard) bool { return !sh.closed }
	case filterAtTimestamp:
		// A time before the trim horizon (or before the stream existed) means
		// the trim horizon.
		t := max(page.FilterMs, st.createdMs, st.cutoffMsLocked(nowMs)+1)
		return func(sh *shard) bool { return sh.createdMs <= t && (!sh.closed || sh.closedMs >= t) }
	case filterFromTimestamp:
		t := page.FilterMs
		return func(sh *shard) bool { return !sh.closed || sh.closedMs >= t }
	}
	// FROM_TRIM_HORIZON, the default, and AFTER_SHARD_ID (applied through
	// page.After) keep everything retention keeps.
	return func(*shard) bool { return true }
}
