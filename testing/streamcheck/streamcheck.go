// Package streamcheck reads a whole stream back the way a KCL consumer would, for tests
// of the writer: every shard from TRIM_HORIZON with raw GetRecords, KPL aggregates split
// with kpl.Deaggregate, and each user record checked against its shard's hash key range.
package streamcheck

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// UserRecord is a user record as read back.
type UserRecord struct {
	Shard        string
	PartitionKey string
	Data         []byte
	// InRange reports whether the record's hash key lies in its shard's range.
	InRange bool
	// Aggregated reports whether it came out of a KPL aggregate.
	Aggregated bool
	// Misplaced reports whether it came out of an aggregate with any record outside the
	// shard's range: a KCL consumer drops such an aggregate whole.
	Misplaced bool
}

// Result is a stream read back.
type Result struct {
	Records        []UserRecord
	KinesisRecords int
	Aggregates     int
	// MisplacedAggregates counts aggregates a KCL consumer drops.
	MisplacedAggregates int
}

// Kept returns the records a KCL consumer would deliver (those not in misplaced aggregates).
func (r Result) Kept() []UserRecord {
	var out []UserRecord
	for _, u := range r.Records {
		if !u.Misplaced {
			out = append(out, u)
		}
	}
	return out
}

// Read reads every shard of stream (open and closed) to its current end.
func Read(ctx context.Context, c *kinesis.Client, stream string) (Result, error) {
	var res Result
	var shards []types.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
	for {
		out, err := c.ListShards(ctx, in)
		if err != nil {
			return res, fmt.Errorf("listing shards: %w", err)
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
	sort.Slice(shards, func(i, j int) bool { return aws.ToString(shards[i].ShardId) < aws.ToString(shards[j].ShardId) })
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		start, err := kpl.ParseUint128(aws.ToString(sh.HashKeyRange.StartingHashKey))
		if err != nil {
			return res, err
		}
		end, err := kpl.ParseUint128(aws.ToString(sh.HashKeyRange.EndingHashKey))
		if err != nil {
			return res, err
		}
		inRange := func(r kpl.UserRecord) bool {
			h, err := r.HashKey()
			return err == nil && start.Cmp(h) <= 0 && h.Cmp(end) <= 0
		}
		it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: sh.ShardId,
			ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return res, fmt.Errorf("iterator for %s: %w", id, err)
		}
		iter := it.ShardIterator
		for iter != nil {
			out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				return res, fmt.Errorf("reading %s: %w", id, err)
			}
			for _, r := range out.Records {
				res.KinesisRecords++
				users, agg, err := kpl.Deaggregate(r.Data)
				if err != nil {
					return res, fmt.Errorf("record %s of %s: %w", aws.ToString(r.SequenceNumber), id, err)
				}
				if !agg {
					u := kpl.UserRecord{PartitionKey: aws.ToString(r.PartitionKey), Data: r.Data}
					res.Records = append(res.Records, UserRecord{Shard: id, PartitionKey: u.PartitionKey, Data: r.Data, InRange: inRange(u)})
					continue
				}
				res.Aggregates++
				misplaced := false
				for _, u := range users {
					if !inRange(u) {
						misplaced = true
					}
				}
				if misplaced {
					res.MisplacedAggregates++
				}
				for _, u := range users {
					res.Records = append(res.Records, UserRecord{Shard: id, PartitionKey: u.PartitionKey, Data: u.Data,
						InRange: inRange(u), Aggregated: true, Misplaced: misplaced})
				}
			}
			if len(out.Records) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0 {
				break // caught up on an open shard
			}
			iter = out.NextShardIterator
		}
	}
	return res, nil
}

// Multiset counts records by partition key and data.
func Multiset[T any](items []T, key func(T) string) map[string]int {
	m := make(map[string]int, len(items))
	for _, it := range items {
		m[key(it)]++
	}
	return m
}

// Diff describes how two multisets differ, at most max entries; "" when equal.
func Diff(got, want map[string]int, max int) string {
	var d []string
	for k, w := range want {
		if g := got[k]; g != w {
			d = append(d, fmt.Sprintf("%q: got %d, want %d", trunc(k), g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%q: got %d, want 0", trunc(k), g))
		}
	}
	if len(d) == 0 {
		return ""
	}
	sort.Strings(d)
	n := len(d)
	if n > max {
		d = d[:max]
	}
	return fmt.Sprintf("%d keys differ, e.g. %v", n, d)
}

// Digests describes records by size and the start of their SHA-256, for messages about
// records too large to print.
func Digests(recs []string) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		sum := sha256.Sum256([]byte(r))
		out[i] = fmt.Sprintf("%d bytes %x", len(r), sum[:8])
	}
	return out
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
