package flink

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/testing/flink/flinkrest"
)

// needCluster skips t unless the tests run on the standalone cluster (flink.sh), whose
// REST API and TaskManagers the test inspects or kills.
func needCluster(t *testing.T) {
	t.Helper()
	needFlink(t)
	if suite.rest == "" || suite.clusterState == "" {
		if os.Getenv(envRequire) == "1" {
			t.Fatalf("%s=1 but the job server runs no standalone cluster (%s and %s are unset)", envRequire, envREST, envClusterState)
		}
		t.Skipf("needs the standalone cluster: %s=1 starts it with flink.sh, or set %s and %s", envStart, envREST, envClusterState)
	}
}

// cluster returns the suite's standalone cluster, whose script is cluster.sh in this
// directory.
func cluster() *flinkrest.Cluster {
	return &flinkrest.Cluster{REST: suite.rest, State: suite.clusterState, Script: "cluster.sh"}
}

// restGet is a GET of path on the cluster's REST API that fails t on error.
func restGet(t *testing.T, path string, out any) {
	t.Helper()
	if err := cluster().Call(context.Background(), http.MethodGet, path, nil, out); err != nil {
		t.Fatal(err)
	}
}

// jobIDs returns the ids of every job the cluster knows, by state.
func jobIDs(t *testing.T) map[string]string {
	t.Helper()
	states, err := cluster().JobStates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return states
}

// checkpoints returns the job's checkpoint statistics, failing t if the job has failed
// (Flink gave up restarting it).
func checkpoints(t *testing.T, job string) flinkrest.CheckpointStats {
	t.Helper()
	s, err := cluster().Checkpoints(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// userConfig returns the job's Beam pipeline options as Flink shows them.
func userConfig(t *testing.T, job string) map[string]string {
	t.Helper()
	cfg, err := cluster().UserConfig(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// await polls cond every 200 ms until it returns true, failing t with what() when
// timeout passes first.
func await(t *testing.T, timeout time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what())
		}
		time.Sleep(200 * time.Millisecond) // poll interval of the deadline loop
	}
}

// clusterScript runs cluster.sh verb args on the suite's cluster.
func clusterScript(t *testing.T, args ...string) {
	t.Helper()
	if err := cluster().RunScript(context.Background(), args...); err != nil {
		t.Fatal(err)
	}
}

// liveRun is a pipeline running in the background whose standard output can be read
// while it runs.
type liveRun struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	mu      sync.Mutex
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	done    chan struct{}
	err     error
	// job is the Flink job id of the run, once jobOf found it.
	job string
}

// lockedWriter appends to a buffer under the run's lock.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// startPipeline starts the pipeline binary of pipelines/name on the job server like
// runPipeline, without waiting for it, and finds its Flink job. The run is killed when t
// ends if it is still running.
func startPipeline(t *testing.T, name string, args ...string) *liveRun {
	t.Helper()
	before := jobIDs(t)
	flags := append([]string{"--runner=flink", "--endpoint=" + suite.endpoint, "--environment_type=LOOPBACK"}, args...)
	r := &liveRun{name: name, done: make(chan struct{})}
	r.cmd = exec.Command(suite.bins[name], flags...)
	r.cmd.Env = append(os.Environ(),
		"AWS_ACCESS_KEY_ID=flink-e2e", "AWS_SECRET_ACCESS_KEY=flink-e2e", "AWS_EC2_METADATA_DISABLED=true")
	r.cmd.Stdout = lockedWriter{&r.mu, &r.stdout}
	r.cmd.Stderr = lockedWriter{&r.mu, &r.stderr}
	r.started = time.Now()
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Logf("started %s %s", name, strings.Join(flags, " "))
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Kill()
			<-r.done
			if r.job != "" {
				cluster().Cancel(context.Background(), r.job)
			}
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr (tail):\n%s", name, r.out(), tail(r.errOut(), 60))
		}
	})
	await(t, pipelineTimeout, func() string {
		return fmt.Sprintf("%s has no RUNNING Flink job; stderr:\n%s", name, tail(r.errOut(), 40))
	}, func() bool {
		if r.exited() {
			t.Fatalf("%s exited before its Flink job ran: %v\nstderr:\n%s", name, r.err, tail(r.errOut(), 60))
		}
		for id, state := range jobIDs(t) {
			if _, old := before[id]; !old && state == "RUNNING" {
				r.job = id
				return true
			}
		}
		return false
	})
	t.Logf("%s: Flink job %s running %v after launch", name, r.job, time.Since(r.started).Round(time.Millisecond))
	return r
}

// awaitCheckpoints waits until n checkpoints of the run's job have completed since it
// started (or since its last restore) and returns the job's checkpoint statistics. The
// first completed checkpoint is the sign that every task of the job runs: the job is
// RUNNING while its tasks still deploy, and checkpoints fail to trigger until they run.
func (r *liveRun) awaitCheckpoints(t *testing.T, n int) flinkrest.CheckpointStats {
	t.Helper()
	var s flinkrest.CheckpointStats
	await(t, 2*time.Minute, func() string {
		return fmt.Sprintf("%s's job completed %d checkpoints, want %d", r.name, s.Counts.Completed, n)
	}, func() bool {
		if r.exited() {
			t.Fatalf("%s ended while waiting for checkpoints: %v\nstderr:\n%s", r.name, r.err, tail(r.errOut(), 60))
		}
		s = checkpoints(t, r.job)
		return s.Counts.Completed >= n
	})
	return s
}

// out returns what the run printed to standard output so far.
func (r *liveRun) out() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stdout.String()
}

// errOut returns what the run printed to standard error so far.
func (r *liveRun) errOut() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

// exited reports whether the pipeline process has ended.
func (r *liveRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wait waits for the pipeline process to end and fails t if it failed.
func (r *liveRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(pipelineTimeout):
		t.Fatalf("%s did not end within %v", r.name, pipelineTimeout)
	}
	t.Logf("%s ended after %v", r.name, time.Since(r.started).Round(time.Millisecond))
	if r.err != nil {
		t.Fatalf("%s on Flink: %v\nstderr (tail):\n%s", r.name, r.err, tail(r.errOut(), 60))
	}
}

// cancel cancels the run's Flink job and waits for the pipeline process to end. The job
// server reports a cancelled job as failed with Flink's JobCancellationException, so the
// pipeline exits with that error, which cancel expects.
func (r *liveRun) cancel(t *testing.T) {
	t.Helper()
	if err := cluster().Cancel(context.Background(), r.job); err != nil {
		t.Fatalf("cancelling %s's job: %v", r.name, err)
	}
	select {
	case <-r.done:
	case <-time.After(pipelineTimeout):
		t.Fatalf("%s did not end within %v of its job's cancellation", r.name, pipelineTimeout)
	}
	t.Logf("%s cancelled after %v", r.name, time.Since(r.started).Round(time.Millisecond))
	if r.err != nil && !strings.Contains(r.errOut(), "JobCancellationException: Job was cancelled") {
		t.Fatalf("%s on Flink: %v\nstderr (tail):\n%s", r.name, r.err, tail(r.errOut(), 60))
	}
}

// stopWithSavepoint stops the run's job with a savepoint and returns the savepoint's
// path, once the pipeline process has ended.
func (r *liveRun) stopWithSavepoint(t *testing.T) string {
	t.Helper()
	loc, err := cluster().StopWithSavepoint(context.Background(), r.job, 2*time.Minute)
	if err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	r.wait(t)
	return loc
}
