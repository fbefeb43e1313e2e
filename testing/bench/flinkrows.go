package main

import (
	"context"
	"fmt"
	"time"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The rows beside Flink's own consumer (--flink only).
const (
	flinkKinesisRow    = 12 // backlog, Config.Shards shards at parallelism Config.Shards
	flinkScalingRow    = 13 // backlog, 8 shards at parallelism 1 and 2
	flinkScalingShards = 8
)

// flinkKinesisTimeout bounds one run of the anchor job.
const flinkKinesisTimeout = 5 * time.Minute

// noFetchInterval is the anchor job's argument that makes FlinkKinesisConsumer ask again at
// once after a GetRecords call instead of 200 ms after the previous one (its default,
// flink.shard.getrecords.intervalmillis, which caps a shard at 50,000 records/s with the
// default 10,000 records per call).
const noFetchInterval = "--prop.flink.shard.getrecords.intervalmillis=0"

// backlog is a server holding Config.Records records over shards in one stream.
type backlog struct {
	srv    *kinesistest.Server
	stream string
	want   int64
}

func (b *Bench) newBacklog(ctx context.Context, shards int) (*backlog, error) {
	srv, err := kinesistest.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the Kinesis server: %w", err)
	}
	stream := fmt.Sprintf("flink-%d", shards)
	if err := srv.CreateStream(stream, shards); err != nil {
		srv.Close()
		return nil, fmt.Errorf("creating stream %s: %w", stream, err)
	}
	if err := putPlain(ctx, srv.Client(), stream, b.cfg.Records); err != nil {
		srv.Close()
		return nil, err
	}
	return &backlog{srv: srv, stream: stream, want: int64(b.cfg.Records)}, nil
}

// oursOnce reads the backlog with ReadBounded on the job server at parallelism and keeps
// the run in best if its steady rate is better.
func (b *Bench) oursOnce(ctx context.Context, bl *backlog, parallelism int, best *readRun) error {
	r, err := readBoundedOnFlink(ctx, b.cfg.FlinkEndpoint, bl.srv.URL(), bl.stream, parallelism)
	if err != nil {
		return err
	}
	if r.Records != bl.want {
		return fmt.Errorf("ReadBounded on Flink read %d records, want %d", r.Records, bl.want)
	}
	b.cfg.logf("ReadBounded on Flink, %s, parallelism %d: %d records in %v (start-up %v, steady %v, %s)", bl.stream, parallelism,
		r.Records, r.Total.Round(time.Millisecond), r.Startup.Round(time.Millisecond), r.Steady.Round(time.Millisecond), rate(r.steadyRate(), "rec/s"))
	if best.Steady == 0 || r.Steady < best.Steady {
		*best = r
	}
	return nil
}

// theirsOnce reads the backlog with the anchor job at parallelism and keeps the run in best
// if its steady rate is better.
func (b *Bench) theirsOnce(ctx context.Context, job *flinkKinesisJob, bl *backlog, parallelism int, best *flinkKinesisRun, extra ...string) error {
	t, err := job.run(ctx, bl.srv.URL(), bl.stream, parallelism, flinkKinesisTimeout,
		func(s subtaskStatus) bool { return s.Records >= bl.want }, extra...)
	if err != nil {
		return err
	}
	if t.Counted.Records != bl.want {
		return fmt.Errorf("FlinkKinesisConsumer read %d records, want %d", t.Counted.Records, bl.want)
	}
	b.cfg.logf("FlinkKinesisConsumer, %s, parallelism %d %v: %d records, %v to the last (start-up %v, steady %v, %s)", bl.stream, parallelism, extra,
		t.Counted.Records, t.total().Round(time.Millisecond), t.startup().Round(time.Millisecond),
		time.Duration(t.Counted.Last-t.Counted.First).Round(time.Millisecond), rate(t.steadyRate(), "rec/s"))
	if best.Counted.Records == 0 || t.steadyRate() > best.steadyRate() {
		*best = t
	}
	return nil
}

// backlogRow is one row of ours against theirs on a backlog.
func backlogRow(id, name string, ours readRun, theirs flinkKinesisRun, notes string) Row {
	return Row{
		ID:       id,
		Name:     name,
		Measured: fmt.Sprintf("%s steady; %s over the whole job (%.1f s)", rate(ours.steadyRate(), "rec/s"), rate(ours.rate(), "rec/s"), ours.Total.Seconds()),
		Baseline: fmt.Sprintf("%s steady; %s run request to last record (%.1f s, first record after %.1f s)", rate(theirs.steadyRate(), "rec/s"), rate(theirs.rate(), "rec/s"),
			theirs.total().Seconds(), theirs.startup().Seconds()),
		Ratio:  ours.steadyRate() / theirs.steadyRate(),
		Target: "≥ 1× (steady)",
		Notes: fmt.Sprintf("ours/theirs, steady; whole job %.2f×; %s records each (exact counts); at most %d shards emitting at once on our side; better of 2 runs each, alternating%s",
			ours.rate()/theirs.rate(), group(ours.Records), ours.Overlap, notes),
		Rate:   ours.steadyRate(),
		Counts: map[string]int64{"ours": ours.Records, "theirs": theirs.Counted.Records},
	}
}

