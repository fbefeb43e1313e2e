package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// flinkLatencyRow is the latency row beside Flink's own consumer (--flink only).
const flinkLatencyRow = 14

// flinkLatencyDrain is how long both jobs may still count after the producer stopped: ten
// of FlinkKinesisConsumer's 200 ms polls, eight of our 250 ms ones.
const flinkLatencyDrain = 2 * time.Second

// flinkLatencyCheckpointing is our job's checkpoint interval (ms), as in the Flink soak
// testing/REPORTS.md quotes for latency.
const flinkLatencyCheckpointing = 1000

// rowFlinkLatency is row 14: put → seen latency at Config.LatencyRate records/s, one
// producer writing each record to two streams of one server with the per-shard limits on,
// one for each side, read at the same time on the same cluster at parallelism equal to the
// shard count: a streaming Read with default options on the job server (checkpoints every
// second, as in the Flink soak; its DoFns in this process) against FlinkKinesisConsumer from
// LATEST with its defaults (a GetRecords call per shard every 200 ms), noting arrivals in
// its sink subtasks. Both clocks are this machine's. Our job starts reading some 15 s after
// submission, theirs in 1–2 s: the producer runs for Config.LatencyTime after both have
// seen a record, then both get flinkLatencyDrain to catch up and are cancelled (a Go
// streaming job on Flink with checkpointing on does not end by itself). The percentiles are
// over the records both saw, without those put in the first second after the first of them
// (latencyWarmUp).
//
// 14a reads with our default poll interval (250 ms), 14b with theirs (200 ms,
// WithPollInterval), one after the other.
func (b *Bench) rowsFlinkLatency(ctx context.Context) ([]Row, error) {
	var rows []Row
	for _, v := range []struct {
		id   string
		poll time.Duration
	}{{"a", 0}, {"b", flinkKinesisPollInterval}} {
		r, err := b.rowFlinkLatency(ctx, fmt.Sprint(flinkLatencyRow, v.id), v.poll)
		if err != nil {
			return rows, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// flinkKinesisPollInterval is FlinkKinesisConsumer's default time between GetRecords calls
// on a shard (flink.shard.getrecords.intervalmillis).
const flinkKinesisPollInterval = 200 * time.Millisecond

// rowFlinkLatency is one run of row 14, our read with WithPollInterval(poll) unless poll is 0.
func (b *Bench) rowFlinkLatency(ctx context.Context, id string, poll time.Duration) (Row, error) {
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
	running, err := job.rest.running(ctx)
	if err != nil {
		return Row{}, err
	}

	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	var (
		wg          sync.WaitGroup
		produced    uint64
		puts        []time.Time
		prodErr     error
		theirs      flinkKinesisRun
		jobErr      error
		oursErr     error
		theirsSeen  atomic.Bool
		oursStopped = make(chan struct{})
		drained     = make(chan struct{})
	)
	wg.Add(3)
	go func() {
		defer wg.Done()
		produced, prodErr = produce(pctx, srv.Client(), []string{"lat", "lat-flink"}, b.cfg.LatencyRate, &puts)
	}()
	go func() {
		defer wg.Done()
		theirs, jobErr = job.run(ctx, srv.URL(), "lat-flink", shards, flinkKinesisTimeout, func(s subtaskStatus) bool {
			theirsSeen.Store(s.Records > 0)
			select {
			case <-drained:
				return true
			default:
				return false
			}
		}, "--initpos=LATEST", "--latency=true")
	}()
	start := time.Now()
	go func() {
		defer wg.Done()
		defer close(oursStopped)
		var opts []kinesisio.ReadOption
		if poll > 0 {
			opts = append(opts, kinesisio.WithPollInterval(poll))
		}
		oursErr = b.streamOnFlink(ctx, srv.URL(), "lat", shards, opts...)
	}()

	// Both reading, then the measured window, then the drain.
	for seen.Load() == 0 || !theirsSeen.Load() {
		select {
		case <-ctx.Done():
			return Row{}, ctx.Err()
		case <-oursStopped:
			return Row{}, fmt.Errorf("our streaming Read on Flink ended before it read a record: %w", oursErr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(start) > flinkKinesisTimeout {
			return Row{}, fmt.Errorf("after %v our Read has seen %d records and FlinkKinesisConsumer seen any: %v", flinkKinesisTimeout, seen.Load(), theirsSeen.Load())
		}
	}
	reading := time.Since(start)
	b.cfg.logf("latency on Flink: both reading %v after submission; producing for %v more", reading.Round(time.Millisecond), b.cfg.LatencyTime)
	select {
	case <-ctx.Done():
	case <-time.After(b.cfg.LatencyTime):
	}
	stopProducer()
	select {
	case <-ctx.Done():
	case <-time.After(flinkLatencyDrain):
	}
	close(drained)
	cancelErr := job.rest.cancelNew(context.WithoutCancel(ctx), running, "flink-kinesis-anchor")
	wg.Wait()
	if oursErr != nil {
		b.cfg.logf("our streaming Read on Flink ended, cancelled: %v", oursErr)
	}
	if err := errors.Join(prodErr, jobErr, cancelErr); err != nil {
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
	b.cfg.logf("latency on Flink: %d put, ours saw %d, theirs %d, both after the warm-up %d", produced, len(latencyByIndex), len(theirsByIndex), n)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/1e6) }
	pcts := func(d []time.Duration) string {
		return fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", ms(percentile(d, 50)), ms(percentile(d, 90)), ms(percentile(d, 99)), ms(percentile(d, 100)))
	}
	ours := "streaming Read, default options, checkpoints every 1 s"
	if poll > 0 {
		ours = fmt.Sprintf("streaming Read, WithPollInterval(%v), checkpoints every 1 s", poll)
	}
	return Row{
		ID: id,
		Name: fmt.Sprintf("Latency put → seen on the standalone Flink cluster beside FlinkKinesisConsumer (defaults, LATEST), parallelism %d, %d shards, server limits on, %d rec/s for %v",
			shards, shards, b.cfg.LatencyRate, b.cfg.LatencyTime),
		Measured: pcts(o) + " (" + ours + ")",
		Baseline: pcts(t),
		Ratio:    float64(percentile(o, 99)) / float64(max(percentile(t, 99), time.Millisecond)),
		Target:   "p99 ≤ 1×",
		Notes: fmt.Sprintf("ours/theirs of p99s; p50 %.2f×; over the %s records both saw after a %v warm-up (%s put, ours saw %s, theirs %s); both reading %.1f s after submission",
			float64(percentile(o, 50))/float64(max(percentile(t, 50), time.Millisecond)), group(int64(n)), latencyWarmUp,
			group(int64(produced)), group(int64(len(latencyByIndex))), group(int64(len(theirsByIndex))), reading.Seconds()),
		Rate:   float64(len(latencyByIndex)) / b.cfg.LatencyTime.Seconds(),
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

// streamOnFlink runs a streaming Read of stream with default options and opts on the job
// server at parallelism until the job is cancelled, noting each record's latency in
// latencyByIndex (its workers run in this process).
func (b *Bench) streamOnFlink(ctx context.Context, url, stream string, parallelism int, opts ...kinesisio.ReadOption) error {
	saved := [...]any{*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism}
	*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism = b.cfg.FlinkEndpoint, "LOOPBACK", parallelism
	defer func() {
		*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism = saved[0].(string), saved[1].(string), saved[2].(int)
	}()
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.Read(s, stream, connect(url, opts...)...)
	sink(s, beam.ParDo(s, &latencyFn{}, recs))
	fopts := flinkrunner.Defaults
	fopts.CheckpointingInterval = flinkLatencyCheckpointing
	if _, err := flinkrunner.Execute(ctx, p, fopts); err != nil {
		return fmt.Errorf("running the streaming Read on the Flink job server at %s: %w", b.cfg.FlinkEndpoint, err)
	}
	return nil
}
