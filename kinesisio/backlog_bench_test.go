package kinesisio

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// Load of BenchmarkBacklogWhileAProducerOutrunsTheReader: the producer puts
// backlogProducerBatch records of backlogRecordBytes every backlogProducerTick (2,000
// records, 200 KB a second), the reader reads backlogCallRecords a call and the runner
// resumes it no sooner than backlogRunnerPause after each call (at most 1,000 records a
// second).
const (
	backlogProducerBatch = 20
	backlogRecordBytes   = 100
	backlogProducerTick  = 10 * time.Millisecond
	backlogCallRecords   = 50
	backlogRunnerPause   = 50 * time.Millisecond
	// backlogWarmUp is when the comparison starts: the reader is then about a second
	// behind, past the half second below which enhanced fan-out reports no backlog
	// (inFlightTolerance).
	backlogWarmUp = 2 * time.Second
)

// BenchmarkBacklogWhileAProducerOutrunsTheReader measures the backlog a streaming Read
// reports to the runner against the true unread bytes, on the real clock, while a producer
// puts twice as fast as the reader reads, polling and with enhanced fan-out. It drives the
// read's SDF methods as a runner's harness does: ProcessElement until the reader
// checkpoints, TrySplit(0) for the residual, RestrictionSize of the residual (the size
// Dataflow scales on), then resumes the residual after the continuation's delay. After each
// call it compares that size with the bytes the server holds after the residual's start
// and reports the median, 90th percentile and worst deviation after two seconds of warm-up.
//
//	go test -run '^$' -bench BenchmarkBacklogWhileAProducerOutrunsTheReader -benchtime 1x ./kinesisio/
func BenchmarkBacklogWhileAProducerOutrunsTheReader(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts []ReadOption
	}{
		{"polling", []ReadOption{WithMaxRecordsPerRead(backlogCallRecords)}},
		{"enhanced fan-out", []ReadOption{WithEnhancedFanOut("backlog-bench")}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				r := runBacklogBench(b, 8*time.Second, mode.opts...)
				b.ReportMetric(100*r.quantile(0.5), "median-dev-%")
				b.ReportMetric(100*r.quantile(0.9), "p90-dev-%")
				b.ReportMetric(100*r.quantile(1), "worst-dev-%")
				b.ReportMetric(float64(len(r.devs)), "checkpoints")
				b.ReportMetric(float64(r.lastUnread), "final-unread-B")
				b.ReportMetric(r.lastSize, "final-size-B")
				b.Logf("%s: %d checkpoints compared, %d records read of %d put; at the end %.0f B reported, %d B unread; |deviation| median %.1f %%, p90 %.1f %%, worst %.1f %% (signed median %+.1f %%)",
					mode.name, len(r.devs), r.read, r.put, r.lastSize, r.lastUnread,
					100*r.quantile(0.5), 100*r.quantile(0.9), 100*r.quantile(1), 100*r.signedMedian())
			}
		})
	}
}

// backlogResult is one run of the backlog bench.
type backlogResult struct {
	devs       []float64 // reported size / true unread − 1, one per checkpoint after warm-up
	read, put  int
	lastSize   float64
	lastUnread int64
}

// quantile returns the q-quantile of the absolute deviations.
func (r backlogResult) quantile(q float64) float64 {
	if len(r.devs) == 0 {
		return 0
	}
	abs := make([]float64, len(r.devs))
	for i, d := range r.devs {
		abs[i] = max(d, -d)
	}
	slices.Sort(abs)
	return abs[min(len(abs)-1, int(q*float64(len(abs))))]
}

// signedMedian is the median deviation with its sign: above 0 the estimate runs high.
func (r backlogResult) signedMedian() float64 {
	if len(r.devs) == 0 {
		return 0
	}
	s := slices.Clone(r.devs)
	slices.Sort(s)
	return s[len(s)/2]
}

// runBacklogBench runs one shard's producer and reader for d.
func runBacklogBench(b *testing.B, d time.Duration, opts ...ReadOption) backlogResult {
	b.Helper()
	const stream = "backlog-bench"
	srv := kinesistest.StartT(b, kinesistest.WithStream(stream, 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := make(chan int, 1)
	go func() {
		n := 0
		defer func() { produced <- n }()
		client := srv.Client()
		tick := time.NewTicker(backlogProducerTick)
		defer tick.Stop()
		for {
			entries := make([]types.PutRecordsRequestEntry, backlogProducerBatch)
			for i := range entries {
				entries[i] = types.PutRecordsRequestEntry{Data: make([]byte, backlogRecordBytes), PartitionKey: aws.String(fmt.Sprint(n + i))}
			}
			if _, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
				return // the run is over
			}
			n += len(entries)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	cfg := buildConfig(targetRead, connect(srv, append([]ReadOption{WithMaxRecordsPerFetch(backlogCallRecords)}, opts...)...))
	spec := newReadSpec(stream, cfg)
	r, err := newShardReader(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	defer r.closeSubscriptions()
	fn := &shardFn{Spec: spec}
	desc := shardDescriptor{Stream: stream, ShardID: "shardId-000000000000", StartKind: startTrimHorizon}
	rest := initialRestriction(desc, 0)
	we := newWatermarkEstimator(mtime.MinTimestamp.Milliseconds())
	var res backlogResult
	start := time.Now()
	for time.Since(start) < d {
		rt := sdf.NewLockRTracker(newShardTracker(rest))
		pc, err := r.process(ctx, we, rt, desc, func(beam.EventTime, Record) { res.read++ })
		if err != nil {
			b.Fatalf("process from %v: %v", rest, err)
		}
		if pc == nil || !pc.ShouldResume() {
			b.Fatalf("process from %v stopped (%v)", rest, pc)
		}
		_, residual, err := rt.TrySplit(0)
		if err != nil || residual == nil {
			b.Fatalf("checkpoint after %v: %v, %v", rest, residual, err)
		}
		rest = residual.(shardRestriction)
		size := fn.RestrictionSize(desc, rest)
		unread := unreadBytes(b, srv, stream, desc.ShardID, rest)
		if time.Since(start) >= backlogWarmUp && unread > 0 {
			res.devs = append(res.devs, size/float64(unread)-1)
			res.lastSize, res.lastUnread = size, unread
		}
		// The runner resumes the residual after the delay the reader asked for, and no
		// sooner than its own pause: the reader falls behind the producer.
		time.Sleep(max(pc.ResumeDelay(), backlogRunnerPause))
	}
	cancel()
	res.put = <-produced
	return res
}
