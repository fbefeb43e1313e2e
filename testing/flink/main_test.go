package flink

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// Environment variables that select the job server.
const (
	// envEndpoint names a running job server's job endpoint, host:port.
	envEndpoint = "BEAMKINESIS_FLINK_ENDPOINT"
	// envStart, set to 1, makes the tests start the standalone cluster and its job server
	// with flink.sh; set to local, a job server with an in-JVM cluster with jobserver.sh.
	envStart = "BEAMKINESIS_FLINK"
	// envREST is the standalone cluster's REST API URL; flink.sh start prints it. Without
	// it the tests that need the cluster (TaskManager kill, savepoints, REST checks) skip.
	envREST = "BEAMKINESIS_FLINK_REST"
	// envClusterState is the standalone cluster's state directory, which cluster.sh
	// kill-tm and start-tm act on; flink.sh start prints it.
	envClusterState = "BEAMKINESIS_FLINK_CLUSTER_STATE"
	// envRequire, set to 1, makes a missing job server a failure instead of a skip.
	envRequire = "BEAMKINESIS_REQUIRE_FLINK"
	// envBeamVersion is the Beam release of the job server's Flink runner, when known;
	// jobserver.sh start prints it.
	envBeamVersion = "BEAMKINESIS_FLINK_BEAM_VERSION"
)

// pipelineTimeout bounds one pipeline run, submission to exit.
const pipelineTimeout = 5 * time.Minute

// suite is what TestMain prepared for the tests.
var suite struct {
	// endpoint is the job server's job endpoint; empty when there is none.
	endpoint string
	// beamVersion is the Beam release of the job server's runner; empty when unknown.
	beamVersion string
	// rest is the standalone cluster's REST API URL; empty with an in-JVM cluster.
	rest string
	// clusterState is the standalone cluster's state directory for cluster.sh.
	clusterState string
	// requested is whether the environment asked for the tests (envEndpoint or envStart).
	requested bool
	// unavailable says why there is no job server (or why the set-up failed).
	unavailable string
	// bins maps a pipeline's directory name under pipelines/ to its built binary.
	bins map[string]string
}

// pipelines are the pipelines the tests run, by directory under pipelines/.
var pipelines = []string{"wordcount", "kinesis-to-kinesis", "kinesis-to-files"}

func TestMain(m *testing.M) {
	// The tests that build a pipeline here run its workers in this process (LOOPBACK).
	flag.Parse()
	beam.Init()
	os.Exit(run(m))
}

