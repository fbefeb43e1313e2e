package main

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// storedStats describes what a stream holds.
type storedStats struct {
	Records  int64            // Kinesis records
	Singles  int64            // of them, those carrying one user record (plain, or a 1-record aggregate)
	PerShard map[string]int64 // user records per shard
}

// streamContents reads every shard of stream, open and closed, with GetRecords and
// deaggregates what it finds: the multiset of user records the stream holds. With perShard >
// 0 it takes only the first perShard user records of each shard.
func streamContents(ctx context.Context, client *kinesis.Client, stream string, perShard int64) (multiset, storedStats, error) {
	st := storedStats{PerShard: map[string]int64{}}
	out, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return multiset{}, st, fmt.Errorf("listing shards: %w", err)
	}
	var m multiset
	for _, sh := range out.Shards {
		id := aws.ToString(sh.ShardId)
		it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName: aws.String(stream), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return m, st, fmt.Errorf("GetShardIterator: %w", err)
		}
		add := func(key string, data []byte) {
			if perShard <= 0 || st.PerShard[id] < perShard {
				m.add(key, data)
			}
			st.PerShard[id]++
		}
		for iter := it.ShardIterator; iter != nil; {
			res, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
			if err != nil {
				return m, st, fmt.Errorf("GetRecords: %w", err)
			}
			for _, r := range res.Records {
				st.Records++
				users, ok, err := kpl.Deaggregate(r.Data)
				if err != nil {
					return m, st, fmt.Errorf("deaggregating: %w", err)
				}
				if !ok {
					st.Singles++
					add(aws.ToString(r.PartitionKey), r.Data)
					continue
				}
				if len(users) == 1 {
					st.Singles++
				}
				for _, u := range users {
					add(u.PartitionKey, u.Data)
				}
			}
			if len(res.Records) == 0 && aws.ToInt64(res.MillisBehindLatest) == 0 {
				break
			}
			iter = res.NextShardIterator
		}
	}
	return m, st, nil
}

// putRange stores records from..to-1 plainly; with ehk set, each goes to ehk(i)'s shard.
func putRange(ctx context.Context, client *kinesis.Client, stream string, from, to int, ehk func(int) string) error {
	var batches [][]types.PutRecordsRequestEntry
	for lo := from; lo < to; lo += 500 {
		var b []types.PutRecordsRequestEntry
		for i := lo; i < min(to, lo+500); i++ {
			e := types.PutRecordsRequestEntry{PartitionKey: aws.String(benchKey(i)), Data: benchData(i)}
			if ehk != nil {
				e.ExplicitHashKey = aws.String(ehk(i))
			}
			b = append(b, e)
		}
		batches = append(batches, b)
	}
	return putBatches(ctx, client, stream, batches)
}

// waitActive waits until stream is ACTIVE again after a reshard.
func waitActive(ctx context.Context, client *kinesis.Client, stream string) error {
	for range 2000 {
		out, err := client.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			return fmt.Errorf("describing stream %s: %w", stream, err)
		}
		if out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("stream %s did not become active", stream)
}

// Hash keys: the middle and the quarter points of the 128-bit hash key space.
var (
	hashHalf    = new(big.Int).Lsh(big.NewInt(1), 127)
	hashQuarter = new(big.Int).Lsh(big.NewInt(1), 126)
)

func hashKey(v *big.Int, plus int) string {
	return new(big.Int).Add(v, big.NewInt(int64(plus))).String()
}

// reshardCase is a stream resharded between puts, with the parent → child pairs whose order a
// reader should keep.
type reshardCase struct {
	name  string
	want  multiset
	edges [][2]string // parent, child
	desc  string
}

