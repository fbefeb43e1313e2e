package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// flinkLatencyRow is the latency row beside Flink's own consumer (--flink only).
const flinkLatencyRow = 14

// flinkLatencyDrain is how long the anchor job may still count after the producer stopped:
// ten of its 200 ms polls.
const flinkLatencyDrain = 2 * time.Second

// flinkLatencyCheckpointing is our job's checkpoint interval (ms), as in the Flink soak the
// README quotes for latency.
const flinkLatencyCheckpointing = 1000

// rowFlinkLatency is row 14: put → seen latency at Config.LatencyRate records/s, one
// producer writing each record to two streams of one server with the per-shard limits on,
// one for each side, read at the same time on the same cluster at parallelism equal to the
// shard count: a streaming Read with default options (WithMaxReadTime, so that it ends;
// checkpoints every second) on the job server, its DoFns in this process, against
// FlinkKinesisConsumer from LATEST with its defaults (a GetRecords call per shard every
// 200 ms), noting arrivals in its sink subtasks. Both clocks are this machine's. The
// percentiles are over the records both saw, without those put in the first second after
// the first of them (latencyWarmUp): our job starts reading some 15 s after submission,
// theirs in 1–2 s.
func (b *Bench) rowFlinkLatency(ctx context.Context) (Row, error) {
	job, err := b.flinkJob(ctx)
	if err != nil {
		return Row{}, err
	}
	srv, err := kinesistest.Start(kinesistest.WithLimits())
	if err != nil {
		return Row{}, fmt.Errorf("starting the Kinesis server: %w", err)
	}
	defer srv.Close()
	shards := b.cfg.Shards
	for _, stream := range []string{"lat", "lat-flink"} {
		if err := srv.CreateStream(stream, shards); err != nil {
			return Row{}, fmt.Errorf("creating stream %s: %w", stream, err)
		}
	}
	resetCounters()
	latencyMu.Lock()
	latencyByIndex = map[uint64]time.Duration{}
	latencyMu.Unlock()

	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	var (
		wg       sync.WaitGroup
		produced uint64
		puts     []time.Time
		prodErr  error
		theirs   flinkKinesisRun
		jobErr   error
	)
	drained := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		produced, prodErr = produce(pctx, srv.Client(), []string{"lat", "lat-flink"}, b.cfg.LatencyRate, &puts)
	}()
	go func() {
		defer wg.Done()
		theirs, jobErr = job.run(ctx, srv.URL(), "lat-flink", shards, flinkKinesisTimeout, func(subtaskStatus) bool {
			select {
			case <-drained:
				return true
			default:
				return false
			}
		}, "--initpos=LATEST", "--latency=true")
	}()

	start := time.Now()
	oursErr := b.streamOnFlink(ctx, srv.URL(), "lat", shards)
	took := time.Since(start)
	stopProducer()
	time.AfterFunc(flinkLatencyDrain, func() { close(drained) })
	wg.Wait()
	if err := errors.Join(oursErr, prodErr, jobErr); err != nil {
		return Row{}, err
	}

	latencyMu.Lock()
	defer latencyMu.Unlock()
	theirsByIndex := map[uint64]time.Duration{}
	for idx, at := range theirs.Arrivals {
		if idx < uint64(len(puts)) {
			theirsByIndex[idx] = time.Unix(0, at).Sub(puts[idx])
		}
	}
	o, t, n := commonLatencies(latencyByIndex, theirsByIndex, puts, latencyWarmUp)
	if n == 0 {
		return Row{}, fmt.Errorf("no record was seen by both our Read (%d) and FlinkKinesisConsumer (%d) of %d put", len(latencyByIndex), len(theirsByIndex), produced)
	}
	b.cfg.logf("latency on Flink: %d put, ours saw %d, theirs %d, both after the warm-up %d; our job %v", produced, len(latencyByIndex), len(theirsByIndex), n, took.Round(time.Millisecond))
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/1e6) }
	pcts := func(d []time.Duration) string {
		return fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", ms(percentile(d, 50)), ms(percentile(d, 90)), ms(percentile(d, 99)), ms(percentile(d, 100)))
	}
	return Row{
		ID: fmt.Sprint(flinkLatencyRow),
		Name: fmt.Sprintf("Latency put → seen on the standalone Flink cluster beside FlinkKinesisConsumer (defaults, LATEST), parallelism %d, %d shards, server limits on, %d rec/s",
			shards, shards, b.cfg.LatencyRate),
		Measured: pcts(o) + " (streaming Read, default options, checkpoints every 1 s)",
		Baseline: pcts(t),
		Ratio:    float64(percentile(o, 99)) / float64(max(percentile(t, 99), time.Millisecond)),
		Target:   "p99 ≤ 1×",
		Notes: fmt.Sprintf("ours/theirs of p99s; p50 %.2f×; over the %s records both saw after a %v warm-up (%s put, ours saw %s, theirs %s)",
			float64(percentile(o, 50))/float64(max(percentile(t, 50), time.Millisecond)), group(int64(n)), latencyWarmUp,
			group(int64(produced)), group(int64(len(latencyByIndex))), group(int64(len(theirsByIndex)))),
		Rate:   float64(len(latencyByIndex)) / took.Seconds(),
		Counts: map[string]int64{"produced": int64(produced), "ours": int64(len(latencyByIndex)), "theirs": int64(len(theirsByIndex)), "both": int64(n)},
	}, nil
}

// commonLatencies returns, sorted, the latencies of ours and theirs over the records both
// saw that were put at least warmUp after the first of them was put, and their number.
func commonLatencies(ours, theirs map[uint64]time.Duration, puts []time.Time, warmUp time.Duration) (o, t []time.Duration, n int) {
	var first time.Time
	for idx := range ours {
		if _, ok := theirs[idx]; ok && idx < uint64(len(puts)) && (first.IsZero() || puts[idx].Before(first)) {
			first = puts[idx]
		}
	}
	for idx, d := range ours {
		l, ok := theirs[idx]
		if !ok || idx >= uint64(len(puts)) || puts[idx].Sub(first) < warmUp {
			continue
		}
		o = append(o, d)
		t = append(t, l)
	}
	slices.Sort(o)
	slices.Sort(t)
	return o, t, len(o)
}

// streamOnFlink runs a streaming Read of stream with default options and
// WithMaxReadTime(Config.LatencyTime) on the job server at parallelism, noting each record's
// latency in latencyByIndex (its workers run in this process).
func (b *Bench) streamOnFlink(ctx context.Context, url, stream string, parallelism int) error {
	saved := [...]any{*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism}
	*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism = b.cfg.FlinkEndpoint, "LOOPBACK", parallelism
	defer func() {
		*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism = saved[0].(string), saved[1].(string), saved[2].(int)
	}()
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.Read(s, stream, connect(url, kinesisio.WithMaxReadTime(b.cfg.LatencyTime))...)
	sink(s, beam.ParDo(s, &latencyFn{}, recs))
	opts := flinkrunner.Defaults
	opts.CheckpointingInterval = flinkLatencyCheckpointing
	if _, err := flinkrunner.Execute(ctx, p, opts); err != nil {
		return fmt.Errorf("running the streaming Read on the Flink job server at %s: %w", b.cfg.FlinkEndpoint, err)
	}
	return nil
}
