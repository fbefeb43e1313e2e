package main

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// flinkRow is the number of the row that needs a Flink job server (--flink).
const flinkRow = 10

// flinkRows are the rows that run with --flink only.
var flinkRows = map[int]bool{flinkRow: true, flinkKinesisRow: true, flinkScalingRow: true, flinkLatencyRow: true, bundleCostRow: true, queueFlinkRow: true}

// rowFlink is row 10 (issue #18's row e): ReadBounded from TRIM_HORIZON on the standalone
// Flink cluster (testing/flink/flink.sh) with --parallelism equal to the stream's shard
// count, against the goroutine-per-shard GetRecords loop of row 1 over the same stream of
// the same server. Row 1 on Prism reads a bundle's shards one after another; here every
// shard has a task of its own. The two alternate, twice each, and the better run of each
// counts, as in row 1. The SDK workers run in this process (LOOPBACK), on the same cores as
// the server and the loop.
func (b *Bench) rowFlink(ctx context.Context) (Row, error) {
	if b.cfg.FlinkEndpoint == "" {
		return Row{}, fmt.Errorf("row %d needs a Flink job server: --flink with $BEAMKINESIS_FLINK_ENDPOINT (testing/flink/flink.sh start prints it)", flinkRow)
	}
	srv, err := kinesistest.Start()
	if err != nil {
		return Row{}, fmt.Errorf("starting the Kinesis server: %w", err)
	}
	defer srv.Close()
	shards := b.cfg.Shards
	if err := srv.CreateStream("flink", shards); err != nil {
		return Row{}, fmt.Errorf("creating stream flink: %w", err)
	}
	if err := putPlain(ctx, srv.Client(), "flink", b.cfg.Records); err != nil {
		return Row{}, err
	}
	var (
		best     *readRun
		loopBest time.Duration
	)
	for round := range 2 {
		start := time.Now()
		n, err := getRecordsLoop(ctx, srv.Client(), "flink")
		d := time.Since(start)
		if err != nil {
			return Row{}, fmt.Errorf("GetRecords loop: %w", err)
		}
		if n != int64(b.cfg.Records) {
			return Row{}, fmt.Errorf("GetRecords loop read %d records, want %d", n, b.cfg.Records)
		}
		b.cfg.logf("GetRecords loop %d: %d records in %v", round+1, n, d.Round(time.Millisecond))
		if loopBest == 0 || d < loopBest {
			loopBest = d
		}
		r, err := readBoundedOnFlink(ctx, b.cfg.FlinkEndpoint, srv.URL(), "flink", shards)
		if err != nil {
			return Row{}, err
		}
		if r.Records != int64(b.cfg.Records) {
			return Row{}, fmt.Errorf("ReadBounded on Flink read %d records, want %d", r.Records, b.cfg.Records)
		}
		b.cfg.logf("ReadBounded on Flink %d: %d records in %v (start-up %v, steady %v, %d shards emitting at once)", round+1, r.Records,
			r.Total.Round(time.Millisecond), r.Startup.Round(time.Millisecond), r.Steady.Round(time.Millisecond), r.Overlap)
		if best == nil || r.Steady < best.Steady {
			best = &r
		}
	}
	loopRate := float64(b.cfg.Records) / loopBest.Seconds()
	return Row{
		ID:   fmt.Sprint(flinkRow),
		Name: fmt.Sprintf("Read on the standalone Flink cluster: ReadBounded, --parallelism=%d, %d shards, %s × 100 B", shards, shards, group(int64(b.cfg.Records))),
		Measured: fmt.Sprintf("%s steady; %s over the whole job (%.1f s, of which %.1f s submission and start-up)",
			rate(best.steadyRate(), "rec/s"), rate(best.rate(), "rec/s"), best.Total.Seconds(), best.Startup.Seconds()),
		Baseline: rate(loopRate, "rec/s") + fmt.Sprintf(" (GetRecords loop, %d goroutines, one per shard)", shards),
		Ratio:    best.steadyRate() / loopRate,
		Target:   "≥ 0.8× (steady)",
		Notes: fmt.Sprintf("%d of %d shards emitting at once (row 1 on Prism: one at a time); whole job incl. Flink's submission %.2f×; records read %s (exact)",
			best.Overlap, shards, best.rate()/loopRate, group(best.Records)),
		Rate:   best.steadyRate(),
		Counts: map[string]int64{"flink_records": best.Records},
	}, nil
}

// readBoundedOnFlink runs readBounded's pipeline on the Flink job server at endpoint with
// the given parallelism, its workers in this process.
func readBoundedOnFlink(ctx context.Context, endpoint, url, stream string, parallelism int) (readRun, error) {
	defer flinkJobFlags(endpoint, parallelism)()
	resetCounters()
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.ReadBounded(s, stream, connect(url, kinesisio.WithStartingPosition(kinesisio.TrimHorizon()))...)
	sink(s, beam.ParDo(s, &countFn{}, recs))
	start := time.Now()
	_, err := flinkrunner.Execute(ctx, p, flinkrunner.Defaults)
	total := time.Since(start)
	if err != nil {
		return readRun{}, fmt.Errorf("running ReadBounded on the Flink job server at %s: %w", endpoint, err)
	}
	r := readRun{Records: seen.Load(), Total: total}
	r.Overlap = maxOverlap(takeShardSpans())
	if f := firstEmit.Load(); f != 0 {
		r.Startup = time.Unix(0, f).Sub(start)
		r.Steady = time.Duration(lastEmit.Load() - f)
	}
	return r, nil
}

// flinkJobFlags points the pipelines run next at the Flink job server at endpoint, with the
// given parallelism and their workers in this process (LOOPBACK), and returns a function
// that puts the flags back.
func flinkJobFlags(endpoint string, parallelism int) (restore func()) {
	saved := [...]any{*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism}
	*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism = endpoint, "LOOPBACK", parallelism
	return func() {
		*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism = saved[0].(string), saved[1].(string), saved[2].(int)
	}
}
