package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// manyShardsRecords is how many 100-byte records row 8 puts per shard.
const manyShardsRecords = 10

// rowsManyShards is row 8: ReadBounded from TRIM_HORIZON over streams of many shards
// (b.cfg.ManyShards, e.g. 1,000 and 10,000), each holding manyShardsRecords records. Per
// size: the job's wall time, the growth of the Go heap in use after the job (live memory
// per shard; the process's VmHWM only grows, so it is given as is), and the API calls per
// shard. Memory per shard that stays flat from the smaller size to the larger is the
// claim.
func (b *Bench) rowsManyShards(ctx context.Context) ([]Row, error) {
	var rows []Row
	var base float64
	for i, n := range b.cfg.ManyShards {
		r, perShard, err := b.rowManyShards(ctx, fmt.Sprintf("8%c", 'a'+i), n)
		if err != nil {
			return rows, err
		}
		if i == 0 {
			base = perShard
		}
		r.Ratio = perShard / base
		rows = append(rows, r)
	}
	return rows, nil
}

func (b *Bench) rowManyShards(ctx context.Context, id string, shards int) (Row, float64, error) {
	srv, err := kinesistest.Start()
	if err != nil {
		return Row{}, 0, fmt.Errorf("starting the Kinesis server: %w", err)
	}
	defer srv.Close()
	if err := srv.CreateStream("many", shards); err != nil {
		return Row{}, 0, fmt.Errorf("creating stream many: %w", err)
	}
	want := shards * manyShardsRecords
	if err := putPlain(ctx, srv.Client(), "many", want); err != nil {
		return Row{}, 0, err
	}
	resetCounters()
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	calls0 := srv.CallCounts()

	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.ReadBounded(s, "many", connect(srv.URL(), kinesisio.WithStartingPosition(kinesisio.TrimHorizon()))...)
	sink(s, beam.ParDo(s, &countFn{}, recs))
	start := time.Now()
	if _, err := run(ctx, p, "many-shards-"+fmt.Sprint(shards)); err != nil {
		return Row{}, 0, err
	}
	took := time.Since(start)
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	peakHeap := float64(m1.HeapInuse) - float64(m0.HeapInuse)
	got := seen.Load()
	if got != int64(want) {
		return Row{}, 0, fmt.Errorf("ReadBounded over %d shards read %d records, want %d", shards, got, want)
	}
	calls := srv.CallCounts()
	perShard := func(op string) float64 { return float64(calls[op]-calls0[op]) / float64(shards) }
	heapPerShard := max(peakHeap, 0) / float64(shards)
	b.cfg.logf("many shards %d: %v, heap in use +%.1f MiB", shards, took.Round(time.Millisecond), peakHeap/(1<<20))
	return Row{
		ID:   id,
		Name: fmt.Sprintf("ReadBounded over %s shards × %d records of 100 B", group(int64(shards)), manyShardsRecords),
		Measured: fmt.Sprintf("%.1f s wall; heap in use after the job +%.1f KiB per shard; peak RSS of the process %.0f MiB; per shard %.2f GetRecords, %.2f GetShardIterator",
			took.Seconds(), heapPerShard/1024, float64(vmHWM())/(1<<20), perShard("GetRecords"), perShard("GetShardIterator")),
		Baseline: "the first size's heap per shard",
		Target:   "flat per-shard memory",
		Notes:    fmt.Sprintf("ratio of heap per shard; %d records read (exact); ListShards calls %d", got, calls["ListShards"]-calls0["ListShards"]),
		Rate:     float64(got) / took.Seconds(),
		Counts:   map[string]int64{"records": got},
	}, heapPerShard, nil
}
