package kinesistest_test

import (
	"fmt"
	"math/big"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

const half = "170141183460469231731687303715884105728" // 2^127

func TestSplitShardClosesTheParentAndOpensTwoChildren(t *testing.T) {
	e := newEnv(t)
	e.createStream("split", 1)
	var lastSeq string
	for i := range 3 {
		lastSeq = *e.put("split", fmt.Sprint(i), fmt.Sprintf("p%d", i)).SequenceNumber
	}
	if _, err := e.kc.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String("split"), ShardToSplit: aws.String(sid(0)), NewStartingHashKey: aws.String(half)}); err != nil {
		t.Fatalf("SplitShard: %v", err)
	}
	shards := e.listShards(&kinesis.ListShardsInput{StreamName: aws.String("split")})
	if shardIDs(shards) != "0,1,2" {
		t.Fatalf("shards %s, want 0,1,2", shardIDs(shards))
	}
	parent, low, high := shards[0], shards[1], shards[2]
	end := aws.ToString(parent.SequenceNumberRange.EndingSequenceNumber)
	if end == "" || !seqLess(lastSeq, end) {
		t.Errorf("parent EndingSequenceNumber %q, want one above the last record %s", end, lastSeq)
	}
	if *low.ParentShardId != sid(0) || *high.ParentShardId != sid(0) || low.AdjacentParentShardId != nil {
		t.Errorf("children parents: %v %v", *low.ParentShardId, *high.ParentShardId)
	}
	if *low.HashKeyRange.StartingHashKey != "0" || *low.HashKeyRange.EndingHashKey != "170141183460469231731687303715884105727" ||
		*high.HashKeyRange.StartingHashKey != half || *high.HashKeyRange.EndingHashKey != *parent.HashKeyRange.EndingHashKey {
		t.Errorf("children ranges %+v %+v", *low.HashKeyRange, *high.HashKeyRange)
	}

	// Reading the parent to its end gives its records, then no iterator and
	// the children.
	got, last := e.readToTip(e.iterator("split", sid(0), types.ShardIteratorTypeTrimHorizon))
	if strings.Join(got, " ") != "p0 p1 p2" {
		t.Errorf("parent records %q", got)
	}
	if last.NextShardIterator != nil {
		t.Fatalf("NextShardIterator at the end of a closed shard = %q, want nil", *last.NextShardIterator)
	}
	if len(last.ChildShards) != 2 {
		t.Fatalf("ChildShards = %+v, want 2", last.ChildShards)
	}
	for i, c := range last.ChildShards {
		if *c.ShardId != sid(i+1) || fmt.Sprint(c.ParentShards) != "["+sid(0)+"]" || *c.HashKeyRange.StartingHashKey != *shards[i+1].HashKeyRange.StartingHashKey {
			t.Errorf("ChildShards[%d] = %s %v %+v", i, *c.ShardId, c.ParentShards, *c.HashKeyRange)
		}
	}

	// New records go to the children; an iterator on the closed parent, even
	// LATEST, ends at once.
	if got := *e.putEHK("split", "0", "c").ShardId; got != sid(1) {
		t.Errorf("record after the split went to %s", got)
	}
	out := e.getRecords(e.iterator("split", sid(0), types.ShardIteratorTypeLatest), 0)
	if len(out.Records) != 0 || out.NextShardIterator != nil || len(out.ChildShards) != 2 {
		t.Errorf("LATEST on closed parent: %d records, next %v, %d children", len(out.Records), out.NextShardIterator, len(out.ChildShards))
	}
	out = e.getRecords(e.iterator("split", sid(0), types.ShardIteratorTypeAtSequenceNumber,
		func(in *kinesis.GetShardIteratorInput) { in.StartingSequenceNumber = aws.String(end) }), 0)
	if out.NextShardIterator != nil || len(out.ChildShards) != 2 {
		t.Errorf("AT_SEQUENCE_NUMBER EndingSequenceNumber: next %v, %d children", out.NextShardIterator, len(out.ChildShards))
	}
}

