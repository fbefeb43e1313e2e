package route

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

func u(hi, lo uint64) kpl.Uint128 { return kpl.Uint128{Hi: hi, Lo: lo} }

// threeShards splits the key space at 2^126 and 2^127, listed out of order.
func threeShards() []Shard {
	return []Shard{
		{ID: "c", Start: u(1<<63, 0), End: kpl.MaxUint128},
		{ID: "a", Start: u(0, 0), End: u(1<<62-1, ^uint64(0))},
		{ID: "b", Start: u(1<<62, 0), End: u(1<<63-1, ^uint64(0))},
	}
}

func TestLookupFindsTheShardHoldingEveryBoundary(t *testing.T) {
	m, err := NewMap(threeShards(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  kpl.Uint128
		want string
	}{
		{u(0, 0), "a"},
		{u(1<<62-1, ^uint64(0)), "a"},
		{u(1<<62, 0), "b"},
		{u(1<<63-1, ^uint64(0)), "b"},
		{u(1<<63, 0), "c"},
		{kpl.MaxUint128, "c"},
		{kpl.HashPartitionKey("pk"), "a"}, // 38317986088707300215492326132921849533 < 2^126
	} {
		s, ok := m.Lookup(tc.key)
		if !ok || s.ID != tc.want {
			t.Errorf("Lookup(%s) = %q, %v; want %q", tc.key, s.ID, ok, tc.want)
		}
	}
	if ids := [3]string{m.Shards()[0].ID, m.Shards()[1].ID, m.Shards()[2].ID}; ids != [3]string{"a", "b", "c"} {
		t.Errorf("shards sorted as %v, want a b c (by ending hash key)", ids)
	}
}

func TestLookupReportsAGapInTheMap(t *testing.T) {
	shards := threeShards()[:2] // "c" and "a": keys in b's range have no shard
	m, err := NewMap(shards, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := m.Lookup(u(1<<62, 5)); ok {
		t.Errorf("Lookup in the gap = %q, want none", s.ID)
	}
}

func TestNewMapRefusesOverlaps(t *testing.T) {
	shards := append(threeShards(), Shard{ID: "parent", Start: u(0, 0), End: u(1<<63-1, ^uint64(0))})
	if _, err := NewMap(shards, time.Time{}); err == nil {
		t.Fatal("NewMap accepted overlapping ranges")
	}
}

// fakeLister serves pages of shards and counts calls.
type fakeLister struct {
	pages [][]types.Shard
	calls int
	fail  error
	seen  []*kinesis.ListShardsInput
}

func (f *fakeLister) ListShards(_ context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	f.calls++
	f.seen = append(f.seen, in)
	if f.fail != nil {
		return nil, f.fail
	}
	page := 0
	if in.NextToken != nil {
		page, _ = strconv.Atoi(*in.NextToken)
	}
	out := &kinesis.ListShardsOutput{Shards: f.pages[page]}
	if page+1 < len(f.pages) {
		out.NextToken = aws.String(strconv.Itoa(page + 1))
	}
	return out, nil
}

func apiShard(s Shard) types.Shard {
	return types.Shard{ShardId: aws.String(s.ID), HashKeyRange: &types.HashKeyRange{
		StartingHashKey: aws.String(s.Start.String()), EndingHashKey: aws.String(s.End.String())}}
}

func TestListFollowsPagesWithFilterOnlyOnTheFirst(t *testing.T) {
	s := threeShards()
	f := &fakeLister{pages: [][]types.Shard{{apiShard(s[0])}, {apiShard(s[1])}, {apiShard(s[2])}}}
	m, err := List(context.Background(), f, "st", backoff.Policy{}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Shards()) != 3 || f.calls != 3 {
		t.Fatalf("got %d shards in %d calls, want 3 in 3", len(m.Shards()), f.calls)
	}
	first := f.seen[0]
	if aws.ToString(first.StreamName) != "st" || first.ShardFilter == nil || first.ShardFilter.Type != types.ShardFilterTypeAtLatest {
		t.Errorf("first call = %+v, want stream st with filter AT_LATEST", first)
	}
	for _, in := range f.seen[1:] {
		if in.StreamName != nil || in.ShardFilter != nil || in.NextToken == nil {
			t.Errorf("paged call = %+v, want only NextToken (the API refuses the stream name with it)", in)
		}
	}
}

func TestRouterRefreshesWhenDueOrInvalidated(t *testing.T) {
	s := threeShards()
	f := &fakeLister{pages: [][]types.Shard{{apiShard(s[0]), apiShard(s[1]), apiShard(s[2])}}}
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	r := NewRouter(f, "st", time.Minute, time.Second, backoff.Policy{}, clock)
	ctx := context.Background()

	m1, err := r.Current(ctx)
	if err != nil || m1.Generation() != 1 {
		t.Fatalf("first Current = gen %v, %v; want gen 1", m1.Generation(), err)
	}
	if m, _ := r.Current(ctx); m != m1 || f.calls != 1 {
		t.Fatalf("second Current listed again (%d calls); want the cached map", f.calls)
	}
	// Evidence: a record landed on an unknown shard. The map is refreshed, but not before
	// minGap has passed since the last listing.
	if r.Confirm(m1, "shardId-child", kpl.HashPartitionKey("x")) {
		t.Fatal("Confirm accepted an unknown shard")
	}
	if m, _ := r.Current(ctx); m != m1 {
		t.Fatal("refreshed before minGap")
	}
	now = now.Add(time.Second)
	m2, _ := r.Current(ctx)
	if m2 == m1 || m2.Generation() != 2 || f.calls != 2 {
		t.Fatalf("after invalidation and minGap: gen %d, %d calls; want gen 2, 2 calls", m2.Generation(), f.calls)
	}
	// Periodic refresh.
	now = now.Add(time.Minute)
	if m3, _ := r.Current(ctx); m3.Generation() != 3 {
		t.Fatalf("after the interval: gen %d, want 3", m3.Generation())
	}
	// A key inside the shard it landed on is confirmed without invalidating.
	if !r.Confirm(m2, "a", u(0, 7)) {
		t.Error("Confirm refused a key inside the shard's range")
	}
}

func TestRouterKeepsTheOldMapWhenARefreshFails(t *testing.T) {
	s := threeShards()
	f := &fakeLister{pages: [][]types.Shard{{apiShard(s[0]), apiShard(s[1]), apiShard(s[2])}}}
	now := time.Unix(1000, 0)
	r := NewRouter(f, "st", time.Minute, time.Second, backoff.Policy{}, func() time.Time { return now })
	ctx := context.Background()
	m1, _ := r.Current(ctx)
	f.fail = &types.ResourceNotFoundException{Message: aws.String("gone")}
	now = now.Add(2 * time.Minute)
	m, err := r.Current(ctx)
	if err != nil || m != m1 {
		t.Fatalf("Current after a failed refresh = %v, %v; want the old map", m, err)
	}
	calls := f.calls
	if m, _ := r.Current(ctx); m != m1 || f.calls != calls {
		t.Error("a failed refresh is retried at once instead of after minGap")
	}

	fresh := NewRouter(f, "st", time.Minute, time.Second, backoff.Policy{}, nil)
	var notFound *types.ResourceNotFoundException
	if _, err := fresh.Current(ctx); !errors.As(err, &notFound) {
		t.Errorf("first Current on a missing stream = %v, want ResourceNotFoundException", err)
	}
}
