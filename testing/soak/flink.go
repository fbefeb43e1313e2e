package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/testing/flink/flinkrest"
)

// The flags of --runner=flink. The defaults come from the lines testing/flink/flink.sh
// start prints, exported as environment variables.
var (
	flinkREST   = flag.String("flink_rest", os.Getenv("BEAMKINESIS_FLINK_REST"), "with --runner=flink: the standalone cluster's REST API URL (default $BEAMKINESIS_FLINK_REST)")
	flinkState  = flag.String("flink_cluster_state", os.Getenv("BEAMKINESIS_FLINK_CLUSTER_STATE"), "with --runner=flink: the cluster's state directory, which cluster.sh kill-tm and start-tm act on (default $BEAMKINESIS_FLINK_CLUSTER_STATE)")
	flinkScript = flag.String("flink_cluster_script", "testing/flink/cluster.sh", "with --runner=flink: the cluster's script")
	tmKillAt    = flag.Duration("tm_kill_at", 0, "with --runner=flink: when, from the start, to kill -9 TaskManager 1 and start a new one (0: a third of --duration; negative: never)")
	savepointAt = flag.Duration("savepoint_at", 0, "with --runner=flink: when, from the start, to stop the job with a savepoint and submit it again from the savepoint (0: two thirds of --duration; negative: never)")
	drainFor    = flag.Duration("drain_timeout", 3*time.Minute, "with --runner=flink: how long after the producer ends to wait for the output to hold every message; then the job is cancelled")
)

// event is a restart of the job: what made it and when. Messages copied to the output
// both before and after an event are the event's duplicates.
type event struct {
	at    time.Time
	cause string
}

// flinkReport is what happened to the job on Flink.
type flinkReport struct {
	// counters are the counters of every job the soak submitted, summed, as each job's
	// last task attempts counted them (read before the job's stop: a restart counts from 0).
	counters map[string]int64
	// events are the planned and the unplanned restarts, oldest first.
	events []event
	// lines describe the jobs, the kill and the savepoint for the ledger.
	lines []string
	// rss is the resident set size of each cluster process at the end.
	rss map[string]uint64
}

// flinkJob is a job submitted with flinkrunner.Execute from a goroutine.
type flinkJob struct {
	id string // Flink's job id
	// failedBefore is how many checkpoints had failed when the first one completed: they
	// fail to trigger while tasks deploy.
	failedBefore int
	done         chan struct{}
	err          error
}

// ended reports whether Execute has returned.
func (j *flinkJob) ended() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for Execute to return.
func (j *flinkJob) wait(timeout time.Duration) error {
	select {
	case <-j.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("the submission of Flink job %s did not return within %v of the job's end", j.id, timeout)
	}
}

