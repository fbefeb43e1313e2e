package main

// This connector's side of the --anchors pass: ReadBounded and Write on Prism in this
// process, with this process's CPU and peak RSS; what the read emits is tallied into the
// multiset Anchor.java computes.

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func init() {
	register.DoFn2x0[kinesisio.Record, func(int)](&tallyFn{})
}

// The Go pipelines run on Prism in loopback mode: tallyFn reports through these.
var (
	tallyMu    sync.Mutex
	tallySet   multiset
	tallySpans = map[string]shardSpan{}
	tallyStart time.Time
)

// tallyFn adds each record to the run's multiset and notes per shard when its first and
// last records arrived. It emits its count per bundle, to give the read's stage an output
// (see countFn).
type tallyFn struct {
	set   multiset
	spans map[string]shardSpan
}

func (f *tallyFn) StartBundle(func(int)) {
	f.set = multiset{}
	f.spans = map[string]shardSpan{}
}

func (f *tallyFn) ProcessElement(r kinesisio.Record, _ func(int)) {
	f.set.add(r.PartitionKey, r.Data)
	now := time.Since(tallyStart).Seconds()
	s, ok := f.spans[r.ShardID]
	if !ok {
		s.First = now
	}
	s.Records++
	s.Last = now
	f.spans[r.ShardID] = s
}

func (f *tallyFn) FinishBundle(emit func(int)) {
	tallyMu.Lock()
	tallySet.Count += f.set.Count
	tallySet.Sum += f.set.Sum
	for id, s := range f.spans {
		all, ok := tallySpans[id]
		if !ok || s.First < all.First {
			all.First = s.First
		}
		all.Last = max(all.Last, s.Last)
		all.Records += s.Records
		tallySpans[id] = all
	}
	tallyMu.Unlock()
	emit(int(f.set.Count))
}

// processUsage measures this process: CPU since it was made, and peak RSS since it was
// made (the kernel's high-water mark is reset through /proc/self/clear_refs).
type processUsage struct{ cpu time.Duration }

func startUsage() processUsage {
	runtime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	return processUsage{cpu: selfCPU()}
}

func (u processUsage) stop(r *anchorRun) {
	r.CPU = selfCPU() - u.cpu
	r.PeakRSS = vmHWM()
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmHWM reads this process's peak RSS from /proc/self/status.
func vmHWM() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// oursRead reads stream from TRIM_HORIZON with ReadBounded and tallies what it emits.
func oursRead(ctx context.Context, url, stream string, opts ...kinesisio.ReadOption) (anchorRun, error) {
	tallyMu.Lock()
	tallySet, tallySpans = multiset{}, map[string]shardSpan{}
	tallyMu.Unlock()
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.ReadBounded(s, stream, connect(url, append([]kinesisio.ReadOption{kinesisio.WithStartingPosition(kinesisio.TrimHorizon())}, opts...)...)...)
	beam.ParDo0(s, discard, stats.Sum(s, beam.ParDo(s, &tallyFn{}, recs)))
	u := startUsage()
	tallyStart = time.Now()
	_, err := run(ctx, p, "anchors-read-"+stream)
	r := anchorRun{Wall: time.Since(tallyStart), Complete: err == nil}
	u.stop(&r)
	if err != nil {
		return r, err
	}
	tallyMu.Lock()
	r.Got, r.Shards = tallySet, tallySpans
	tallyMu.Unlock()
	return r, nil
}

// oursWrite writes messages 0..n-1 to stream with Write and aggregation on.
func oursWrite(ctx context.Context, url, stream string, n int) (anchorRun, error) {
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.ParDo(s, &genMessagesFn{N: n}, beam.Impulse(s))
	failed := kinesisio.Write(s, stream, msgs, connect(url, kinesisio.WithAggregation())...)
	beam.ParDo0(s, discardFailures, stats.CountElms(s, failed))
	u := startUsage()
	start := time.Now()
	_, err := run(ctx, p, "anchors-write-"+stream)
	r := anchorRun{Wall: time.Since(start), Complete: err == nil}
	u.stop(&r)
	return r, err
}