// fillSplit makes stream "split": 2 shards, a third of the records, shard 0 split in
// the middle of its range, the rest.
func fillSplit(ctx context.Context, client *kinesis.Client, n int) (reshardCase, error) {
	c := reshardCase{name: "split", want: expected(0, n)}
	if err := createStream(ctx, client, c.name, 2); err != nil {
		return c, err
	}
	if err := putRange(ctx, client, c.name, 0, n/3, nil); err != nil {
		return c, err
	}
	if _, err := client.SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName: aws.String(c.name), ShardToSplit: aws.String("shardId-000000000000"),
		NewStartingHashKey: aws.String(hashKey(hashQuarter, 0)),
	}); err != nil {
		return c, fmt.Errorf("splitting: %w", err)
	}
	if err := waitActive(ctx, client, c.name); err != nil {
		return c, err
	}
	if err := putRange(ctx, client, c.name, n/3, n, nil); err != nil {
		return c, err
	}
	c.edges = [][2]string{{"shardId-000000000000", "shardId-000000000002"}, {"shardId-000000000000", "shardId-000000000003"}}
	c.desc = fmt.Sprintf("2 shards, %s records, shard 0 split in two, %s more", group(int64(n/3)), group(int64(n-n/3)))
	return c, nil
}

// fillMerge makes stream "merge": 2 shards, the adjacent parent (shard 0, lower half) given
// most of the first records and the primary parent (shard 1) a few, shards 1 and 0 merged
// (ShardToMerge shard 1, AdjacentShardToMerge shard 0), then records into the child.
func fillMerge(ctx context.Context, client *kinesis.Client, n int) (reshardCase, error) {
	c := reshardCase{name: "merge", want: expected(0, n)}
	if err := createStream(ctx, client, c.name, 2); err != nil {
		return c, err
	}
	big0, small1 := n*2/3, n/30
	if err := putRange(ctx, client, c.name, 0, big0, func(int) string { return hashKey(hashQuarter, 0) }); err != nil {
		return c, err
	}
	if err := putRange(ctx, client, c.name, big0, big0+small1, func(int) string { return hashKey(hashHalf, 1) }); err != nil {
		return c, err
	}
	if _, err := client.MergeShards(ctx, &kinesis.MergeShardsInput{
		StreamName: aws.String(c.name), ShardToMerge: aws.String("shardId-000000000001"),
		AdjacentShardToMerge: aws.String("shardId-000000000000"),
	}); err != nil {
		return c, fmt.Errorf("merging: %w", err)
	}
	if err := waitActive(ctx, client, c.name); err != nil {
		return c, err
	}
	if err := putRange(ctx, client, c.name, big0+small1, n, nil); err != nil {
		return c, err
	}
	c.edges = [][2]string{{"shardId-000000000001", "shardId-000000000002"}, {"shardId-000000000000", "shardId-000000000002"}}
	c.desc = fmt.Sprintf("2 shards, %s records in shard 0 and %s in shard 1, merged (primary parent shard 1, adjacent parent shard 0), %s more in the child",
		group(int64(big0)), group(int64(small1)), group(int64(n-big0-small1)))
	return c, nil
}

// orderViolations lists the parent → child pairs whose child reached the counting step
// before its parent's last record did, and the shards of which nothing arrived.
func orderViolations(c reshardCase, spans map[string]shardSpan) []string {
	var out []string
	for _, e := range c.edges {
		p, okp := spans[e[0]]
		ch, okc := spans[e[1]]
		switch {
		case !okp || !okc:
			continue
		case ch.First < p.Last:
			out = append(out, fmt.Sprintf("%s's first record %.0f ms before %s's last", short(e[1]), (p.Last-ch.First)*1000, short(e[0])))
		}
	}
	for _, e := range c.edges {
		for _, id := range e {
			if _, ok := spans[id]; !ok && !slices.Contains(out, short(id)+": nothing delivered") {
				out = append(out, short(id)+": nothing delivered")
			}
		}
	}
	return out
}

func short(shard string) string {
	s := strings.TrimLeft(strings.TrimPrefix(shard, "shardId-"), "0")
	if s == "" {
		s = "0"
	}
	return "shard " + s
}
