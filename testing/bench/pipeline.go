package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism" // registers "prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func init() {
	register.DoFn2x0[kinesisio.Record, func(int)](&countFn{})
	register.DoFn2x0[kinesisio.Record, func(int)](&latencyFn{})
	register.DoFn2x0[[]byte, func(kinesisio.Message)](&genMessagesFn{})
	register.Emitter1[int]()
	register.Emitter1[kinesisio.Message]()
	register.Function1x0(discard)
}

// The pipelines run on Prism in loopback mode, so their DoFns run in this process and report
// through these variables. One pipeline runs at a time.
var (
	seen                atomic.Int64
	firstEmit, lastEmit atomic.Int64 // UnixNano
	latencyMu           sync.Mutex
	latencyByIndex      map[uint64]time.Duration
	benchRunner         = "prism"
)

func resetCounters() {
	takeShardSpans()
	seen.Store(0)
	firstEmit.Store(0)
	lastEmit.Store(0)
}

func note(now int64) {
	if seen.Add(1) == 1 {
		firstEmit.Store(now)
	}
	lastEmit.Store(now)
}

// countFn counts records, notes when the first and the last were emitted, and when each
// shard's first and last were (in a map of its own, merged at the end of the bundle, to keep
// locks off the per-record path). It emits its count per bundle: a downstream aggregation
// gives the read's stage an output. (Prism's bundle loop spins on a stage with no output at
// all, as kinesisio's read benchmark notes.)
type countFn struct {
	n     int
	spans map[string]span
}

// span is when a shard's first and last records were emitted, UnixNano.
type span struct{ first, last int64 }

var (
	spansMu    sync.Mutex
	shardSpans = map[string]span{}
)

func (f *countFn) StartBundle(func(int)) {
	f.n = 0
	f.spans = map[string]span{}
}

func (f *countFn) ProcessElement(r kinesisio.Record, _ func(int)) {
	now := time.Now().UnixNano()
	note(now)
	f.n++
	s := f.spans[r.ShardID]
	if s.first == 0 {
		s.first = now
	}
	s.last = now
	f.spans[r.ShardID] = s
}

func (f *countFn) FinishBundle(emit func(int)) {
	spansMu.Lock()
	for id, s := range f.spans {
		all, ok := shardSpans[id]
		if !ok || s.first < all.first {
			all.first = s.first
		}
		all.last = max(all.last, s.last)
		shardSpans[id] = all
	}
	spansMu.Unlock()
	emit(f.n)
}

// takeShardSpans returns and forgets the shard spans noted so far.
func takeShardSpans() []span {
	spansMu.Lock()
	defer spansMu.Unlock()
	var out []span
	for _, s := range shardSpans {
		out = append(out, s)
	}
	clear(shardSpans)
	return out
}

// maxOverlap is the most spans that overlap at one time.
func maxOverlap(spans []span) int {
	best := 0
	for _, s := range spans {
		n := 0
		for _, t := range spans {
			if t.first <= s.first && s.first <= t.last {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// latencyFn records, per record, the time from its put (the first 8 bytes of its data,
// UnixNano, then the producer's index) to now.
type latencyFn struct{ n int }

func (f *latencyFn) StartBundle(func(int)) { f.n = 0 }

func (f *latencyFn) ProcessElement(r kinesisio.Record, _ func(int)) {
	now := time.Now()
	note(now.UnixNano())
	f.n++
	if len(r.Data) < 16 {
		return
	}
	put := int64(binary.BigEndian.Uint64(r.Data))
	idx := binary.BigEndian.Uint64(r.Data[8:])
	latencyMu.Lock()
	latencyByIndex[idx] = now.Sub(time.Unix(0, put))
	latencyMu.Unlock()
}

func (f *latencyFn) FinishBundle(emit func(int)) { emit(f.n) }

func discard(int) {}

// genMessagesFn emits N messages of 100-byte data with distinct 8-byte keys.
type genMessagesFn struct{ N int }

func (f *genMessagesFn) ProcessElement(_ []byte, emit func(kinesisio.Message)) {
	for i := range f.N {
		emit(kinesisio.Message{PartitionKey: benchKey(i), Data: benchData(i)})
	}
}

// sink gives col's stage an output, as countFn's comment explains.
func sink(s beam.Scope, counts beam.PCollection) {
	beam.ParDo0(s, discard, stats.Sum(s, counts))
}

// cpuProfilePrefix, when set, makes run write a CPU profile of each pipeline to
// cpuProfilePrefix + "." + its name, so that a profile shows the connector's pipeline
// alone, without the data set-up and the baselines.
var cpuProfilePrefix string

// run runs p on Prism; name names its CPU profile.
func run(ctx context.Context, p *beam.Pipeline, name string) (beam.PipelineResult, error) {
	if cpuProfilePrefix != "" {
		f, err := os.Create(cpuProfilePrefix + "." + name)
		if err != nil {
			return nil, fmt.Errorf("creating the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	pr, err := beam.Run(ctx, benchRunner, p)
	if err != nil {
		return nil, fmt.Errorf("running the pipeline on %s: %w", benchRunner, err)
	}
	return pr, nil
}

// counter sums a committed counter of a pipeline's metrics.
func counter(pr beam.PipelineResult, namespace, name string) int64 {
	if pr == nil {
		return 0
	}
	var total int64
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		if c.Key.Namespace == namespace && c.Key.Name == name {
			total += c.Committed
		}
	}
	return total
}
