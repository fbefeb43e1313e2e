// Package childjob runs a job in a child process of the test binary, for the tests that kill
// a job mid-run (SIGKILL: no drain, no savepoint) and start another on what it left. The
// parent test starts one of its package's tests in the child with the job's arguments in an
// environment variable; in a normal run, where the variable is unset, that test skips itself
// (Args).
package childjob

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Args returns the fields of the value Start gave env in this child process, and skips the
// calling test when env is unset: a child-job test runs only as the child of the test that
// starts it.
func Args(t testing.TB, env string) []string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("runs only as the child job of another test (%s is not set)", env)
	}
	return strings.Fields(v)
}

// Job is a child process running one test of the test binary.
type Job struct {
	// Log is the file the child's standard output and error go to.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs the test named test of this test binary in a child process, with the
// environment variable env set to value; the child's output goes to a log file in a
// temporary directory of t. A child still running when t ends is killed.
func Start(t testing.TB, test, env, value string) *Job {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), "child.log"))
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{Log: log.Name(), done: make(chan struct{})}
	j.cmd = exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	j.cmd.Env = append(os.Environ(), env+"="+value)
	j.cmd.Stdout, j.cmd.Stderr = log, log
	if err := j.cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("starting %s in a child process: %v", test, err)
	}
	go func() {
		j.err = j.cmd.Wait()
		log.Close()
		close(j.done)
	}()
	t.Cleanup(func() { j.Kill(t) })
	return j
}

// Exited reports whether the child has ended, and with what error.
func (j *Job) Exited() (bool, error) {
	select {
	case <-j.done:
		return true, j.err
	default:
		return false, nil
	}
}

// Kill kills the child with SIGKILL, unless it has ended, and waits for it to end.
func (j *Job) Kill(t testing.TB) {
	t.Helper()
	if ended, _ := j.Exited(); ended {
		return
	}
	if err := j.cmd.Process.Kill(); err != nil {
		t.Fatalf("killing the child job: %v", err)
	}
	<-j.done
}

// Wait waits for the child to end by itself and returns its error; the test fails, naming
// the child's log, when timeout passes first.
func (j *Job) Wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-j.done:
		return j.err
	case <-time.After(timeout):
		t.Fatalf("the child job did not end within %v; its log is in %s", timeout, j.Log)
		return nil
	}
}

// Await polls ready until it holds, while the child runs: the test fails, naming what it
// waited for and the child's log, when the child ends first or timeout passes.
func (j *Job) Await(t testing.TB, timeout time.Duration, what string, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ready() {
		if ended, err := j.Exited(); ended {
			t.Fatalf("the child job exited before it was killed (%v); its log is in %s", err, j.Log)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child job did not %s within %v; its log is in %s", what, timeout, j.Log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
