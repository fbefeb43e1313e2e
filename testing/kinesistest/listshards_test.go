package kinesistest_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// reshardedStream builds this history on stream "hist" and leaves the clock
// at t0+3h:
//
//	t0      shards 0 [0, H) and 1 [H, max]            (H = 2^127)
//	t0+1h   split 0 at H/2: 2 [0, H/2), 3 [H/2, H)
//	t0+2h   merge 3 and 1:  4 [H/2, max], parents 3 and 1
func reshardedStream(e *env) {
	e.t.Helper()
	e.createStream("hist", 2)
	quarter := new(big.Int).Lsh(big.NewInt(1), 126)
	e.clock.Advance(time.Hour)
	if _, err := e.kc.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String("hist"), ShardToSplit: aws.String(sid(0)), NewStartingHashKey: aws.String(quarter.String())}); err != nil {
		e.t.Fatalf("SplitShard: %v", err)
	}
	e.clock.Advance(time.Hour)
	if _, err := e.kc.MergeShards(e.ctx, &kinesis.MergeShardsInput{StreamName: aws.String("hist"), ShardToMerge: aws.String(sid(3)), AdjacentShardToMerge: aws.String(sid(1))}); err != nil {
		e.t.Fatalf("MergeShards: %v", err)
	}
	e.clock.Advance(time.Hour)
}

func TestListShardsFilters(t *testing.T) {
	e := newEnv(t)
	reshardedStream(e)
	ts := func(d time.Duration) *time.Time { return aws.Time(t0.Add(d)) }
	for _, tc := range []struct {
		name   string
		in     kinesis.ListShardsInput
		shards string
	}{
		{"no filter", kinesis.ListShardsInput{}, "0,1,2,3,4"},
		{"FROM_TRIM_HORIZON", kinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeFromTrimHorizon}}, "0,1,2,3,4"},
		{"AT_TRIM_HORIZON", kinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon}}, "0,1"},
		{"AT_LATEST", kinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}}, "2,4"},
		{"AT_TIMESTAMP before creation", kinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: ts(-time.Hour)}}, "0,1"},
		{"AT_TIMESTAMP +30m", kinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: ts(30 * time.Minute)}}, "0,1"},
		{"AT_TIMESTAMP +90m", kinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: ts(90 * time.Minute)}}, "1,2,3"},
		{"AT_TIMESTAMP +150m", kinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: ts(150 * time.Minute)}}, "2,4"},
		{"FROM_TIMESTAMP +90m", kinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeFromTimestamp, Timestamp: ts(90 * time.Minute)}}, "1,2,3,4"},
		{"FROM_TIMESTAMP +150m", kinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeFromTimestamp, Timestamp: ts(150 * time.Minute)}}, "2,4"},
		{"AFTER_SHARD_ID 2", kinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAfterShardId, ShardId: aws.String(sid(2))}}, "3,4"},
		{"ExclusiveStartShardId 1", kinesis.ListShardsInput{ExclusiveStartShardId: aws.String(sid(1))}, "2,3,4"},
		{"ExclusiveStartShardId with AT_LATEST", kinesis.ListShardsInput{ExclusiveStartShardId: aws.String(sid(2)), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}}, "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.StreamName = aws.String("hist")
			if got := shardIDs(e.listShards(&in)); got != tc.shards {
				t.Errorf("shards %s, want %s", got, tc.shards)
			}
		})
	}
}

func TestListShardsReportsLineage(t *testing.T) {
	e := newEnv(t)
	reshardedStream(e)
	shards := e.listShards(&kinesis.ListShardsInput{StreamName: aws.String("hist")})
	byID := map[string]types.Shard{}
	for _, s := range shards {
		byID[*s.ShardId] = s
	}
	for _, closed := range []int{0, 1, 3} {
		s := byID[sid(closed)]
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			t.Errorf("closed shard %d has no EndingSequenceNumber", closed)
		} else if !seqLess(*s.SequenceNumberRange.StartingSequenceNumber, *s.SequenceNumberRange.EndingSequenceNumber) {
			t.Errorf("shard %d ends before it starts: %+v", closed, *s.SequenceNumberRange)
		}
	}
	for _, open := range []int{2, 4} {
		if end := byID[sid(open)].SequenceNumberRange.EndingSequenceNumber; end != nil {
			t.Errorf("open shard %d has EndingSequenceNumber %s", open, *end)
		}
	}
	for _, tc := range []struct {
		child, parent int
		adjacent      string
	}{{2, 0, ""}, {3, 0, ""}, {4, 3, sid(1)}} {
		s := byID[sid(tc.child)]
		if aws.ToString(s.ParentShardId) != sid(tc.parent) || aws.ToString(s.AdjacentParentShardId) != tc.adjacent {
			t.Errorf("shard %d parents %v/%v, want %s/%q", tc.child, aws.ToString(s.ParentShardId), aws.ToString(s.AdjacentParentShardId), sid(tc.parent), tc.adjacent)
		}
		if !seqLess(*byID[sid(tc.parent)].SequenceNumberRange.EndingSequenceNumber, *s.SequenceNumberRange.StartingSequenceNumber) {
			t.Errorf("child %d starts before parent %d ends", tc.child, tc.parent)
		}
	}
	if got := *byID[sid(4)].HashKeyRange.StartingHashKey; got != new(big.Int).Lsh(big.NewInt(1), 126).String() {
		t.Errorf("merged shard starts at %s", got)
	}
	if got := *byID[sid(4)].HashKeyRange.EndingHashKey; got != "340282366920938463463374607431768211455" {
		t.Errorf("merged shard ends at %s", got)
	}
}

