package main

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/testing/flink/flinkrest"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// queueFlinkRow is the queue read on the standalone Flink cluster (--flink only): 17a at
// parallelism 1, 17b at 2.
const queueFlinkRow = 17

// rowsQueueFlink is row 17: the same records, in queues of one ON_DEMAND stream (a fresh
// queue for every run, each delivering every record), received and acknowledged by
// ReadQueue on the Flink job server at parallelism 1 (17a) and 2 (17b), and by
// queueBaselineReceivers goroutines of the plain SDK (row 16's loop), on the same server in
// one run. The three alternate, twice each, and the better run of each counts. Each run
// must acknowledge every record exactly once. The read's DoFns run in this process
// (LOOPBACK) at either parallelism, so its receiver pool is one per read, and keeps 4
// receives going for each of the calls that run at once: 8 at parallelism 2. The notes of
// 17b give the speed-up.
func (b *Bench) rowsQueueFlink(ctx context.Context) ([]Row, error) {
	if b.cfg.FlinkEndpoint == "" || b.cfg.FlinkREST == "" {
		return nil, fmt.Errorf("row %d needs the Flink job server and cluster: --flink with $BEAMKINESIS_FLINK_ENDPOINT and $BEAMKINESIS_FLINK_REST (testing/flink/flink.sh start prints them)", queueFlinkRow)
	}
	srv, err := b.queueServer()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	n := b.cfg.queueRecords()
	if err := srv.CreateOnDemandStream("queued", b.cfg.Shards, ""); err != nil {
		return nil, err
	}
	if err := putPlain(ctx, srv.Client(), "queued", n); err != nil {
		return nil, err
	}
	queues := 0
	newQueue := func() (string, error) {
		queues++
		return srv.CreateQueue(fmt.Sprintf("q%d", queues), "queued", kinesistest.QueueConfig{StartingPosition: types.QueueStartingPositionTypeTrimHorizon})
	}
	var (
		base time.Duration
		ours [2]readRun
		recv [2]int64
	)
	for round := range 2 {
		arn, err := newQueue()
		if err != nil {
			return nil, err
		}
		start := time.Now()
		got, err := receiveAndAcknowledge(ctx, srv.Client(), arn, n, queueBaselineReceivers)
		d := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("the SDK loop: %w", err)
		}
		b.cfg.logf("SDK loop %d, %d goroutines: %d records received and acknowledged in %v", round+1, queueBaselineReceivers, got, d.Round(time.Millisecond))
		if base == 0 || d < base {
			base = d
		}
		for i, p := range []int{1, 2} {
			arn, err := newQueue()
			if err != nil {
				return nil, err
			}
			r, err := readQueueOnFlink(ctx, b.cfg.FlinkEndpoint, b.cfg.FlinkREST, srv, arn, p, int64(n))
			if err != nil {
				return nil, err
			}
			st, err := srv.QueueStats(arn)
			if err != nil {
				return nil, err
			}
			if r.Records != int64(n) || st.Acked != int64(n) || st.InFlight != 0 || st.Visible != 0 {
				return nil, fmt.Errorf("ReadQueue on Flink at parallelism %d read %d records and the queue acknowledged %d (in flight %d, visible %d); want %d each, none left",
					p, r.Records, st.Acked, st.InFlight, st.Visible, n)
			}
			b.cfg.logf("ReadQueue on Flink %d, parallelism %d: %d records in %v (start-up %v, steady %v, %s; %d received, %d empty receives)", round+1, p,
				r.Records, r.Total.Round(time.Millisecond), r.Startup.Round(time.Millisecond), r.Steady.Round(time.Millisecond), rate(r.steadyRate(), "rec/s"),
				st.Received, st.EmptyReceives)
			if ours[i].Steady == 0 || r.Steady < ours[i].Steady {
				ours[i], recv[i] = r, st.Received
			}
		}
	}
	baseRate := float64(n) / base.Seconds()
	row := func(i, p int, notes string) Row {
		r := ours[i]
		return Row{
			ID:   fmt.Sprint(queueFlinkRow, string(rune('a'+i))),
			Name: fmt.Sprintf("Queue read on the standalone Flink cluster: ReadQueue, --parallelism=%d, %s × 100 B, received and acknowledged", p, group(int64(n))),
			Measured: fmt.Sprintf("%s steady; %s from submission to the last record (%.1f s, of which %.1f s submission and start-up)",
				rate(r.steadyRate(), "rec/s"), rate(r.rate(), "rec/s"), r.Total.Seconds(), r.Startup.Seconds()),
			Baseline: fmt.Sprintf("%s (%d goroutines of ReceiveQueueRecords + AcknowledgeQueueRecords)", rate(baseRate, "rec/s"), queueBaselineReceivers),
			Ratio:    r.steadyRate() / baseRate,
			Target:   "≥ 0.8× (steady)",
			Notes: fmt.Sprintf("%s; %d records received (redeliveries included); every record acknowledged once on both sides (exact); better of 2 runs each, alternating%s%s",
				queueDefaults, recv[i], b.queueLatencyNote(), notes),
			Rate:   r.steadyRate(),
			Counts: map[string]int64{"readqueue_records": r.Records, "sdk_records": int64(n)},
		}
	}
	return []Row{
		row(0, 1, ""),
		row(1, 2, fmt.Sprintf("; speed-up from parallelism 1 to 2, steady: %.2f× (target ≥ 1.8×)", ours[1].steadyRate()/ours[0].steadyRate())),
	}, nil
}

