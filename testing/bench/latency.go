package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// baselinePollInterval is the baseline loop's wait after an empty page: kinesisio's
// default WithPollInterval before adaptive polling, whose latency the Read then matched
// (6a: 1.01×).
const baselinePollInterval = time.Second

// latencyWarmUp is the start of row 6 that its notes also leave out: records put in the
// first second after the pipeline is started, while the Read registers its consumer and
// opens its first iterators or subscriptions.
const latencyWarmUp = time.Second

// latencyData is a 100-byte payload: put time (UnixNano) and index, big-endian.
func latencyData(put time.Time, idx uint64) []byte {
	b := make([]byte, recordSize)
	binary.BigEndian.PutUint64(b, uint64(put.UnixNano()))
	binary.BigEndian.PutUint64(b[8:], idx)
	return b
}

// produce puts one record every 1/rate with PutRecord to each of streams until ctx ends, and
// returns how many it put. puts gets each record's put time, by index.
func produce(ctx context.Context, client *kinesis.Client, streams []string, rate int, puts *[]time.Time) (uint64, error) {
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	var idx uint64
	for {
		select {
		case <-ctx.Done():
			return idx, nil
		case <-t.C:
		}
		now := time.Now()
		*puts = append(*puts, now)
		for _, stream := range streams {
			_, err := client.PutRecord(ctx, &kinesis.PutRecordInput{
				StreamName: aws.String(stream), PartitionKey: aws.String(fmt.Sprint("p", idx)), Data: latencyData(now, idx),
			})
			if err != nil {
				if ctx.Err() != nil {
					return idx, nil
				}
				return idx, fmt.Errorf("PutRecord: %w", err)
			}
		}
		idx++
	}
}