// rowsFlinkKinesis is row 12: a backlog over Config.Shards shards at parallelism equal to
// the shard count, read by this connector's ReadBounded (as row 10) and by Flink's own
// FlinkKinesisConsumer in the anchor job: 12a with the consumer's defaults (10,000 records
// per GetRecords, 200 ms between calls per shard), 12b without the 200 ms. Both count at
// the step after the source: ours in the SDK worker (LOOPBACK, this process), theirs in the
// job's sink subtasks on the TaskManagers. Our whole job is submission to the job's
// completion; theirs is the run request to its last record, as the anchor job never ends by
// itself (the bench cancels it), which is a little in their favour.
func (b *Bench) rowsFlinkKinesis(ctx context.Context) ([]Row, error) {
	job, err := b.flinkJob(ctx)
	if err != nil {
		return nil, err
	}
	shards := b.cfg.Shards
	bl, err := b.newBacklog(ctx, shards)
	if err != nil {
		return nil, err
	}
	defer bl.srv.Close()
	var (
		ours            readRun
		defaults, eager flinkKinesisRun
	)
	for range 2 { // alternating, so that a change in the machine's load hits all three
		if err := b.oursOnce(ctx, bl, shards, &ours); err != nil {
			return nil, err
		}
		if err := b.theirsOnce(ctx, job, bl, shards, &defaults); err != nil {
			return nil, err
		}
		if err := b.theirsOnce(ctx, job, bl, shards, &eager, noFetchInterval); err != nil {
			return nil, err
		}
	}
	name := func(how string) string {
		return fmt.Sprintf("Read on the standalone Flink cluster beside Flink's FlinkKinesisConsumer (flink-connector-kinesis %s, %s), parallelism %d, %d shards, %s × 100 B",
			job.connector, how, shards, shards, group(int64(b.cfg.Records)))
	}
	return []Row{
		backlogRow(fmt.Sprint(flinkKinesisRow, "a"), name("defaults"), ours, defaults, "; theirs at most 50,000 rec/s per shard by its 200 ms between GetRecords calls"),
		backlogRow(fmt.Sprint(flinkKinesisRow, "b"), name("getrecords.intervalmillis=0"), ours, eager, ""),
	}, nil
}

// rowsFlinkScaling is row 13: a backlog over 8 shards read at parallelism 1 (13a) and 2
// (13b) by both, theirs without the 200 ms between calls (as 12b), so that neither is held
// back by a pause; the notes of 13b give each side's speed-up from 1 to 2. With cluster.sh's
// evenly spread slots, parallelism 2 puts one task on each TaskManager; our DoFns run in
// this process (LOOPBACK) whatever the parallelism.
func (b *Bench) rowsFlinkScaling(ctx context.Context) ([]Row, error) {
	job, err := b.flinkJob(ctx)
	if err != nil {
		return nil, err
	}
	bl, err := b.newBacklog(ctx, flinkScalingShards)
	if err != nil {
		return nil, err
	}
	defer bl.srv.Close()
	var ours [2]readRun
	var theirs [2]flinkKinesisRun
	for range 2 {
		for i, p := range []int{1, 2} {
			if err := b.oursOnce(ctx, bl, p, &ours[i]); err != nil {
				return nil, err
			}
			if err := b.theirsOnce(ctx, job, bl, p, &theirs[i], noFetchInterval); err != nil {
				return nil, err
			}
		}
	}
	name := func(p int) string {
		return fmt.Sprintf("Scaling on the standalone Flink cluster beside FlinkKinesisConsumer (getrecords.intervalmillis=0), parallelism %d, %d shards, %s × 100 B",
			p, flinkScalingShards, group(int64(b.cfg.Records)))
	}
	return []Row{
		backlogRow(fmt.Sprint(flinkScalingRow, "a"), name(1), ours[0], theirs[0], ""),
		backlogRow(fmt.Sprint(flinkScalingRow, "b"), name(2), ours[1], theirs[1],
			fmt.Sprintf("; speed-up from parallelism 1 to 2, steady: ours %.2f×, theirs %.2f×",
				ours[1].steadyRate()/ours[0].steadyRate(), theirs[1].steadyRate()/theirs[0].steadyRate())),
	}, nil
}

// flinkJob checks that the rows beside Flink's consumer can run and uploads the anchor jar,
// once per bench.
func (b *Bench) flinkJob(ctx context.Context) (*flinkKinesisJob, error) {
	if b.cfg.FlinkEndpoint == "" || b.cfg.FlinkREST == "" {
		return nil, fmt.Errorf("rows %d to %d need the Flink job server and cluster: --flink with $BEAMKINESIS_FLINK_ENDPOINT and $BEAMKINESIS_FLINK_REST (testing/flink/flink.sh start prints them)",
			flinkKinesisRow, flinkLatencyRow)
	}
	if b.flinkKinesis == nil {
		j, err := newFlinkKinesisJob(ctx, b.cfg.FlinkREST, b.cfg.logf)
		if err != nil {
			return nil, err
		}
		b.flinkKinesis = j
		b.closers = append(b.closers, j.close)
	}
	return b.flinkKinesis, nil
}