// run sets up the job server and the pipeline binaries, runs the tests and tears down
// what it started.
func run(m *testing.M) int {
	stop, err := setUp()
	if err != nil {
		suite.unavailable = err.Error()
		suite.endpoint = ""
	}
	code := m.Run()
	if stop != nil {
		stopped := time.Now()
		defer func() {
			fmt.Fprintf(os.Stderr, "flink e2e: tore down in %v\n", time.Since(stopped).Round(time.Millisecond))
		}()
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the Flink job server:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// setUp finds or starts the job server and builds the pipelines. It returns a function
// that stops what it started.
func setUp() (stop func() error, err error) {
	suite.endpoint, suite.beamVersion = os.Getenv(envEndpoint), os.Getenv(envBeamVersion)
	suite.rest, suite.clusterState = os.Getenv(envREST), os.Getenv(envClusterState)
	start := os.Getenv(envStart)
	suite.requested = suite.endpoint != "" || start == "1" || start == "local"
	if suite.endpoint == "" {
		if !suite.requested {
			return nil, fmt.Errorf("no Flink job server: set %s=host:port of a running one, or %s=1 to start a standalone cluster and its job server with testing/flink/flink.sh (%s=local: a job server with an in-JVM cluster)", envEndpoint, envStart, envStart)
		}
		script := "flink.sh"
		if start == "local" {
			script = "jobserver.sh"
		}
		env, stopServer, err := startScript(script)
		if err != nil {
			return nil, err
		}
		stop = stopServer
		suite.endpoint, suite.beamVersion = env[envEndpoint], env[envBeamVersion]
		suite.rest, suite.clusterState = env[envREST], env[envClusterState]
	}
	dir, err := os.MkdirTemp("", "beamkinesis-flink-bin")
	if err != nil {
		return stop, fmt.Errorf("making a directory for the pipeline binaries: %w", err)
	}
	// One go build links the binaries in parallel; with -o a directory, each is named after
	// its package's directory.
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	suite.bins = map[string]string{}
	for _, name := range pipelines {
		args = append(args, "github.com/beamkinesis/beamkinesis/pipelines/"+name)
		suite.bins[name] = filepath.Join(dir, name)
	}
	stopServer := stop
	stop = func() error {
		var err error
		if stopServer != nil {
			err = stopServer()
		}
		return errors.Join(err, os.RemoveAll(dir))
	}
	built := time.Now()
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return stop, fmt.Errorf("building the pipelines %v: %w\n%s", pipelines, err, out)
	}
	fmt.Fprintf(os.Stderr, "flink e2e: built %v in %v\n", pipelines, time.Since(built).Round(time.Millisecond))
	return stop, nil
}

// startScript starts what script (flink.sh or jobserver.sh) starts, with its state in
// directories of its own, and returns the KEY=value lines it printed and a function that
// stops it.
func startScript(script string) (env map[string]string, stop func() error, err error) {
	state, err := os.MkdirTemp("", "beamkinesis-flink-state")
	if err != nil {
		return nil, nil, fmt.Errorf("making the Flink state directory: %w", err)
	}
	run := func(verb string) *exec.Cmd {
		cmd := exec.Command("bash", script, verb)
		cmd.Env = append(os.Environ(),
			"BEAMKINESIS_FLINK_STATE="+filepath.Join(state, "jobserver"),
			envClusterState+"="+filepath.Join(state, "cluster"))
		cmd.Stderr = os.Stderr
		return cmd
	}
	started := time.Now()
	out, err := run("start").Output()
	if err != nil {
		// The script printed why, and the logs' paths, to stderr.
		return nil, nil, fmt.Errorf("starting Flink with %s (state in %s): %w", script, state, err)
	}
	env = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	if env[envEndpoint] == "" {
		err := run("stop").Run()
		return nil, nil, errors.Join(fmt.Errorf("%s start printed no %s= line: %q", script, envEndpoint, out), err)
	}
	fmt.Fprintf(os.Stderr, "flink e2e: %s started the job server on %s in %v\n", script, env[envEndpoint], time.Since(started).Round(time.Millisecond))
	return env, func() error {
		if err := run("stop").Run(); err != nil {
			return fmt.Errorf("%s stop: %w (logs in %s)", script, err, state)
		}
		return os.RemoveAll(state)
	}, nil
}

// needFlink skips t when the environment asked for no job server, and fails it when the
// set-up failed or, under BEAMKINESIS_REQUIRE_FLINK=1, when there is no job server.
func needFlink(t *testing.T) {
	t.Helper()
	switch {
	case suite.endpoint != "":
		return
	case suite.requested:
		t.Fatalf("the Flink e2e set-up failed: %s", suite.unavailable)
	case os.Getenv(envRequire) == "1":
		t.Fatalf("%s=1 but %s", envRequire, suite.unavailable)
	}
	t.Skip(suite.unavailable)
}

// runPipeline runs the pipeline binary of pipelines/name on the job server with the
// portable flags and args, and returns its standard output. The workers run in the
// pipeline's process (LOOPBACK), where they reach the test's loopback Kinesis server. When
// t fails, the tail of the pipeline's standard error is logged.
func runPipeline(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pipelineTimeout)
	defer cancel()
	flags := append([]string{"--runner=flink", "--endpoint=" + suite.endpoint, "--environment_type=LOOPBACK"}, args...)
	cmd := exec.CommandContext(ctx, suite.bins[name], flags...)
	cmd.Env = append(os.Environ(),
		"AWS_ACCESS_KEY_ID=flink-e2e", "AWS_SECRET_ACCESS_KEY=flink-e2e", "AWS_EC2_METADATA_DISABLED=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %v", name, strings.Join(flags, " "), time.Since(started).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s on Flink: %v (context: %v)\nstdout:\n%s\nstderr (tail):\n%s", name, err, ctx.Err(), stdout.String(), tail(stderr.String(), 60))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, tail(stderr.String(), 60))
		}
	})
	return stdout.String()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
