package main

import (
	"context"
	"fmt"
	"time"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// flinkKinesisRow is the backlog row beside Flink's own consumer (--flink).
const flinkKinesisRow = 11

// flinkKinesisTimeout bounds one run of the anchor job.
const flinkKinesisTimeout = 5 * time.Minute

// flinkKinesisBacklog reads a backlog of records × 100 B over shards with this connector's
// ReadBounded on the job server and with Flink's FlinkKinesisConsumer, both at parallelism,
// alternating twice; it returns the better run of each by steady rate (first record to
// last). extra are the anchor job's arguments.
func (b *Bench) flinkKinesisBacklog(ctx context.Context, job *flinkKinesisJob, shards, parallelism int, extra ...string) (ours readRun, theirs flinkKinesisRun, err error) {
	srv, err := kinesistest.Start()
	if err != nil {
		return ours, theirs, fmt.Errorf("starting the Kinesis server: %w", err)
	}
	defer srv.Close()
	stream := fmt.Sprintf("flink-%d", shards)
	if err := srv.CreateStream(stream, shards); err != nil {
		return ours, theirs, fmt.Errorf("creating stream %s: %w", stream, err)
	}
	if err := putPlain(ctx, srv.Client(), stream, b.cfg.Records); err != nil {
		return ours, theirs, err
	}
	want := int64(b.cfg.Records)
	for round := range 2 {
		r, err := readBoundedOnFlink(ctx, b.cfg.FlinkEndpoint, srv.URL(), stream, parallelism)
		if err != nil {
			return ours, theirs, err
		}
		if r.Records != want {
			return ours, theirs, fmt.Errorf("ReadBounded on Flink read %d records, want %d", r.Records, want)
		}
		b.cfg.logf("ReadBounded on Flink %d, %d shards, parallelism %d: %d records in %v (start-up %v, steady %v, %s)", round+1, shards, parallelism,
			r.Records, r.Total.Round(time.Millisecond), r.Startup.Round(time.Millisecond), r.Steady.Round(time.Millisecond), rate(r.steadyRate(), "rec/s"))
		if ours.Steady == 0 || r.Steady < ours.Steady {
			ours = r
		}
		t, err := job.run(ctx, srv.URL(), stream, parallelism, flinkKinesisTimeout,
			func(s subtaskStatus) bool { return s.Records >= want }, extra...)
		if err != nil {
			return ours, theirs, err
		}
		if t.Counted.Records != want {
			return ours, theirs, fmt.Errorf("FlinkKinesisConsumer read %d records, want %d", t.Counted.Records, want)
		}
		b.cfg.logf("FlinkKinesisConsumer %d, %d shards, parallelism %d: %d records, %v to the last (start-up %v, steady %v, %s)", round+1, shards, parallelism,
			t.Counted.Records, t.total().Round(time.Millisecond), time.Unix(0, t.Counted.First).Sub(t.Start).Round(time.Millisecond),
			time.Duration(t.Counted.Last-t.Counted.First).Round(time.Millisecond), rate(t.steadyRate(), "rec/s"))
		if theirs.Counted.Records == 0 || t.steadyRate() > theirs.steadyRate() {
			theirs = t
		}
	}
	return ours, theirs, nil
}

// rowFlinkKinesis is row 11: a backlog over Config.Shards shards at parallelism equal to
// the shard count, read by this connector's ReadBounded (as row 10) and by Flink's own
// FlinkKinesisConsumer in the anchor job, with the consumer's defaults (10,000 records per
// GetRecords, 200 ms between calls per shard). Both count at the step after the source:
// ours in the SDK worker (LOOPBACK, this process), theirs in the job's sink subtasks. Our
// whole job is submission to the job's completion; theirs is the run request to its last
// record, as the anchor job never ends by itself (the bench cancels it), so it is a little
// in their favour.
func (b *Bench) rowFlinkKinesis(ctx context.Context) (Row, error) {
	if b.cfg.FlinkEndpoint == "" || b.cfg.FlinkREST == "" {
		return Row{}, fmt.Errorf("row %d needs the Flink job server and cluster: --flink with $BEAMKINESIS_FLINK_ENDPOINT and $BEAMKINESIS_FLINK_REST (testing/flink/flink.sh start prints them)", flinkKinesisRow)
	}
	job, err := b.flinkJob(ctx)
	if err != nil {
		return Row{}, err
	}
	shards := b.cfg.Shards
	ours, theirs, err := b.flinkKinesisBacklog(ctx, job, shards, shards)
	if err != nil {
		return Row{}, err
	}
	return Row{
		ID: fmt.Sprint(flinkKinesisRow),
		Name: fmt.Sprintf("Read on the standalone Flink cluster beside Flink's FlinkKinesisConsumer (flink-connector-kinesis 1.16.3, defaults), parallelism %d, %d shards, %s × 100 B",
			shards, shards, group(int64(b.cfg.Records))),
		Measured: fmt.Sprintf("%s steady; %s over the whole job (%.1f s)", rate(ours.steadyRate(), "rec/s"), rate(ours.rate(), "rec/s"), ours.Total.Seconds()),
		Baseline: fmt.Sprintf("%s steady; %s run request to last record (%.1f s, first record after %.1f s)", rate(theirs.steadyRate(), "rec/s"), rate(theirs.rate(), "rec/s"),
			theirs.total().Seconds(), time.Unix(0, theirs.Counted.First).Sub(theirs.Start).Seconds()),
		Ratio:  ours.steadyRate() / theirs.steadyRate(),
		Target: "≥ 1× (steady)",
		Notes: fmt.Sprintf("ours/theirs, steady; whole job %.2f×; records %s each (exact counts); better of 2 runs each, alternating",
			ours.rate()/theirs.rate(), group(ours.Records)),
		Rate:   ours.steadyRate(),
		Counts: map[string]int64{"ours": ours.Records, "theirs": theirs.Counted.Records},
	}, nil
}

// flinkJob uploads the anchor jar once per bench.
func (b *Bench) flinkJob(ctx context.Context) (*flinkKinesisJob, error) {
	if b.flinkKinesis == nil {
		j, err := newFlinkKinesisJob(ctx, b.cfg.FlinkREST, b.cfg.logf)
		if err != nil {
			return nil, err
		}
		b.flinkKinesis = j
	}
	return b.flinkKinesis, nil
}