// pollLoop is the latency baseline: per shard, GetRecords from LATEST, again at once after a
// page with records and after baselinePollInterval after an empty one, until ctx ends.
func pollLoop(ctx context.Context, client *kinesis.Client, stream string, got map[uint64]time.Duration, mu *sync.Mutex) error {
	out, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return fmt.Errorf("listing shards: %w", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(out.Shards))
	for i, sh := range out.Shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
				StreamName: aws.String(stream), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeLatest,
			})
			if err != nil {
				errs[i] = fmt.Errorf("GetShardIterator: %w", err)
				return
			}
			for iter := it.ShardIterator; iter != nil && ctx.Err() == nil; {
				res, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
				if err != nil {
					if ctx.Err() == nil {
						errs[i] = fmt.Errorf("GetRecords: %w", err)
					}
					return
				}
				now := time.Now()
				mu.Lock()
				for _, r := range res.Records {
					got[binary.BigEndian.Uint64(r.Data[8:])] = now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Data))))
				}
				mu.Unlock()
				iter = res.NextShardIterator
				if len(res.Records) == 0 {
					select {
					case <-ctx.Done():
					case <-time.After(baselinePollInterval):
					}
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// percentile returns the p-th percentile (0..100) of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// rowLatency is row 6. With polling its p50 ≈ half and p99 ≈ all of WithPollInterval (1 s
// by default), for the Read and the baseline alike: at moderate rates most GetRecords calls
// right after a page come back empty, and the reader then sleeps the poll interval; Prism's
// checkpointing adds nothing measurable. Lower latency is a WithPollInterval away, at the
// cost of more of the 5 GetRecords calls per second a shard allows all its consumers.
//
// The row: a producer puts timestamped records at LatencyRate per second while a
// streaming Read with default options (plus WithMaxReadTime, so that it ends) and the
// baseline loop consume them; both note put → seen per record, and the percentiles are over
// the records both saw. The notes give the Read's percentiles again without the records put
// in the warm-up (latencyWarmUp), and the progress log breaks them down by second of put.
//
// rowsLatency measures it twice: 6a with polling (the default), 6b with enhanced fan-out
// (WithEnhancedFanOut) on a server with the per-shard limits on, where SubscribeToShard
// pushes each record as it is stored instead of waiting for the next poll. There a record
// waits only while its shard is between two ProcessElement calls, its subscription parked:
// Prism runs the shards it puts in one bundle one after the other, so the time each call
// holds its shard sets the tail, and the shards last in their bundles are first subscribed
// that much later.
func (b *Bench) rowsLatency(ctx context.Context) ([]Row, error) {
	polling, err := b.rowLatency(ctx, "6a", "default options, polling, server limits on",
		[]kinesistest.Option{kinesistest.WithLimits()})
	if err != nil {
		return nil, err
	}
	off := readAheadOff
	readAheadOff = false // enhanced fan-out has no read-ahead, and refuses WithoutReadAhead
	efo, err := b.rowLatency(ctx, "6b", "enhanced fan-out, server limits on",
		[]kinesistest.Option{kinesistest.WithLimits()}, kinesisio.WithEnhancedFanOut("bench-latency"))
	readAheadOff = off
	return []Row{polling, efo}, err
}

func (b *Bench) rowLatency(ctx context.Context, id, mode string, srvOpts []kinesistest.Option, readOpts ...kinesisio.ReadOption) (Row, error) {
	srv, err := kinesistest.Start(srvOpts...)
	if err != nil {
		return Row{}, fmt.Errorf("starting the Kinesis server: %w", err)
	}
	defer srv.Close()
	// The loop reads its own copy of the stream, so that neither spends the other's
	// per-shard read limits.
	for _, stream := range []string{"lat", "lat-loop"} {
		if err := srv.CreateStream(stream, b.cfg.Shards); err != nil {
			return Row{}, fmt.Errorf("creating stream %s: %w", stream, err)
		}
	}
	resetCounters()
	latencyMu.Lock()
	latencyByIndex = map[uint64]time.Duration{}
	latencyMu.Unlock()
	loopGot := map[uint64]time.Duration{}
	var loopMu sync.Mutex

	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	var wg sync.WaitGroup
	var produced uint64
	var puts []time.Time
	var prodErr, loopErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		produced, prodErr = produce(pctx, srv.Client(), []string{"lat", "lat-loop"}, b.cfg.LatencyRate, &puts)
	}()
	go func() {
		defer wg.Done()
		loopErr = pollLoop(pctx, srv.Client(), "lat-loop", loopGot, &loopMu)
	}()

	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.Read(s, "lat", connect(srv.URL(), append(readOpts, kinesisio.WithMaxReadTime(b.cfg.LatencyTime))...)...)
	sink(s, beam.ParDo(s, &latencyFn{}, recs))
	start := time.Now()
	pr, err := run(ctx, p, "latency-read")
	took := time.Since(start)
	stopProducer()
	wg.Wait()
	if err := errors.Join(err, prodErr, loopErr); err != nil {
		return Row{}, err
	}
	latencyMu.Lock()
	defer latencyMu.Unlock()
	var ours, theirs, steady []time.Duration
	bySecond := map[int][]time.Duration{} // the Read's latencies by second of put since start
	for idx, d := range latencyByIndex {
		if l, ok := loopGot[idx]; ok {
			ours = append(ours, d)
			theirs = append(theirs, l)
			if idx < uint64(len(puts)) {
				since := puts[idx].Sub(start)
				if since >= latencyWarmUp {
					steady = append(steady, d)
				}
				sec := int(since / time.Second)
				bySecond[sec] = append(bySecond[sec], d)
			}
		}
	}
	if len(ours) == 0 {
		return Row{}, fmt.Errorf("no record was seen by both the Read (%d) and the loop (%d) of %d put", len(latencyByIndex), len(loopGot), produced)
	}
	slices.Sort(ours)
	slices.Sort(theirs)
	slices.Sort(steady)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/1e6) }
	pcts := func(d []time.Duration) string {
		return fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", ms(percentile(d, 50)), ms(percentile(d, 90)), ms(percentile(d, 99)), ms(percentile(d, 100)))
	}
	b.cfg.logf("latency: %d put, Read saw %d, loop %d, both %d, pipeline %v", produced, len(latencyByIndex), len(loopGot), len(ours), took.Round(time.Millisecond))
	for _, sec := range slices.Sorted(maps.Keys(bySecond)) {
		d := bySecond[sec]
		slices.Sort(d)
		b.cfg.logf("latency %s: put in second %d of the run: %d records, %s", id, sec, len(d), pcts(d))
	}
	return Row{
		ID:       id,
		Name:     fmt.Sprintf("Latency put → emitted, streaming Read (%s), %d rec/s for %v", mode, b.cfg.LatencyRate, b.cfg.LatencyTime),
		Measured: pcts(ours),
		Baseline: pcts(theirs) + " (GetRecords loop from LATEST, 1 s poll when empty: the Read's latency before adaptive polling)",
		Ratio:    float64(percentile(ours, 99)) / float64(max(percentile(theirs, 99), time.Millisecond)),
		Target:   "p99 ≤ 0.5×, no throttled call",
		Notes: fmt.Sprintf("ratio of p99s; p50 ratio %.2f×; %d throttled GetRecords (kinesisio/throttles); over %s records both saw (%s put, Read saw %s); without the %v warm-up (%s records): p50 %s, p99 %s",
			float64(percentile(ours, 50))/float64(max(percentile(theirs, 50), time.Millisecond)), counter(pr, "kinesisio", "throttles"),
			group(int64(len(ours))), group(int64(produced)), group(int64(len(latencyByIndex))),
			latencyWarmUp, group(int64(len(steady))), ms(percentile(steady, 50)), ms(percentile(steady, 99))),
		Rate:   float64(len(latencyByIndex)) / took.Seconds(),
		Counts: map[string]int64{"produced": int64(produced), "read": int64(len(latencyByIndex)), "both": int64(len(ours))},
	}, nil
}