func TestMergeShardsMakesOneChildWithTwoParents(t *testing.T) {
	e := newEnv(t)
	e.createStream("merge", 2)
	e.putEHK("merge", "0", "left")
	e.putEHK("merge", half, "right")
	if _, err := e.kc.MergeShards(e.ctx, &kinesis.MergeShardsInput{StreamName: aws.String("merge"), ShardToMerge: aws.String(sid(0)), AdjacentShardToMerge: aws.String(sid(1))}); err != nil {
		t.Fatalf("MergeShards: %v", err)
	}
	shards := e.listShards(&kinesis.ListShardsInput{StreamName: aws.String("merge")})
	child := shards[2]
	if *child.ShardId != sid(2) || *child.ParentShardId != sid(0) || *child.AdjacentParentShardId != sid(1) ||
		*child.HashKeyRange.StartingHashKey != "0" || *child.HashKeyRange.EndingHashKey != "340282366920938463463374607431768211455" {
		t.Errorf("child = %+v %+v", child, *child.HashKeyRange)
	}
	for _, p := range []int{0, 1} {
		if shards[p].SequenceNumberRange.EndingSequenceNumber == nil {
			t.Errorf("parent %d not closed", p)
		}
		got, last := e.readToTip(e.iterator("merge", sid(p), types.ShardIteratorTypeTrimHorizon))
		if len(got) != 1 || last.NextShardIterator != nil || len(last.ChildShards) != 1 ||
			*last.ChildShards[0].ShardId != sid(2) || fmt.Sprint(last.ChildShards[0].ParentShards) != fmt.Sprint([]string{sid(0), sid(1)}) {
			t.Errorf("parent %d: %q, next %v, children %+v", p, got, last.NextShardIterator, last.ChildShards)
		}
	}
	if got := *e.put("merge", "any", "x").ShardId; got != sid(2) {
		t.Errorf("record after the merge went to %s", got)
	}
}

func TestReshardingValidation(t *testing.T) {
	e := newEnv(t)
	e.createStream("rv", 3)
	split := func(shard, key string) error {
		_, err := e.kc.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String("rv"), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(key)})
		return err
	}
	merge := func(a, b string) error {
		_, err := e.kc.MergeShards(e.ctx, &kinesis.MergeShardsInput{StreamName: aws.String("rv"), ShardToMerge: aws.String(a), AdjacentShardToMerge: aws.String(b)})
		return err
	}
	wantAPIError(t, split(sid(0), "1"), "InvalidArgumentException",
		"NewStartingHashKey 1 used in SplitShard() on shard shardId-000000000000 in stream rv under account 123456789012 is not both greater than one plus the shard's StartingHashKey 0 and less than the shard's EndingHashKey 113427455640312821154458202477256070484.")
	wantAPIError(t, split(sid(0), "113427455640312821154458202477256070484"), "InvalidArgumentException", "")
	wantAPIError(t, split(sid(0), "x"), "ValidationException", "")
	wantAPIError(t, split(sid(9), "5"), "ResourceNotFoundException", "Could not find shard shardId-000000000009 in stream rv under account 123456789012.")
	wantAPIError(t, merge(sid(0), sid(2)), "InvalidArgumentException",
		"Shards shardId-000000000000 and shardId-000000000002 in stream rv under account 123456789012 are not an adjacent pair of shards eligible for merging")
	wantAPIError(t, merge(sid(1), sid(1)), "InvalidArgumentException", "")
	if err := merge(sid(1), sid(0)); err != nil { // either order is adjacent
		t.Fatalf("MergeShards(1, 0): %v", err)
	}
	wantAPIError(t, split(sid(0), "5"), "InvalidArgumentException",
		"Shard shardId-000000000000 in stream rv under account 123456789012 has already been merged or split, and thus is not eligible for splitting.")
	wantAPIError(t, merge(sid(1), sid(3)), "InvalidArgumentException", "")

	_, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("od"), StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.kc.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String("od"), ShardToSplit: aws.String(sid(0)), NewStartingHashKey: aws.String("5")})
	wantErrorType[*types.ValidationException](t, err)
	_, err = e.kc.UpdateShardCount(e.ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String("od"), TargetShardCount: aws.Int32(8), ScalingType: types.ScalingTypeUniformScaling})
	wantErrorType[*types.ValidationException](t, err)
}

