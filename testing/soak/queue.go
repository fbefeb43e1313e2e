package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The queue soak (--queue): the producer writes into an ON_DEMAND input stream with a
// queue on it; the job reads the queue (kinesisio.ReadQueue) and writes each record to the
// output stream, acknowledging a record once the write took it (WithCommitAfterSinks on
// the write's output, in the global window; --queue_after_sinks=false acknowledges once the
// runner committed the read). The job runs in a child process of this binary (--queue_job), which the
// soak kills with SIGKILL every --queue_kill_every and starts again at once: what the
// killed job had received and not acknowledged comes back after the read's visibility
// timeout (--queue_visibility). The queue's operations fail at --queue_fault_rate
// (throttled requests, throttled and failed acknowledgement entries, and, at a quarter of
// it, acknowledgements the queue loses and redelivers). After the producer's end the last
// job runs until the queue stays empty, and the ledger accounts for every message.

func init() {
	register.Function1x1(queueToMessage)
}

var (
	queueMode      = flag.Bool("queue", false, "read the input through a Kinesis queue (kinesisio.ReadQueue), the job in a child process killed every --queue_kill_every")
	queueKillEvery = flag.Duration("queue_kill_every", 20*time.Second, "with --queue, kill the job (SIGKILL) this often and start it again (0: never)")
	queueFaults    = flag.Float64("queue_fault_rate", 0.02, "with --queue, the share of queue requests throttled, and of acknowledgement entries throttled and failed; a quarter of it is acknowledgements the queue loses and redelivers")
	queueVis       = flag.Duration("queue_visibility", 5*time.Second, "with --queue, the read's visibility timeout: how soon a killed job's records come back")
	queueDrain     = flag.Duration("queue_drain_timeout", 2*time.Minute, "with --queue, how long the last job may take to empty the queue after the producer's end")
	queueAfter     = flag.Bool("queue_after_sinks", true, "with --queue, acknowledge a record only once the write to the output stream took it (WithCommitAfterSinks, in the global window); false: once the runner committed the bundle that read it")

	// The child job's flags, set by the soak.
	queueJob      = flag.Bool("queue_job", false, "run the queue soak's job (the soak starts it; not for direct use)")
	queueJobARN   = flag.String("queue_job_arn", "", "the queue the --queue_job reads")
	queueJobURL   = flag.String("queue_job_endpoint", "", "the Kinesis endpoint of the --queue_job")
	queueJobFinal = flag.Bool("queue_job_final", false, "the --queue_job ends once the queue gave nothing for 5 s")
	queueJobAfter = flag.Bool("queue_job_after_sinks", false, "the --queue_job acknowledges after its write (--queue_after_sinks)")
)

// queueOutput is the stream the queue soak's job writes.
const queueInput, queueOutput = "soak-in", "soak-out"

// runQueueSoak runs the queue soak and prints its ledger.
func runQueueSoak(ctx context.Context) (*ledger, error) {
	srv, err := kinesistest.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the Kinesis server: %w", err)
	}
	defer srv.Close()
	if err := srv.CreateOnDemandStream(queueInput, *shards, ""); err != nil {
		return nil, err
	}
	if err := srv.CreateStream(queueOutput, 2); err != nil {
		return nil, err
	}
	arn, err := srv.CreateQueue("soak", queueInput, kinesistest.QueueConfig{StartingPosition: types.QueueStartingPositionTypeTrimHorizon})
	if err != nil {
		return nil, err
	}
	f := chaosFaults()
	f.QueueThrottleRate, f.QueueEntryThrottleRate, f.QueueEntryInternalFailureRate = *queueFaults, *queueFaults, *queueFaults
	f.QueueRedeliverAfterAckRate = *queueFaults / 4
	f.Operations = append(f.Operations, "ReceiveQueueRecords", "AcknowledgeQueueRecords", "UpdateQueueRecordsVisibility")
	srv.SetFaults(f)

	logDir, err := os.MkdirTemp("", "beamkinesis-queue-soak-")
	if err != nil {
		return nil, err
	}
	started := time.Now()
	end := started.Add(*duration)
	prod := startProducer(ctx, inProcess{srv}, queueInput, *rate, *keys, producerTimes{end: end, hardStop: end.Add(*readTail / 2)})
	down, err := startOutage(inProcess{srv}, started, f)
	if err != nil {
		return nil, err
	}

	var events []event
	var kills int
	job, err := startQueueJob(ctx, srv.URL(), arn, logDir, 0, false)
	if err != nil {
		return nil, err
	}
	for jobs := 1; time.Now().Before(end); jobs++ {
		next := end
		if *queueKillEvery > 0 && time.Now().Add(*queueKillEvery).Before(end) {
			next = time.Now().Add(*queueKillEvery)
		}
		if err := job.waitUntil(ctx, next); err != nil {
			return nil, err
		}
		if !time.Now().Before(end) {
			break
		}
		job.kill()
		kills++
		events = append(events, event{at: time.Now(), cause: "a kill of the job (SIGKILL) and its restart"})
		if job, err = startQueueJob(ctx, srv.URL(), arn, logDir, jobs, false); err != nil {
			return nil, err
		}
	}
	produced := prod.wait()
	downReport := down.wait()
	// The last job replaces the running one and ends once the queue is empty: the records
	// the replaced job held come back after the visibility timeout and are read by it.
	job.kill()
	events = append(events, event{at: time.Now(), cause: "the replacement of the job by the last one"})
	last, err := startQueueJob(ctx, srv.URL(), arn, logDir, kills+1, true)
	if err != nil {
		return nil, err
	}
	var jobErr error
	select {
	case <-last.exited:
		if last.err != nil {
			jobErr = fmt.Errorf("the last job failed: %w (its log: %s)", last.err, last.log)
		}
	case <-time.After(*queueDrain):
		last.kill()
		jobErr = fmt.Errorf("the last job did not empty the queue within %v (its log: %s)", *queueDrain, last.log)
	case <-ctx.Done():
		last.kill()
		return nil, ctx.Err()
	}
	srv.SetFaults(kinesistest.Faults{})

	l, err := newLedger(srv, ledgerStreams{in: queueInput, out: queueOutput}, produced, events)
	if err != nil {
		return nil, errors.Join(jobErr, err)
	}
	st, err := srv.QueueStats(arn)
	if err != nil {
		return nil, errors.Join(jobErr, err)
	}
	l.elapsed, l.mode = time.Since(started), "queue, the job in a child process on Prism, acknowledging once the runner committed the read"
	if *queueAfter {
		l.mode = "queue, the job in a child process on Prism, acknowledging once the write took the records"
	}
	l.outage = downReport.recovery(inProcess{srv})
	l.chaos = fmt.Sprintf("%d kills of the job (SIGKILL, every %v), queue faults at %v (redelivery after acknowledgement at %v), 5xx and dropped connections at %v; queue: received %d, redelivered %d, acknowledged %d, redelivered after acknowledgement %d, stale handles %d, dead letters %d, left in flight %d, visible %d",
		kills, *queueKillEvery, *queueFaults, *queueFaults/4, *faultRate, st.Received, st.Redelivered, st.Acked, st.RedeliveredAfterAck, st.StaleHandles, st.DeadLettered, st.InFlight, st.Visible)
	l.print(os.Stdout, false)
	if jobErr == nil && l.lost == 0 {
		os.RemoveAll(logDir) //nolint:errcheck // a temporary directory
	} else {
		fmt.Printf("  job logs         %s\n", logDir)
	}
	return l, jobErr
}