// readQueueOnFlink reads the queue arn with ReadQueue on the Flink job server at
// endpoint with the given parallelism, its workers in this process, counting what it
// emits, until it emitted want records and the queue acknowledged them; then it cancels the
// job through the cluster's REST API at rest (a streaming job on Flink keeps its idle sources, so it does not end by
// itself). Total is submission to the last record.
func readQueueOnFlink(ctx context.Context, endpoint, rest string, srv *kinesistest.Server, arn string, parallelism int, want int64) (readRun, error) {
	defer flinkJobFlags(endpoint, parallelism)()
	cluster := &flinkrest.Cluster{REST: rest}
	before, err := cluster.JobStates(ctx)
	if err != nil {
		return readRun{}, err
	}
	resetCounters()
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.ReadQueue(s, arn, connect(srv.URL(), kinesisio.WithQueueWait(time.Second))...)
	sink(s, beam.ParDo(s, &countQueueFn{}, recs))
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := flinkrunner.Execute(runCtx, p, flinkrunner.Defaults)
		done <- err
	}()
	read := func() (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("ReadQueue on the Flink job server at %s ended after %d of %d records: %v", endpoint, seen.Load(), want, err)
		default:
		}
		return seen.Load() >= want, nil
	}
	if err := flinkrest.Await(ctx, flinkKinesisTimeout, "ReadQueue on Flink to read every record", read); err != nil {
		return readRun{}, err
	}
	r := readRun{Records: seen.Load()}
	f := firstEmit.Load()
	r.Startup = time.Unix(0, f).Sub(start)
	r.Steady = time.Duration(lastEmit.Load() - f)
	r.Total = time.Unix(0, lastEmit.Load()).Sub(start)
	acked := func() (bool, error) {
		st, err := srv.QueueStats(arn)
		return st.Acked >= want, err
	}
	if err := flinkrest.Await(ctx, time.Minute, "the queue to acknowledge every record ReadQueue read", acked); err != nil {
		return r, err
	}
	states, err := cluster.JobStates(ctx)
	if err != nil {
		return r, err
	}
	for id, state := range states {
		if _, old := before[id]; !old && state == "RUNNING" {
			if err := cluster.Cancel(ctx, id); err != nil {
				return r, fmt.Errorf("cancelling ReadQueue's job: %w", err)
			}
		}
	}
	<-done // the job server reports the cancelled job as failed
	return r, nil
}
