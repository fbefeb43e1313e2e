// Package route predicts which shard of a stream a record goes to: it keeps the map of the
// stream's open shards (ListShards with ShardFilter AT_LATEST), looks up the shard whose hash
// key range holds a 128-bit hash key, and refreshes the map periodically and when a write
// shows that the stream was resharded.
package route

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// Shard is an open shard and its inclusive hash key range.
type Shard struct {
	// ID is the shard id, e.g. "shardId-000000000003".
	ID string
	// Start and End bound the shard's hash key range, both inclusive.
	Start, End kpl.Uint128
}

// Contains reports whether the shard's range holds the hash key h.
func (s Shard) Contains(h kpl.Uint128) bool {
	return s.Start.Cmp(h) <= 0 && h.Cmp(s.End) <= 0
}

// Map is a snapshot of a stream's open shards, sorted by ending hash key. It is immutable.
type Map struct {
	shards  []Shard
	byID    map[string]int
	fetched time.Time
	gen     uint64
}

// NewMap builds a map from shards (in any order), fetched at the given time. It fails when
// two shards overlap, which happens only in a listing taken during a resharding.
func NewMap(shards []Shard, fetched time.Time) (*Map, error) {
	s := slices.Clone(shards)
	slices.SortFunc(s, func(a, b Shard) int { return a.End.Cmp(b.End) })
	m := &Map{shards: s, byID: make(map[string]int, len(s)), fetched: fetched}
	for i, sh := range s {
		if sh.Start.Cmp(sh.End) > 0 {
			return nil, fmt.Errorf("shard %s has an empty hash key range [%s, %s]", sh.ID, sh.Start, sh.End)
		}
		if i > 0 && sh.Start.Cmp(s[i-1].End) <= 0 {
			return nil, fmt.Errorf("shards %s and %s have overlapping hash key ranges", s[i-1].ID, sh.ID)
		}
		m.byID[sh.ID] = i
	}
	return m, nil
}

// Lookup returns the shard whose range holds h. It reports false when no open shard does,
// which only a map taken mid-resharding can show.
func (m *Map) Lookup(h kpl.Uint128) (Shard, bool) {
	// The first shard whose range ends at or after h (the KPL's lower_bound).
	i, _ := slices.BinarySearchFunc(m.shards, h, func(s Shard, h kpl.Uint128) int { return s.End.Cmp(h) })
	if i == len(m.shards) || !m.shards[i].Contains(h) {
		return Shard{}, false
	}
	return m.shards[i], true
}

// Shard returns the shard with the given id, if it is in the map.
func (m *Map) Shard(id string) (Shard, bool) {
	i, ok := m.byID[id]
	if !ok {
		return Shard{}, false
	}
	return m.shards[i], true
}

// Shards returns the shards sorted by ending hash key. The caller must not modify them.
func (m *Map) Shards() []Shard { return m.shards }

// Fetched is when the listing behind the map was taken.
func (m *Map) Fetched() time.Time { return m.fetched }

// Generation numbers the maps a Router has fetched, starting at 1; a higher generation is a
// newer map.
func (m *Map) Generation() uint64 { return m.gen }

// Lister is the part of the Kinesis client the router uses.
type Lister interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
}

// List fetches the open shards of stream, following NextToken pages, retrying failed calls
// with policy.
func List(ctx context.Context, api Lister, stream string, policy backoff.Policy, now func() time.Time) (*Map, error) {
	fetched := now()
	var shards []Shard
	in := &kinesis.ListShardsInput{
		ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest},
		MaxResults:  aws.Int32(1000),
	}
	in.StreamName, in.StreamARN = streamarn.Input(stream)
	for {
		var out *kinesis.ListShardsOutput
		err := backoff.Do(ctx, policy, func(ctx context.Context) error {
			var err error
			out, err = api.ListShards(ctx, in)
			return err
		}, nil)
		if err != nil {
			return nil, fmt.Errorf("listing the shards of stream %q: %w", stream, err)
		}
		for _, s := range out.Shards {
			sh, err := fromAPI(s)
			if err != nil {
				return nil, fmt.Errorf("listing the shards of stream %q: %w", stream, err)
			}
			shards = append(shards, sh)
		}
		if out.NextToken == nil || *out.NextToken == "" {
			break
		}
		// A page token replaces the stream name and filter (the API refuses both together).
		in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(1000)}
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("stream %q has no open shards", stream)
	}
	m, err := NewMap(shards, fetched)
	if err != nil {
		return nil, fmt.Errorf("shards of stream %q: %w", stream, err)
	}
	return m, nil
}