// runOnFlink runs the soak job on the standalone cluster: it submits the job with
// checkpointing on, kills a TaskManager and restarts the job from a savepoint on
// schedule, waits after the producer's end until the output holds every message (or
// --drain_timeout passes), and cancels the job.
func runOnFlink(ctx context.Context, srv service, build func() *beam.Pipeline, load func() (*producer, time.Time, error)) (_ *flinkReport, err error) {
	c := &flinkCluster{&flinkrest.Cluster{REST: *flinkREST, State: *flinkState, Script: *flinkScript}}
	if c.REST == "" || c.State == "" {
		return nil, errors.New("--runner=flink needs the standalone cluster: --flink_rest and --flink_cluster_state (or the BEAMKINESIS_FLINK_* lines testing/flink/flink.sh start prints, exported)")
	}
	if *jobopts.Endpoint == "" {
		*jobopts.Endpoint = os.Getenv("BEAMKINESIS_FLINK_ENDPOINT")
	}
	if *jobopts.EnvironmentType == "" {
		*jobopts.EnvironmentType = "LOOPBACK" // the workers reach the in-process server
	}
	if *jobopts.Parallelism < 1 {
		*jobopts.Parallelism = 2 // a task on each TaskManager, so that the kill hits the job
	}
	opts := flinkrunner.Flags
	if !flagSet("checkpointing_interval") {
		opts.CheckpointingInterval = 1000
	}
	rep := &flinkReport{counters: map[string]int64{}}
	plan := []struct {
		at   time.Duration
		name string
	}{{when(*tmKillAt, *duration/3), "kill"}, {when(*savepointAt, 2**duration/3), "savepoint"}}
	sort.Slice(plan, func(i, j int) bool { return plan[i].at < plan[j].at })

	var jobs []*flinkJob
	launched := time.Now()
	job, err := submit(ctx, c, build(), opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && !job.ended() { // leave no job running on the cluster
			if cerr := c.Cancel(context.Background(), job.id); cerr != nil {
				log.Printf("soak: cancelling Flink job %s after the failure: %v", job.id, cerr)
			}
		}
	}()
	jobs = append(jobs, job)
	rep.lines = append(rep.lines, fmt.Sprintf("job 1 %s submitted, running and checkpointing %v after the launch; parallelism %d, a checkpoint every %d ms; then the producer and the chaos start",
		job.id, time.Since(launched).Round(time.Second), *jobopts.Parallelism, opts.CheckpointingInterval))
	prod, started, err := load()
	if err != nil {
		return rep, err
	}
	var killedAt, restoredAt time.Time
	for _, step := range plan {
		if step.at < 0 || step.at >= *duration {
			continue
		}
		if err := sleepUntil(ctx, started.Add(step.at)); err != nil {
			return rep, err
		}
		switch step.name {
		case "kill":
			ev, line, err := killTaskManager(ctx, c, job)
			if err != nil {
				return rep, err
			}
			killedAt, restoredAt = ev.at, time.Now()
			rep.events = append(rep.events, ev)
			rep.lines = append(rep.lines, fmt.Sprintf("at %v: %s", ev.at.Sub(started).Round(time.Second), line))
		case "savepoint":
			next, ev, line, err := savepointRestart(ctx, c, rep, job, build, opts)
			if err != nil {
				return rep, err
			}
			jobs = append(jobs, next)
			job = next
			rep.events = append(rep.events, ev)
			rep.lines = append(rep.lines, fmt.Sprintf("at %v: %s", ev.at.Sub(started).Round(time.Second), line))
		}
	}
	produced := prod.wait()
	drainStart := time.Now()
	err = flinkrest.Await(ctx, *drainFor, "the output to hold every message", func() (bool, error) {
		if job.ended() {
			return false, fmt.Errorf("flink job %s ended before the output held every message: %w", job.id, job.err)
		}
		l, err := newLedger(srv, ledgerStreams{in: "soak-in", out: "soak-out"}, produced, nil)
		return err == nil && l.lost == 0, err
	})
	if err != nil {
		log.Printf("soak: %v; cancelling the job", err)
	}
	rep.lines = append(rep.lines, fmt.Sprintf("drain: %v after the producer's end until the output held every message or the wait gave up", time.Since(drainStart).Round(time.Second)))
	rep.rss = c.rss()
	if err := c.addCounters(ctx, rep, job.id); err != nil {
		return rep, err
	}
	if err := c.Cancel(ctx, job.id); err != nil {
		return rep, err
	}
	if err := job.wait(2 * time.Minute); err != nil {
		return rep, err
	}
	for i, j := range jobs {
		cps, err := c.Checkpoints(ctx, j.id)
		if err != nil {
			return rep, err
		}
		rep.lines = append(rep.lines, fmt.Sprintf("job %d %s: %d checkpoints completed, %d failed after the first completed one (%d before it, while tasks deployed), %d restores",
			i+1, j.id, cps.Counts.Completed, cps.Counts.Failed-j.failedBefore, j.failedBefore, cps.Counts.Restored))
		fails, err := c.Failures(ctx, j.id)
		if err != nil {
			return rep, err
		}
		for _, f := range fails {
			if !killedAt.IsZero() && !f.At.Before(killedAt) && !f.At.After(restoredAt) {
				continue // the kill's own failure
			}
			rep.events = append(rep.events, event{at: f.At, cause: "unplanned restart after " + f.Name})
			rep.lines = append(rep.lines, fmt.Sprintf("job %d: unplanned restart at %v: %s", i+1, f.At.Sub(started).Round(time.Second), f.Name))
		}
	}
	sort.Slice(rep.events, func(i, j int) bool { return rep.events[i].at.Before(rep.events[j].at) })
	return rep, nil
}

