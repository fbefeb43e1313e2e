package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// idleShards is the shard count of row 7.
const idleShards = 1024

// idlePollInterval is kinesisio's default WithPollInterval, which the row's baseline loop
// uses too.
const idlePollInterval = 250 * time.Millisecond

// rowIdle is row 7: what an idle shard costs. A streaming Read with default options reads
// a stream of idleShards shards into which nothing is put, for IdleTime; then a plain loop
// (a goroutine per shard: GetShardIterator once, then GetRecords with the NextShardIterator
// every idlePollInterval) does the same for as long. Each side's API calls (GetRecords +
// GetShardIterator + ListShards, counted by the server) and the process's CPU time (server
// included, in process for both) are divided by shard-seconds.
func (b *Bench) rowIdle(ctx context.Context) (Row, error) {
	srv, err := kinesistest.Start()
	if err != nil {
		return Row{}, fmt.Errorf("starting the Kinesis server: %w", err)
	}
	defer srv.Close()
	if err := srv.CreateStream("idle", idleShards); err != nil {
		return Row{}, fmt.Errorf("creating stream idle: %w", err)
	}
	apiCalls := func() int {
		return srv.CallCount("GetRecords") + srv.CallCount("GetShardIterator") + srv.CallCount("ListShards")
	}
	shardSeconds := float64(idleShards) * b.cfg.IdleTime.Seconds()

	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.Read(s, "idle", connect(srv.URL(), kinesisio.WithMaxReadTime(b.cfg.IdleTime))...)
	sink(s, beam.ParDo(s, &countFn{}, recs))
	cpu0, calls0 := cpuTime(), apiCalls()
	start := time.Now()
	if _, err := run(ctx, p, "idle-read"); err != nil {
		return Row{}, err
	}
	took := time.Since(start)
	oursCPU, oursCalls := cpuTime()-cpu0, apiCalls()-calls0
	reads, iterators := srv.CallCount("GetRecords"), srv.CallCount("GetShardIterator")

	cpu0, calls0 = cpuTime(), apiCalls()
	if err := idleLoop(ctx, srv.Client(), "idle", b.cfg.IdleTime); err != nil {
		return Row{}, err
	}
	loopCPU, loopCalls := cpuTime()-cpu0, apiCalls()-calls0

	oursRate, loopRate := float64(oursCalls)/shardSeconds, float64(loopCalls)/shardSeconds
	oursCPUms, loopCPUms := oursCPU.Seconds()*1000/shardSeconds, loopCPU.Seconds()*1000/shardSeconds
	b.cfg.logf("idle: Read %d calls (%d GetRecords, %d GetShardIterator), CPU %v, pipeline %v; loop %d calls, CPU %v",
		oursCalls, reads, iterators, oursCPU.Round(time.Millisecond), took.Round(time.Millisecond), loopCalls, loopCPU.Round(time.Millisecond))
	return Row{
		ID:       "7",
		Name:     fmt.Sprintf("Idle shards: streaming Read, defaults, %d shards, nothing put, %v", idleShards, b.cfg.IdleTime),
		Measured: fmt.Sprintf("%.2f API calls and %.3f CPU-ms per shard-second (%d GetRecords, %d GetShardIterator)", oursRate, oursCPUms, reads, iterators),
		Baseline: fmt.Sprintf("%.2f calls, %.3f CPU-ms per shard-second: GetRecords loop keeping its NextShardIterator, %v poll", loopRate, loopCPUms, idlePollInterval),
		Ratio:    oursRate / loopRate,
		Target:   "calls ≤ 1.1×",
		Notes: fmt.Sprintf("ratio of calls; CPU ratio %.2f× per shard-second, %.2f× per API call (%.3f vs %.3f CPU-ms); %.2f GetShardIterator per shard; CPU is the whole process's (server, Prism, pipeline or loop)",
			oursCPUms/loopCPUms, (oursCPU.Seconds()/float64(oursCalls))/(loopCPU.Seconds()/float64(loopCalls)),
			oursCPU.Seconds()*1000/float64(oursCalls), loopCPU.Seconds()*1000/float64(loopCalls), float64(iterators)/idleShards),
		Rate:   oursRate,
		Counts: map[string]int64{"calls": int64(oursCalls), "loop_calls": int64(loopCalls), "getsharditerator": int64(iterators)},
	}, nil
}

// idleLoop polls every shard of stream from LATEST every idlePollInterval for d, keeping
// each shard's NextShardIterator.
func idleLoop(ctx context.Context, client *kinesis.Client, stream string, d time.Duration) error {
	var shards []types.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
	for {
		out, err := client.ListShards(ctx, in)
		if err != nil {
			return fmt.Errorf("listing shards: %w", err)
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(shards))
	for _, sh := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
				StreamName: aws.String(stream), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeLatest,
			})
			if err != nil {
				if ctx.Err() == nil {
					errs <- fmt.Errorf("GetShardIterator: %w", err)
				}
				return
			}
			t := time.NewTicker(idlePollInterval)
			defer t.Stop()
			for iter := it.ShardIterator; iter != nil; {
				res, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("GetRecords: %w", err)
					}
					return
				}
				iter = res.NextShardIterator
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
