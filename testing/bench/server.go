package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// recordSize is the payload size of every benchmark record.
const recordSize = 100

// benchData returns the 100-byte payload of record i: its index in decimal, padded.
func benchData(i int) []byte {
	b := make([]byte, recordSize)
	copy(b, strconv.Itoa(i))
	for j := len(strconv.Itoa(i)); j < recordSize; j++ {
		b[j] = 'a' + byte(j%26)
	}
	return b
}

// benchKey returns the partition key of record i (distinct per record, 8 bytes).
func benchKey(i int) string { return fmt.Sprintf("k%07d", i) }

// connect returns the kinesisio options that point at a server's endpoint followed by opts,
// read or write options (O is kinesisio.ReadOption or kinesisio.WriteOption).
func connect[O any](url string, opts ...O) []O {
	if readAheadOff {
		if _, ok := any(opts).([]kinesisio.ReadOption); ok {
			opts = append(opts, any(kinesisio.WithoutReadAhead()).(O))
		}
	}
	client := []kinesisio.ClientOption{
		kinesisio.WithEndpoint(url), kinesisio.WithRegion("us-east-1"),
		kinesisio.WithStaticCredentials("test", "test"),
	}
	all := make([]O, 0, len(client)+len(opts))
	for _, c := range client {
		all = append(all, any(c).(O))
	}
	return append(all, opts...)
}

// readAheadOff makes every polling read of the bench read without its read-ahead
// (--readahead=false), for a run before and after it in one sitting.
var readAheadOff bool

// putPlain stores records 0..n-1 as plain records, 500 per PutRecords call, from four
// goroutines, resending failed entries.
func putPlain(ctx context.Context, client *kinesis.Client, stream string, n int) error {
	var batches [][]types.PutRecordsRequestEntry
	for from := 0; from < n; from += 500 {
		var b []types.PutRecordsRequestEntry
		for i := from; i < min(n, from+500); i++ {
			b = append(b, types.PutRecordsRequestEntry{PartitionKey: aws.String(benchKey(i)), Data: benchData(i)})
		}
		batches = append(batches, b)
	}
	return putBatches(ctx, client, stream, batches)
}

// putAggregated stores the same user records as putPlain, packed per shard into KPL
// aggregates of at most 51,200 bytes (the writer's default) routed by explicit hash key.
func putAggregated(ctx context.Context, client *kinesis.Client, stream string, n int) error {
	out, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return fmt.Errorf("listing shards: %w", err)
	}
	type shardAgg struct {
		lo, hi kpl.Uint128
		agg    *kpl.Aggregator
	}
	var shards []*shardAgg
	for _, sh := range out.Shards {
		lo, err1 := kpl.ParseUint128(aws.ToString(sh.HashKeyRange.StartingHashKey))
		hi, err2 := kpl.ParseUint128(aws.ToString(sh.HashKeyRange.EndingHashKey))
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("shard %s: %w", aws.ToString(sh.ShardId), err)
		}
		shards = append(shards, &shardAgg{lo, hi, kpl.NewAggregator(51200, 1<<30)})
	}
	var entries []types.PutRecordsRequestEntry
	flush := func(a *kpl.Aggregator) error {
		kr, err := a.Build()
		if err != nil {
			return fmt.Errorf("building an aggregate: %w", err)
		}
		a.Reset()
		e := types.PutRecordsRequestEntry{PartitionKey: aws.String(kr.PartitionKey), Data: kr.Data}
		if kr.ExplicitHashKey != "" {
			e.ExplicitHashKey = aws.String(kr.ExplicitHashKey)
		}
		entries = append(entries, e)
		return nil
	}
	for i := range n {
		r := kpl.UserRecord{PartitionKey: benchKey(i), Data: benchData(i)}
		h := kpl.HashPartitionKey(r.PartitionKey)
		var s *shardAgg
		for _, c := range shards {
			if h.Cmp(c.lo) >= 0 && h.Cmp(c.hi) <= 0 {
				s = c
				break
			}
		}
		if s == nil {
			return fmt.Errorf("no shard holds the hash key of %q", r.PartitionKey)
		}
		if !s.agg.WouldFit(r) {
			if err := flush(s.agg); err != nil {
				return err
			}
		}
		if err := s.agg.Add(r); err != nil {
			return fmt.Errorf("aggregating record %d: %w", i, err)
		}
	}
	for _, s := range shards {
		if s.agg.Len() > 0 {
			if err := flush(s.agg); err != nil {
				return err
			}
		}
	}
	// PutRecords takes at most 5 MiB per call: 90 aggregates of 50 KiB.
	var batches [][]types.PutRecordsRequestEntry
	for len(entries) > 0 {
		k := min(len(entries), 90)
		batches = append(batches, entries[:k])
		entries = entries[k:]
	}
	return putBatches(ctx, client, stream, batches)
}