// openRanges lists the open shards' hash ranges in key order.
func openRanges(shards []types.Shard) []string {
	var open []types.Shard
	for _, s := range shards {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, s)
		}
	}
	sort.Slice(open, func(i, j int) bool {
		return hashKey(*open[i].HashKeyRange.StartingHashKey).Cmp(hashKey(*open[j].HashKeyRange.StartingHashKey)) < 0
	})
	var out []string
	for _, s := range open {
		out = append(out, *s.HashKeyRange.StartingHashKey+"-"+*s.HashKeyRange.EndingHashKey)
	}
	return out
}

func uniformRanges(n int) []string {
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	var out []string
	for i := range n {
		lo := new(big.Int).Div(new(big.Int).Mul(space, big.NewInt(int64(i))), big.NewInt(int64(n)))
		hi := new(big.Int).Div(new(big.Int).Mul(space, big.NewInt(int64(i+1))), big.NewInt(int64(n)))
		out = append(out, lo.String()+"-"+hi.Sub(hi, big.NewInt(1)).String())
	}
	return out
}

func TestUpdateShardCountScalesUniformlyAndKeepsLineage(t *testing.T) {
	e := newEnv(t)
	e.createStream("scale", 2)
	want := map[string]bool{}
	write := func(tag string) {
		for i := range 30 {
			d := fmt.Sprintf("%s-%d", tag, i)
			e.put("scale", d, d)
			want[d] = true
		}
	}
	write("a")
	for _, tc := range []struct{ from, to int }{{2, 4}, {4, 3}, {3, 1}, {1, 2}} {
		out, err := e.kc.UpdateShardCount(e.ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String("scale"), TargetShardCount: aws.Int32(int32(tc.to)), ScalingType: types.ScalingTypeUniformScaling})
		if err != nil {
			t.Fatalf("UpdateShardCount %d -> %d: %v", tc.from, tc.to, err)
		}
		if *out.CurrentShardCount != int32(tc.from) || *out.TargetShardCount != int32(tc.to) || *out.StreamName != "scale" {
			t.Errorf("UpdateShardCount output %+v", out)
		}
		shards := e.listShards(&kinesis.ListShardsInput{StreamName: aws.String("scale")})
		if got, w := fmt.Sprint(openRanges(shards)), fmt.Sprint(uniformRanges(tc.to)); got != w {
			t.Errorf("%d -> %d: open ranges %s, want %s", tc.from, tc.to, got, w)
		}
		write(fmt.Sprint("after", tc.to))
	}

	// Every record is reachable by reading from the roots and following
	// ChildShards, and every child lists parents that exist.
	shards := e.listShards(&kinesis.ListShardsInput{StreamName: aws.String("scale")})
	known := map[string]bool{}
	for _, s := range shards {
		known[*s.ShardId] = true
	}
	for _, s := range shards {
		for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
			if p != nil && !known[*p] {
				t.Errorf("shard %s has unknown parent %s", *s.ShardId, *p)
			}
		}
	}
	roots := e.listShards(&kinesis.ListShardsInput{StreamName: aws.String("scale"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon}})
	queue := []string{}
	for _, r := range roots {
		queue = append(queue, *r.ShardId)
	}
	seen := map[string]bool{}
	got := map[string]bool{}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		data, last := e.readToTip(e.iterator("scale", id, types.ShardIteratorTypeTrimHorizon))
		for _, d := range data {
			if got[d] {
				t.Errorf("record %s read twice", d)
			}
			got[d] = true
		}
		for _, c := range last.ChildShards {
			queue = append(queue, *c.ShardId)
		}
	}
	if len(seen) != len(shards) {
		t.Errorf("lineage reaches %d of %d shards", len(seen), len(shards))
	}
	if len(got) != len(want) {
		t.Errorf("read %d distinct records by lineage, wrote %d", len(got), len(want))
	}
}
