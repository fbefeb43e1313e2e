package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
)

//go:embed kpl-codec.js
var nodeCodecScript []byte

// codecVectors returns n user records of 100 random data bytes with distinct 36-character
// partition keys (UUID-sized), as kpl's benchmarks use.
func codecVectors(n int) []kpl.UserRecord {
	rng := rand.New(rand.NewPCG(7, 7))
	recs := make([]kpl.UserRecord, n)
	for i := range recs {
		data := make([]byte, recordSize)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		k := make([]byte, 18)
		for j := range k {
			k[j] = byte(rng.Uint32())
		}
		recs[i] = kpl.UserRecord{PartitionKey: hex.EncodeToString(k), Data: data}
	}
	return recs
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// codecFigures are user records per CPU-second and allocations per user record.
type codecFigures struct {
	Records         int64
	PerCPUSecond    float64
	AllocsPerRecord float64
}

// goAggregate aggregates total user records, cycling through vecs, into 51,200-byte
// aggregates (the writer's default), and returns the figures and the user records of each
// aggregate of the first pass.
func goAggregate(vecs []kpl.UserRecord, total int) (codecFigures, [][]kpl.UserRecord, []kpl.KinesisRecord, error) {
	a := kpl.NewAggregator(51200, 1<<30)
	var groups [][]kpl.UserRecord
	var built []kpl.KinesisRecord
	from := 0
	runtime.GC()
	m0, c0 := mallocs(), cpuTime()
	for i := range total {
		r := vecs[i%len(vecs)]
		if !a.WouldFit(r) {
			kr, err := a.Build()
			if err != nil {
				return codecFigures{}, nil, nil, fmt.Errorf("building an aggregate: %w", err)
			}
			if i <= len(vecs) {
				groups = append(groups, vecs[from:i])
				built = append(built, kr)
				from = i
			}
			a.Reset()
		}
		if err := a.Add(r); err != nil {
			return codecFigures{}, nil, nil, fmt.Errorf("aggregating: %w", err)
		}
	}
	cpu, allocs := cpuTime()-c0, mallocs()-m0
	return codecFigures{Records: int64(total), PerCPUSecond: float64(total) / cpu.Seconds(), AllocsPerRecord: float64(allocs) / float64(total)}, groups, built, nil
}

// goDeaggregate splits the aggregates round and round until total user records.
func goDeaggregate(built []kpl.KinesisRecord, total int) (codecFigures, error) {
	runtime.GC()
	n := 0
	m0, c0 := mallocs(), cpuTime()
	for n < total {
		for _, kr := range built {
			recs, ok, err := kpl.Deaggregate(kr.Data)
			if err != nil || !ok {
				return codecFigures{}, fmt.Errorf("deaggregating: aggregated %v: %w", ok, err)
			}
			n += len(recs)
			if n >= total {
				break
			}
		}
	}
	cpu, allocs := cpuTime()-c0, mallocs()-m0
	return codecFigures{Records: int64(n), PerCPUSecond: float64(n) / cpu.Seconds(), AllocsPerRecord: float64(allocs) / float64(n)}, nil
}

type nodeFigures struct {
	Aggregate, Deaggregate struct {
		Records int64   `json:"records"`
		CPU     float64 `json:"cpu_s"`
	}
}

// nodeCodec runs kpl-codec.js on the same groups. It returns an error wrapping
// emulators.ErrUnavailable when node or aws-kinesis-agg is not installed.
func nodeCodec(ctx context.Context, groups [][]kpl.UserRecord, total int) (nodeFigures, error) {
	pkg, err := emulators.PackageDir("aws-kinesis-agg")
	if err != nil {
		return nodeFigures{}, err
	}
	node, err := emulators.Node()
	if err != nil {
		return nodeFigures{}, err
	}
	type rec struct {
		PK   string `json:"pk"`
		Data string `json:"data"`
	}
	in := struct {
		Groups [][]rec `json:"groups"`
		Total  int     `json:"total"`
	}{Total: total}
	for _, g := range groups {
		var rs []rec
		for _, r := range g {
			rs = append(rs, rec{r.PartitionKey, base64.StdEncoding.EncodeToString(r.Data)})
		}
		in.Groups = append(in.Groups, rs)
	}
	req, err := json.Marshal(in)
	if err != nil {
		return nodeFigures{}, fmt.Errorf("encoding the node request: %w", err)
	}
	dir, err := os.MkdirTemp("", "beamkinesis-bench")
	if err != nil {
		return nodeFigures{}, fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "kpl-codec.js")
	if err := os.WriteFile(script, nodeCodecScript, 0o644); err != nil {
		return nodeFigures{}, fmt.Errorf("writing the node script: %w", err)
	}
	cmd := exec.CommandContext(ctx, node, script, pkg)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nodeFigures{}, fmt.Errorf("node %s: %w: %s", script, err, stderr.String())
	}
	var f nodeFigures
	if err := json.Unmarshal(out, &f); err != nil {
		return nodeFigures{}, fmt.Errorf("decoding node's answer %q: %w", out, err)
	}
	return f, nil
}