func putBatches(ctx context.Context, client *kinesis.Client, stream string, batches [][]types.PutRecordsRequestEntry) error {
	work := make(chan []types.PutRecordsRequestEntry)
	errc := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				if err := putBatch(ctx, client, stream, b); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for _, b := range batches {
		select {
		case work <- b:
		case err := <-errc:
			close(work)
			wg.Wait()
			return err
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func putBatch(ctx context.Context, client *kinesis.Client, stream string, batch []types.PutRecordsRequestEntry) error {
	for attempt := 0; len(batch) > 0; attempt++ {
		if attempt == 100 {
			return fmt.Errorf("PutRecords to %s: %d entries still failing after %d attempts", stream, len(batch), attempt)
		}
		out, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: batch})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("PutRecords to %s: %w", stream, err)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		var failed []types.PutRecordsRequestEntry
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				failed = append(failed, batch[i])
			}
		}
		batch = failed
	}
	return nil
}

// getRecordsLoop is the read baseline: a plain aws-sdk-go-v2 reader, one goroutine per
// shard, from TRIM_HORIZON with Limit 10000, until the shard is caught up (an empty page
// with MillisBehindLatest 0), as read_bench_test.go in kinesisio does.
func getRecordsLoop(ctx context.Context, client *kinesis.Client, stream string) (int64, error) {
	out, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return 0, fmt.Errorf("listing shards: %w", err)
	}
	var (
		mu    sync.Mutex
		total int64
		errs  []error
		wg    sync.WaitGroup
	)
	for _, sh := range out.Shards {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			n, err := readShard(ctx, client, stream, id)
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %s: %w", id, err))
			}
		}(aws.ToString(sh.ShardId))
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

// getRecordsSequential is the same reader with one goroutine reading the shards one after
// another: what a reader gets when its runner hands it all the shards in one bundle.
func getRecordsSequential(ctx context.Context, client *kinesis.Client, stream string) (int64, error) {
	out, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return 0, fmt.Errorf("listing shards: %w", err)
	}
	var total int64
	for _, sh := range out.Shards {
		n, err := readShard(ctx, client, stream, aws.ToString(sh.ShardId))
		total += n
		if err != nil {
			return total, fmt.Errorf("shard %s: %w", aws.ToString(sh.ShardId), err)
		}
	}
	return total, nil
}

func readShard(ctx context.Context, client *kinesis.Client, stream, shard string) (int64, error) {
	it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamName: aws.String(stream), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		return 0, fmt.Errorf("GetShardIterator: %w", err)
	}
	var n int64
	for iter := it.ShardIterator; iter != nil; {
		res, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
		if err != nil {
			return n, fmt.Errorf("GetRecords: %w", err)
		}
		n += int64(len(res.Records))
		if len(res.Records) == 0 && aws.ToInt64(res.MillisBehindLatest) == 0 {
			break
		}
		iter = res.NextShardIterator
	}
	return n, nil
}