func fromAPI(s types.Shard) (Shard, error) {
	id := aws.ToString(s.ShardId)
	if s.HashKeyRange == nil {
		return Shard{}, fmt.Errorf("shard %s has no hash key range", id)
	}
	start, err := kpl.ParseUint128(aws.ToString(s.HashKeyRange.StartingHashKey))
	if err != nil {
		return Shard{}, fmt.Errorf("shard %s starting hash key: %w", id, err)
	}
	end, err := kpl.ParseUint128(aws.ToString(s.HashKeyRange.EndingHashKey))
	if err != nil {
		return Shard{}, fmt.Errorf("shard %s ending hash key: %w", id, err)
	}
	return Shard{ID: id, Start: start, End: end}, nil
}

// Router caches a stream's shard map. Current refreshes it when it is older than the refresh
// interval or was invalidated by evidence of a resharding. It is safe for concurrent use;
// concurrent callers share one ListShards round.
type Router struct {
	api      Lister
	stream   string
	interval time.Duration
	minGap   time.Duration
	policy   backoff.Policy
	now      func() time.Time

	mu       sync.Mutex
	m        *Map
	next     time.Time     // when the map is next due for a refresh
	inflight chan struct{} // closed when the running refresh ends; nil when none runs
	err      error         // the last refresh's error
	gen      uint64
}

// NewRouter returns a router for stream that refreshes its map every interval, and on
// evidence of resharding or after a failed refresh at most once per minGap (a split shows up
// in many responses at once). now is the clock (time.Now when nil).
func NewRouter(api Lister, stream string, interval, minGap time.Duration, policy backoff.Policy, now func() time.Time) *Router {
	if now == nil {
		now = time.Now
	}
	return &Router{api: api, stream: stream, interval: interval, minGap: minGap, policy: policy, now: now}
}

// Current returns the cached map, listing the shards first when it is due. When a refresh
// fails but an older map exists, the older map is returned: a write must not stop because
// ListShards is throttled, since the service still routes by hash key.
func (r *Router) Current(ctx context.Context) (*Map, error) {
	for {
		r.mu.Lock()
		if r.m != nil && r.now().Before(r.next) {
			m := r.m
			r.mu.Unlock()
			return m, nil
		}
		if wait := r.inflight; wait != nil {
			r.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting for the shard map of stream %q: %w", r.stream, ctx.Err())
			}
			r.mu.Lock()
			m, err := r.m, r.err
			r.mu.Unlock()
			switch {
			case m != nil:
				return m, nil
			case err != nil:
				return nil, err
			}
			continue
		}
		done := make(chan struct{})
		r.inflight = done
		r.mu.Unlock()

		fresh, err := List(ctx, r.api, r.stream, r.policy, r.now)

		r.mu.Lock()
		r.inflight = nil
		close(done)
		r.err = err
		if err != nil {
			old := r.m
			r.next = r.now().Add(r.minGap)
			r.mu.Unlock()
			if old != nil && ctx.Err() == nil {
				return old, nil
			}
			return nil, err
		}
		r.gen++
		fresh.gen = r.gen
		r.m = fresh
		r.next = fresh.fetched.Add(r.interval)
		r.mu.Unlock()
		return fresh, nil
	}
}

// Invalidate marks the map as out of date: the next Current lists the shards again, once
// minGap has passed since the last listing.
func (r *Router) Invalidate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		return
	}
	if soon := r.m.fetched.Add(r.minGap); soon.Before(r.next) {
		r.next = soon
	}
}

// Confirm checks a write's outcome against the map m the write was routed with: a record
// with hash key h landed on shard landed. It reports whether m knows landed and its range
// holds h; when not, the map is invalidated so that the next Current lists the shards again.
func (r *Router) Confirm(m *Map, landed string, h kpl.Uint128) bool {
	s, ok := m.Shard(landed)
	if ok && s.Contains(h) {
		return true
	}
	r.Invalidate()
	return false
}