func TestListShardsPagesWithNextToken(t *testing.T) {
	e := newEnv(t)
	e.createStream("seven", 7)
	var pages []string
	in := &kinesis.ListShardsInput{StreamName: aws.String("seven"), MaxResults: aws.Int32(3)}
	for {
		out, err := e.kc.ListShards(e.ctx, in)
		if err != nil {
			t.Fatalf("ListShards: %v", err)
		}
		pages = append(pages, shardIDs(out.Shards))
		if out.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(3)}
	}
	if got := len(pages); got != 3 || pages[0] != "0,1,2" || pages[1] != "3,4,5" || pages[2] != "6" {
		t.Errorf("pages %q, want [0,1,2 3,4,5 6]", pages)
	}
}

func TestListShardsNextTokenRules(t *testing.T) {
	e := newEnv(t)
	e.createStream("tok", 3)
	first, err := e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{StreamName: aws.String("tok"), MaxResults: aws.Int32(1),
		ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}})
	if err != nil || first.NextToken == nil {
		t.Fatalf("first page: %v, %+v", err, first)
	}
	tok := first.NextToken

	_, err = e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{NextToken: tok, StreamName: aws.String("tok")})
	wantAPIError(t, err, "InvalidArgumentException", "NextToken and StreamName cannot be provided together.")
	_, err = e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{NextToken: tok, ExclusiveStartShardId: aws.String(sid(0))})
	wantErrorType[*types.InvalidArgumentException](t, err)
	_, err = e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{NextToken: tok, StreamCreationTimestamp: aws.Time(t0)})
	wantErrorType[*types.InvalidArgumentException](t, err)
	_, err = e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{NextToken: aws.String("bm90IGEgdG9rZW4=")})
	wantAPIError(t, err, "InvalidArgumentException", "Invalid NextToken.")
	_, err = e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{})
	wantErrorType[*types.InvalidArgumentException](t, err)

	// The token keeps the first page's filter: shard 1, split in between,
	// is no longer AT_LATEST and is skipped.
	if _, err := e.kc.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String("tok"), ShardToSplit: aws.String(sid(1)),
		NewStartingHashKey: aws.String("150000000000000000000000000000000000000")}); err != nil {
		t.Fatalf("SplitShard: %v", err)
	}
	rest := e.listShards(&kinesis.ListShardsInput{NextToken: tok})
	if got := shardIDs(rest); got != "2,3,4" {
		t.Errorf("later pages %s, want 2,3,4", got)
	}

	// Tokens live 300 s on the server clock.
	e.clock.Advance(300 * time.Second)
	if _, err := e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{NextToken: tok}); err != nil {
		t.Fatalf("token at 300 s: %v", err)
	}
	e.clock.Advance(time.Millisecond)
	_, err = e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{NextToken: tok})
	wantErrorType[*types.ExpiredNextTokenException](t, err)
}

func TestListShardsValidation(t *testing.T) {
	e := newEnv(t)
	e.createStream("val", 2)
	_, err := e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{StreamName: aws.String("val"), StreamCreationTimestamp: aws.Time(t0.Add(time.Second))})
	wantErrorType[*types.ResourceNotFoundException](t, err)
	if got := e.listShards(&kinesis.ListShardsInput{StreamName: aws.String("val"), StreamCreationTimestamp: aws.Time(t0)}); len(got) != 2 {
		t.Errorf("with the right creation timestamp: %d shards", len(got))
	}
	_, err = e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{StreamName: aws.String("val"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAfterShardId}})
	wantErrorType[*types.InvalidArgumentException](t, err)
	_, err = e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{StreamName: aws.String("val"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp}})
	wantErrorType[*types.InvalidArgumentException](t, err)
	_, err = e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{StreamName: aws.String("val"), MaxResults: aws.Int32(0)})
	wantErrorType[*types.ValidationException](t, err)
	_, err = e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{StreamName: aws.String("nope")})
	wantErrorType[*types.ResourceNotFoundException](t, err)
	if got := e.listShards(&kinesis.ListShardsInput{StreamName: aws.String("val"), MaxResults: aws.Int32(5000)}); len(got) != 2 {
		t.Errorf("MaxResults 5000: %d shards", len(got))
	}
}
