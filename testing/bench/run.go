package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Bench runs the rows of one report, sharing the read server between rows 1 and 2.
type Bench struct {
	cfg  Config
	read *readSetup
	// flinkKinesis is the anchor job of rows 12 to 14, uploaded once.
	flinkKinesis *flinkKinesisJob
	closers      []func() error
}

// NewBench returns a Bench for cfg.
func NewBench(cfg Config) *Bench { return &Bench{cfg: cfg} }

// Close releases the servers the rows started.
func (b *Bench) Close() {
	for _, c := range b.closers {
		_ = c()
	}
	b.closers = nil
	b.read = nil
	b.flinkKinesis = nil
}

// Run measures the selected rows: the codec first, while the process is quiet, then the
// reads (whose server is closed after them, as it holds every record in memory), the write,
// memory and latency. It returns the rows in table order, and those measured before an
// error.
func (b *Bench) Run(ctx context.Context) ([]Row, error) {
	defer b.Close()
	one := func(f func(context.Context) (Row, error)) func(context.Context) ([]Row, error) {
		return func(ctx context.Context) ([]Row, error) {
			r, err := f(ctx)
			return []Row{r}, err
		}
	}
	steps := []struct {
		n int
		f func(context.Context) ([]Row, error)
	}{
		{4, b.rowsCodec}, {1, one(b.rowRead)}, {2, one(b.rowDeaggregate)},
		{0, func(context.Context) ([]Row, error) { b.Close(); return nil, nil }},
		{3, one(b.rowWrite)}, {5, one(b.rowMemory)}, {6, b.rowsLatency}, {7, one(b.rowIdle)}, {8, b.rowsManyShards}, {queueRow, one(b.rowQueue)},
		{flinkRow, one(b.rowFlink)}, {flinkKinesisRow, b.rowsFlinkKinesis}, {flinkScalingRow, b.rowsFlinkScaling},
		{flinkLatencyRow, b.rowsFlinkLatency}, {bundleCostRow, b.rowsBundleCost}, {queueFlinkRow, b.rowsQueueFlink},
	}
	var rows []Row
	for _, s := range steps {
		if s.n == 0 {
			_, _ = s.f(ctx)
			continue
		}
		if !b.cfg.row(s.n) || (flinkRows[s.n] && b.cfg.FlinkEndpoint == "" && !b.cfg.Rows[s.n]) {
			continue // rows 10, 12 to 15 and 17 run with --flink only; asked for without it, they fail
		}
		b.cfg.logf("row %d", s.n)
		rs, err := s.f(ctx)
		if err != nil {
			return sortRows(rows), fmt.Errorf("row %d: %w", s.n, err)
		}
		rows = append(rows, rs...)
	}
	return sortRows(rows), nil
}

func sortRows(rows []Row) []Row {
	slices.SortStableFunc(rows, func(a, b Row) int { return strings.Compare(a.ID, b.ID) })
	return rows
}