// submit submits p with opts from a goroutine, finds its Flink job and waits until the
// job has completed a checkpoint (the sign that every task runs).
func submit(ctx context.Context, c *flinkCluster, p *beam.Pipeline, opts flinkrunner.Options) (*flinkJob, error) {
	before, err := c.JobStates(ctx)
	if err != nil {
		return nil, err
	}
	j := &flinkJob{done: make(chan struct{})}
	go func() {
		defer close(j.done)
		// The result's metrics hold nothing once the soak cancels the job: the counters
		// come from the REST API (addCounters).
		_, j.err = flinkrunner.Execute(ctx, p, opts)
	}()
	err = flinkrest.Await(ctx, 5*time.Minute, "the job to run on Flink", func() (bool, error) {
		if j.ended() {
			return false, fmt.Errorf("the job ended before Flink ran it: %v", j.err)
		}
		states, err := c.JobStates(ctx)
		for id, state := range states {
			if _, old := before[id]; !old && state == "RUNNING" {
				j.id = id
				return true, nil
			}
		}
		return false, err
	})
	if err != nil {
		return nil, err
	}
	err = flinkrest.Await(ctx, 3*time.Minute, "job "+j.id+"'s first checkpoint", func() (bool, error) {
		cps, err := c.Checkpoints(ctx, j.id)
		j.failedBefore = cps.Counts.Failed
		return cps.Counts.Completed > 0, err
	})
	return j, err
}

// killTaskManager kills TaskManager 1 with kill -9 once job has completed a checkpoint
// since the last look, starts a new one, and waits until the job has restored from a
// checkpoint and completed another.
func killTaskManager(ctx context.Context, c *flinkCluster, job *flinkJob) (ev event, line string, err error) {
	cps, err := c.Checkpoints(ctx, job.id)
	if err != nil {
		return ev, "", err
	}
	killed := time.Now()
	if err := c.RunScript(ctx, "kill-tm", "1"); err != nil {
		return ev, "", err
	}
	log.Printf("soak: killed TaskManager 1 with kill -9 (job %s had completed %d checkpoints)", job.id, cps.Counts.Completed)
	if err := c.RunScript(ctx, "start-tm", "1"); err != nil {
		return ev, "", err
	}
	err = flinkrest.Await(ctx, 3*time.Minute, "job "+job.id+" to restore and checkpoint again after the kill", func() (bool, error) {
		cps, err = c.Checkpoints(ctx, job.id)
		r, done := cps.Latest.Restored, cps.Latest.Completed
		return r != nil && r.RestoreTime >= killed.UnixMilli() && done != nil && done.ID > r.ID, err
	})
	if err != nil {
		return ev, "", err
	}
	r := cps.Latest.Restored
	return event{at: killed, cause: "TaskManager kill, replay from the last checkpoint"}, fmt.Sprintf("TaskManager 1 kill -9: restored from checkpoint %d %v after the kill, checkpointing again after %v",
		r.ID, time.UnixMilli(r.RestoreTime).Sub(killed).Round(100*time.Millisecond), time.Since(killed).Round(100*time.Millisecond)), nil
}

// savepointRestart stops job with a savepoint and submits the pipeline again from it.
func savepointRestart(ctx context.Context, c *flinkCluster, rep *flinkReport, job *flinkJob, build func() *beam.Pipeline, opts flinkrunner.Options) (next *flinkJob, ev event, line string, err error) {
	if err := c.addCounters(ctx, rep, job.id); err != nil {
		return nil, ev, "", err
	}
	stopped := time.Now()
	loc, err := c.StopWithSavepoint(ctx, job.id, 3*time.Minute)
	if err != nil {
		return nil, ev, "", err
	}
	if err := job.wait(2 * time.Minute); err != nil {
		return nil, ev, "", err
	}
	if job.err != nil {
		return nil, ev, "", fmt.Errorf("flink job %s stopped with a savepoint: %w", job.id, job.err)
	}
	took := time.Since(stopped)
	log.Printf("soak: job %s stopped with savepoint %s in %v; submitting again from it", job.id, loc, took.Round(100*time.Millisecond))
	opts.SavepointPath = loc
	next, err = submit(ctx, c, build(), opts)
	if err != nil {
		return nil, ev, "", fmt.Errorf("resubmitting from savepoint %s: %w", loc, err)
	}
	cps, err := c.Checkpoints(ctx, next.id)
	if err != nil {
		return nil, ev, "", err
	}
	if r := cps.Latest.Restored; r == nil || !r.IsSavepoint {
		return nil, ev, "", fmt.Errorf("flink job %s, submitted from savepoint %s, restored %+v, not the savepoint", next.id, loc, r)
	}
	return next, event{at: stopped, cause: "stop-with-savepoint and resubmission from the savepoint"},
		fmt.Sprintf("stop-with-savepoint of job %s, resubmitted as job %s: savepoint in %v, running and checkpointing again %v after the stop",
			job.id, next.id, took.Round(100*time.Millisecond), time.Since(stopped).Round(100*time.Millisecond)), nil
}

// when returns d, or def when d is 0.
func when(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// flagSet reports whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// sleepUntil waits until t or the context's end.
func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-time.After(time.Until(t)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