// queueJobProc is a running child job.
type queueJobProc struct {
	cmd *exec.Cmd
	log string
	// exited is closed once the process ended, err is its Wait's error.
	exited chan struct{}
	err    error
}

// startQueueJob starts this binary as the queue soak's job n.
func startQueueJob(ctx context.Context, url, arn, logDir string, n int, final bool) (*queueJobProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, fmt.Sprintf("job-%02d.log", n))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	args := []string{"--queue_job", "--queue_job_arn=" + arn, "--queue_job_endpoint=" + url,
		fmt.Sprintf("--queue_job_final=%t", final), fmt.Sprintf("--queue_job_after_sinks=%t", *queueAfter), "--queue_visibility=" + queueVis.String(), fmt.Sprintf("--write_retries=%d", *writeRetry)}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a kill takes the job's children too
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the queue job: %w", err)
	}
	j := &queueJobProc{cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() { j.err = cmd.Wait(); close(j.exited) }()
	return j, nil
}

// waitUntil waits until t, failing if the job ends before.
func (j *queueJobProc) waitUntil(ctx context.Context, t time.Time) error {
	select {
	case <-j.exited:
		return fmt.Errorf("the queue job ended by itself: %v (its log: %s)", j.err, j.log)
	case <-time.After(time.Until(t)):
		return nil
	case <-ctx.Done():
		j.kill()
		return ctx.Err()
	}
}

// kill kills the job's process group with SIGKILL and waits for it to end.
func (j *queueJobProc) kill() {
	syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // it may have ended
	<-j.exited
}

// runQueueJob is the child: the queue soak's job on Prism.
func runQueueJob(ctx context.Context) error {
	conn := []kinesisio.ClientOption{kinesisio.WithEndpoint(*queueJobURL), kinesisio.WithRegion(kinesistest.Region), kinesisio.WithStaticCredentials("soak", "soak")}
	readOpts := []kinesisio.QueueOption{kinesisio.WithRetries(20, 50*time.Millisecond, time.Second), kinesisio.WithQueueVisibility(*queueVis)}
	if *queueJobFinal {
		readOpts = append(readOpts, kinesisio.WithQueueWait(time.Second), kinesisio.WithQueueStopWhenIdle(5*time.Second))
	}
	writeOpts := []kinesisio.WriteOption{kinesisio.WithRetries(*writeRetry, 50*time.Millisecond, time.Second)}
	for _, o := range conn {
		readOpts, writeOpts = append(readOpts, o), append(writeOpts, o)
	}
	var commit kinesisio.Commit
	if *queueJobAfter {
		readOpts = append(readOpts, kinesisio.WithCommitAfterSinks(&commit))
	}
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.ReadQueue(s, *queueJobARN, readOpts...)
	failed := kinesisio.Write(s, queueOutput, beam.ParDo(s, queueToMessage, recs), writeOpts...)
	beam.ParDo0(s, countFailed, failed)
	if *queueJobAfter {
		commit.After(s, failed)
	}
	_, err := flinkrunner.Run(ctx, p)
	return err
}

// queueToMessage writes a queue record under its own partition key.
func queueToMessage(r kinesisio.QueueRecord) kinesisio.Message {
	return kinesisio.Message{PartitionKey: r.PartitionKey, Data: r.Data}
}
