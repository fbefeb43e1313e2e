package kinesisio

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/testing/childjob"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.DoFn2x1[QueueRecord, func(QueueRecord), error](&failPoisonFn{})
	register.Emitter1[QueueRecord]()
}

// failPoisonFn passes a record on, unless its data starts with "poison": processing it
// fails, every time, and so does the bundle (and, on Prism, the job).
type failPoisonFn struct{}

func (*failPoisonFn) ProcessElement(r QueueRecord, emit func(QueueRecord)) error {
	if strings.HasPrefix(string(r.Data), "poison") {
		return fmt.Errorf("processing %q fails every time", r.Data)
	}
	emit(r)
	return nil
}

// runPoisonJob reads the queue at arn of the server at url through failPoisonFn into a
// sink named key, until the queue stays empty for idle, and returns what the sink got.
func runPoisonJob(url, arn, key string, idle time.Duration) ([]string, error) {
	p, s := beam.NewPipelineWithRoot()
	recs := ReadQueue(s, arn, queueConnectURL(url, WithQueueStopWhenIdle(idle))...)
	sk := collectQueue(s, key, beam.ParDo(s, &failPoisonFn{}, recs))
	err := ptest.Run(p)
	return sk.get(), err
}

// poisonJobEnv names the environment of TestPoisonJobChild: the server's URL and the
// queue's ARN, separated by a space.
const poisonJobEnv = "BEAMKINESIS_QUEUE_POISON_JOB"

// TestPoisonJobChild is a job of TestReadQueuePoisonRecordsReachTheDeadLetters, run in a
// child process of the test binary so that what it received dies with it when it fails.
// A normal run skips it.
func TestPoisonJobChild(t *testing.T) {
	args := childjob.Args(t, poisonJobEnv)
	// A job that fails ends on its first poison record: its idle time only has to outlast
	// a slow start, which would end the read before it received anything.
	if _, err := runPoisonJob(args[0], args[1], t.Name(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

// Poison records through a pipeline: a record whose processing fails every time fails the
// job that received it, on every delivery. The job is started again after each failure;
// what it held comes back when its visibility runs out (the test ends it on the server
// clock, rather than waiting), until, after MaxReceiveCount deliveries, the queue makes the
// poison records dead letters. A job then runs: it reads the good records that came since
// and ends well. ReadQueueDeadLetters then reads exactly the poison records and discards
// them. Each failing job runs in a child process (childjob), as a restarted job would: a
// job that failed in this process could leave its receivers holding records, and so can a
// job that ended in this process: a pool of an ended in-process job was seen still polling
// the queue (Polling 3) and taking the poison from the next child job. The good records are
// put once the poison is dead: a job that fails takes the records it held with it, and
// after MaxReceiveCount such failures good records would be dead letters too.
func TestReadQueuePoisonRecordsReachTheDeadLetters(t *testing.T) {
	const maxReceives = 3
	srv, arn, _ := queueServer(t, 0, kinesistest.QueueConfig{MaxReceiveCount: maxReceives})
	poison := sortedCopy(putQueueRecords(t, srv, "poison", 3))
	for run := 1; ; run++ {
		st, err := srv.QueueStats(arn)
		if err != nil {
			t.Fatal(err)
		}
		if st.DeadLettered == int64(len(poison)) {
			break
		}
		if run > 2*maxReceives {
			t.Fatalf("%d jobs failed and the queue made no dead letters of the poison records: %+v", run-1, st)
		}
		child := childjob.Start(t, "TestPoisonJobChild", poisonJobEnv, srv.URL()+" "+arn)
		if err := child.Wait(t, 3*time.Minute); err == nil {
			log, _ := os.ReadFile(child.Log)
			t.Fatalf("failing job %d ended well (queue before it: %+v); its log:\n%s", run, st, log)
		}
		if log, err := os.ReadFile(child.Log); err != nil || !strings.Contains(string(log), "fails every time") {
			t.Fatalf("failing job %d failed, not on a poison record (%v); its log is in %s", run, err, child.Log)
		}
		// The failed job's receives die with it: let what it held come back now, once the
		// server has seen its long polls go (a poll it has not yet seen closed would take
		// the records back into a dead connection, and the next job would find none).
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		err = srv.WaitQueue(ctx, arn, func(st kinesistest.QueueStats) bool { return st.Polling == 0 })
		cancel()
		if err != nil {
			t.Fatalf("the failed job %d's long polls are still open on the server: %v", run, err)
		}
		if _, err := srv.ExpireQueueInFlight(arn); err != nil {
			t.Fatal(err)
		}
	}
	st, err := srv.QueueStats(arn)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := srv.QueueRecords(arn)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if strings.HasPrefix(string(r.Data), "poison") && (r.State != "DEAD_VISIBLE" || r.Deliveries != maxReceives) {
			t.Errorf("poison record %s is %s after %d deliveries, want DEAD_VISIBLE after %d", r.Data, r.State, r.Deliveries, maxReceives)
		}
	}
	if st.DeadVisible != len(poison) || st.Visible != 0 || st.InFlight != 0 {
		t.Fatalf("the queue after %d failed jobs: %+v; want the %d poison records dead letters, nothing else left", maxReceives, st, len(poison))
	}
	after := sortedCopy(putQueueRecords(t, srv, "after", 20))
	good, err := runPoisonJob(srv.URL(), arn, t.Name()+"/after", 3*time.Second)
	if err != nil {
		t.Fatalf("the job after the poison became dead letters: %v", err)
	}
	if good := sortedCopy(good); !slices.Equal(good, after) {
		t.Fatalf("the job after the poison read %q, want %q", good, after)
	}

	p, s := beam.NewPipelineWithRoot()
	dead := collectQueue(s, t.Name()+"/dead", ReadQueueDeadLetters(s, arn, queueConnect(srv)...))
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	if got := sortedCopy(dead.get()); !slices.Equal(got, poison) {
		t.Fatalf("dead letters read: %q, want %q", got, poison)
	}
	st, err = srv.QueueStats(arn)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d good records put, %d read; %d poison records put, %d dead letters read and discarded; queue: %+v",
		len(after), len(good), len(poison), len(dead.get()), st)
	if st.DeadAcked != int64(len(poison)) || st.DeadVisible != 0 || st.DeadInFlight != 0 || st.Acked != int64(len(good)) {
		t.Fatalf("the queue after the dead-letter read: %+v; want every good record acknowledged and every dead letter discarded", st)
	}
}