// rowsCodec are rows 4a (aggregate) and 4b (deaggregate).
func (b *Bench) rowsCodec(ctx context.Context) ([]Row, error) {
	total := b.cfg.CodecRecords
	vecs := codecVectors(4096)
	ag, groups, built, err := goAggregate(vecs, total)
	if err != nil {
		return nil, err
	}
	de, err := goDeaggregate(built, total)
	if err != nil {
		return nil, err
	}
	b.cfg.logf("codec: aggregate %.0f rec/CPU-s, deaggregate %.0f rec/CPU-s", ag.PerCPUSecond, de.PerCPUSecond)
	rows := []Row{
		{ID: "4a", Name: fmt.Sprintf("KPL aggregate, %s × (36 B key, 100 B data) into 51,200 B aggregates", group(int64(total))),
			Measured: fmt.Sprintf("%s, %.2f allocs/record", rate(ag.PerCPUSecond, "rec/CPU-s"), ag.AllocsPerRecord),
			Target:   "≥ 1,000,000 rec/s/core", Rate: ag.PerCPUSecond, Counts: map[string]int64{"records": ag.Records}},
		{ID: "4b", Name: fmt.Sprintf("KPL deaggregate (MD5 checked), %s user records", group(de.Records)),
			Measured: fmt.Sprintf("%s, %.2f allocs/record", rate(de.PerCPUSecond, "rec/CPU-s"), de.AllocsPerRecord),
			Target:   "≥ 1,000,000 rec/s/core", Rate: de.PerCPUSecond, Counts: map[string]int64{"records": de.Records}},
	}
	nf, err := nodeCodec(ctx, groups, total)
	switch {
	case errors.Is(err, emulators.ErrUnavailable):
		for i := range rows {
			rows[i].Baseline = "aws-kinesis-agg (node): not installed"
			rows[i].Notes = "install with: cd testing/emulators && npm ci"
		}
	case err != nil:
		return nil, err
	default:
		na := float64(nf.Aggregate.Records) / nf.Aggregate.CPU
		nd := float64(nf.Deaggregate.Records) / nf.Deaggregate.CPU
		b.cfg.logf("codec, node: aggregate %.0f rec/CPU-s, deaggregate %.0f rec/CPU-s", na, nd)
		rows[0].Baseline = rate(na, "rec/CPU-s") + " aws-kinesis-agg 4.x on node " + nodeVersion(ctx)
		rows[0].Ratio = ag.PerCPUSecond / na
		rows[0].Notes = "same vectors and aggregate boundaries; CPU time of each process"
		rows[1].Baseline = rate(nd, "rec/CPU-s") + " aws-kinesis-agg deaggregateSync, checksums on"
		rows[1].Ratio = de.PerCPUSecond / nd
		rows[1].Notes = "node splits its own aggregates of the same records"
	}
	return rows, nil
}

func nodeVersion(ctx context.Context) string {
	node, err := emulators.Node()
	if err != nil {
		return ""
	}
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(out))
}
