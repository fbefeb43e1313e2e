package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/testing/flink/flinkrest"
)

// bundleCostRow is the cost of flinkrunner's 100 ms bundles (--flink only).
const bundleCostRow = 15

// beamBundleTimeMills is Beam's own default bundle time on Flink, flinkrunner's before.
const beamBundleTimeMills = 1000

// bundleRun is one read of the backlog on Flink: its rate from first to last record and
// the CPU taken meanwhile, this process's (SDK workers and server) and the cluster's JVMs'.
type bundleRun struct {
	steady   time.Duration
	records  int64
	cpu      time.Duration
	clusterC time.Duration
}

func (r bundleRun) rate() float64 { return float64(r.records) / r.steady.Seconds() }

// cpuPerRecord is the CPU of both processes per record, in microseconds.
func (r bundleRun) cpuPerRecord() float64 {
	return float64(r.cpu+r.clusterC) / float64(time.Microsecond) / float64(r.records)
}

// rowsBundleCost is row 15: the backlog of row 10 read on Flink with flinkrunner's bundle
// time (100 ms) against Beam's (1,000 ms), by ReadBounded (15a) and by a streaming Read
// from TRIM_HORIZON (15b), alternating, twice each; the better run of each counts, CPU per
// record from the same run. The streaming job is cancelled once it has counted the backlog.
func (b *Bench) rowsBundleCost(ctx context.Context) ([]Row, error) {
	if b.cfg.FlinkEndpoint == "" || b.cfg.FlinkREST == "" {
		return nil, fmt.Errorf("row %d needs the Flink job server and cluster: --flink with $BEAMKINESIS_FLINK_ENDPOINT and $BEAMKINESIS_FLINK_REST (testing/flink/flink.sh start prints them)", bundleCostRow)
	}
	shards := b.cfg.Shards
	bl, err := b.newBacklog(ctx, shards)
	if err != nil {
		return nil, err
	}
	defer bl.srv.Close()
	rest := flinkRESTClient{&flinkrest.Cluster{REST: b.cfg.FlinkREST}}
	settings := []int64{flinkrunner.Defaults.MaxBundleTimeMills, beamBundleTimeMills}
	best := map[string]bundleRun{}
	keep := func(key string, r bundleRun) {
		if cur, ok := best[key]; !ok || r.rate() > cur.rate() {
			best[key] = r
		}
	}
	for round := range 2 {
		for _, ms := range settings {
			opts := flinkrunner.Defaults
			opts.MaxBundleTimeMills = ms
			r, err := b.bundleCostOnce(ctx, bl, opts, false, rest)
			if err != nil {
				return nil, err
			}
			b.cfg.logf("bundle cost, round %d, %d ms bundles, ReadBounded: %s, %.1f CPU-µs/record (this process %v, cluster %v)",
				round+1, ms, rate(r.rate(), "rec/s"), r.cpuPerRecord(), r.cpu.Round(time.Millisecond), r.clusterC.Round(time.Millisecond))
			keep(fmt.Sprint("bounded/", ms), r)
			r, err = b.bundleCostOnce(ctx, bl, opts, true, rest)
			if err != nil {
				return nil, err
			}
			b.cfg.logf("bundle cost, round %d, %d ms bundles, streaming Read: %s, %.1f CPU-µs/record (this process %v, cluster %v)",
				round+1, ms, rate(r.rate(), "rec/s"), r.cpuPerRecord(), r.cpu.Round(time.Millisecond), r.clusterC.Round(time.Millisecond))
			keep(fmt.Sprint("streaming/", ms), r)
		}
	}
	row := func(id, key, kind string) Row {
		n, o := best[fmt.Sprint(key, "/", settings[0])], best[fmt.Sprint(key, "/", settings[1])]
		return Row{
			ID: id,
			Name: fmt.Sprintf("Cost of flinkrunner's %d ms bundles: %s on the standalone Flink cluster, %d shards, parallelism %d, %s × 100 B backlog",
				settings[0], kind, shards, shards, group(bl.want)),
			Measured: fmt.Sprintf("%s steady, %.1f CPU-µs/record (%d ms bundles)", rate(n.rate(), "rec/s"), n.cpuPerRecord(), settings[0]),
			Baseline: fmt.Sprintf("%s steady, %.1f CPU-µs/record (Beam's %d ms)", rate(o.rate(), "rec/s"), o.cpuPerRecord(), settings[1]),
			Ratio:    n.rate() / o.rate(),
			Target:   "—",
			Notes: fmt.Sprintf("new/old throughput; CPU per record new/old %.2f× (this process: SDK workers and the server; plus the cluster's JVMs); better of 2 runs each, alternating; %s records each (exact)",
				n.cpuPerRecord()/o.cpuPerRecord(), group(n.records)),
			Rate:   n.rate(),
			Counts: map[string]int64{"new": n.records, "old": o.records},
		}
	}
	return []Row{row(fmt.Sprint(bundleCostRow, "a"), "bounded", "ReadBounded"), row(fmt.Sprint(bundleCostRow, "b"), "streaming", "streaming Read")}, nil
}

// bundleCostOnce reads the backlog once on the job server with opts, bounded or streaming.
func (b *Bench) bundleCostOnce(ctx context.Context, bl *backlog, opts flinkrunner.Options, streaming bool, rest flinkRESTClient) (bundleRun, error) {
	saved := [...]any{*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism}
	*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism = b.cfg.FlinkEndpoint, "LOOPBACK", b.cfg.Shards
	defer func() {
		*jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.Parallelism = saved[0].(string), saved[1].(string), saved[2].(int)
	}()
	resetCounters()
	p, s := beam.NewPipelineWithRoot()
	read := connect(bl.srv.URL(), kinesisio.WithStartingPosition(kinesisio.TrimHorizon()))
	var recs beam.PCollection
	if streaming {
		recs = kinesisio.Read(s, bl.stream, read...)
	} else {
		recs = kinesisio.ReadBounded(s, bl.stream, read...)
	}
	sink(s, beam.ParDo(s, &countFn{}, recs))
	running, err := rest.running(ctx)
	if err != nil {
		return bundleRun{}, err
	}
	done := make(chan error, 1)
	go func() {
		_, err := flinkrunner.Execute(ctx, p, opts)
		done <- err
	}()
	// The CPU from the first record counted to the last: the job's submission and start-up
	// are not the bundles' cost.
	sampled := make(chan bundleRun, 1)
	go func() {
		var r bundleRun
		for seen.Load() == 0 {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		cpu0, cluster0 := cpuTime(), clusterCPU()
		for seen.Load() < bl.want {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		r.cpu, r.clusterC = cpuTime()-cpu0, clusterCPU()-cluster0
		sampled <- r
	}()
	if streaming {
		// A streaming Go job on Flink does not end by itself: cancel it once it has counted
		// the backlog.
		for seen.Load() < bl.want {
			select {
			case err := <-done:
				return bundleRun{}, fmt.Errorf("the streaming Read on Flink ended after %d of %d records: %v", seen.Load(), bl.want, err)
			case <-ctx.Done():
				return bundleRun{}, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err := rest.cancelNew(context.WithoutCancel(ctx), running, "\x00"); err != nil {
			return bundleRun{}, err
		}
		<-done // cancelled
	} else if err := <-done; err != nil {
		return bundleRun{}, fmt.Errorf("running ReadBounded on the Flink job server at %s: %w", b.cfg.FlinkEndpoint, err)
	}
	if n := seen.Load(); n != bl.want {
		return bundleRun{}, fmt.Errorf("the read on Flink counted %d records, want %d", n, bl.want)
	}
	var r bundleRun
	select {
	case r = <-sampled:
	case <-time.After(5 * time.Second):
		return bundleRun{}, errors.New("the CPU sampler did not see the last record")
	}
	r.records = bl.want
	r.steady = time.Duration(lastEmit.Load() - firstEmit.Load())
	return r, nil
}

// clusterCPU is the user plus system CPU time of the processes of the cluster at
// $BEAMKINESIS_FLINK_CLUSTER_STATE (testing/flink/cluster.sh keeps each in a process group
// whose leader's pid is in <state>/<name>.pid), 0 if it cannot be read.
func clusterCPU() time.Duration {
	state := os.Getenv("BEAMKINESIS_FLINK_CLUSTER_STATE")
	pidFiles, _ := filepath.Glob(filepath.Join(state, "*.pid"))
	groups := map[string]bool{}
	for _, f := range pidFiles {
		if b, err := os.ReadFile(f); err == nil {
			groups[strings.TrimSpace(string(b))] = true
		}
	}
	if state == "" || len(groups) == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b)[i+1:])
		if len(f) < 13 || !groups[f[2]] {
			continue
		}
		u, errU := strconv.ParseInt(f[11], 10, 64)
		s, errS := strconv.ParseInt(f[12], 10, 64)
		if err := errors.Join(errU, errS); err == nil {
			ticks += u + s
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
