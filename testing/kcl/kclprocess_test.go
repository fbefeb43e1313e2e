package kcl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/testing/components"
)

// kclRun is what one run of the KCL consumer did.
type kclRun struct {
	Records []rec
	Log     string
	Took    time.Duration
}

// kclBuild is the KCL consumer (testing/kcl) built on one version of KCL: deps.sh kcl builds
// it on KCL 3.1 (the pom's kcl.version) and on KCL 3.5 (the pom's profile kcl-3.5).
type kclBuild struct {
	// Version is the amazon-kinesis-client version on the class path.
	Version         string
	java, classPath string
}

// kcl31 is the consumer on KCL 3.1 (components.KCL: BEAMKINESIS_KCL, else <cache>/kcl), which
// every scenario runs on. Pointing BEAMKINESIS_KCL at the KCL 3.5 build runs them on 3.5.
func kcl31(t *testing.T) kclBuild {
	t.Helper()
	java, cp := components.KCLT(t)
	return kclBuild{Version: kclVersion(t, cp), java: java, classPath: cp}
}

// kcl35Env names the environment variable holding the directory where deps.sh built the
// consumer on KCL 3.5 (classes/ and classpath.txt); without it, <cache>/kcl-3.5.
const kcl35Env = "BEAMKINESIS_KCL35"

// kcl35 is the consumer on KCL 3.5, or skips or fails t (components.Unavailable) when it is
// not built.
func kcl35(t *testing.T) kclBuild {
	t.Helper()
	dir := os.Getenv(kcl35Env)
	if dir == "" {
		dir = filepath.Join(components.Cache(), "kcl-3.5")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		components.Unavailable(t, fmt.Errorf("%w: java is not on PATH", components.ErrUnavailable))
	}
	deps, err := os.ReadFile(filepath.Join(dir, "classpath.txt"))
	if err != nil {
		components.Unavailable(t, fmt.Errorf("%w: no KCL consumer on KCL 3.5 built in %s (testing/deps/deps.sh kcl)", components.ErrUnavailable, dir))
	}
	cp := filepath.Join(dir, "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(deps))
	b := kclBuild{Version: kclVersion(t, cp), java: java, classPath: cp}
	if !strings.HasPrefix(b.Version, "3.5.") {
		t.Fatalf("%s holds the consumer on KCL %s, want 3.5.x (testing/deps/deps.sh kcl)", dir, b.Version)
	}
	return b
}

var kclJar = regexp.MustCompile(`amazon-kinesis-client-([0-9][^/` + string(os.PathListSeparator) + `]*)\.jar`)

// kclVersion is the version of the amazon-kinesis-client jar on the class path cp.
func kclVersion(t *testing.T, cp string) string {
	t.Helper()
	m := kclJar.FindStringSubmatch(cp)
	if m == nil {
		t.Fatalf("no amazon-kinesis-client jar on the KCL consumer's class path %s", cp)
	}
	return m[1]
}

// runKCL runs the KCL consumer k as worker on the lease table app until it wrote maxRecords
// records, and returns what it wrote. flags are more of the consumer's flags.
func runKCL(t *testing.T, k kclBuild, kinesisURL, dynamoURL, stream, app, worker string, maxRecords, checkpointEvery int, flags ...string) kclRun {
	t.Helper()
	return startKCL(t, k, kinesisURL, dynamoURL, stream, app, worker, maxRecords, checkpointEvery, flags...).wait(t)
}

// kclProcess is a running KCL consumer.
type kclProcess struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	logs    *bytes.Buffer
	out     string
	worker  string
	version string
	max     int
	start   time.Time
}

// startKCL starts the KCL consumer k; wait collects what it wrote. maxRecords 0 runs it
// until stop.
func startKCL(t *testing.T, k kclBuild, kinesisURL, dynamoURL, stream, app, worker string, maxRecords, checkpointEvery int, flags ...string) *kclProcess {
	t.Helper()
	p := &kclProcess{logs: &bytes.Buffer{}, out: filepath.Join(t.TempDir(), worker+".tsv"), worker: worker, version: k.Version, max: maxRecords}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	p.cancel = cancel
	args := []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=" + logLevel(), "-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-cp", k.classPath, "dev.beamkinesis.kcl.Consumer",
		"--kinesis-endpoint", kinesisURL, "--dynamodb-endpoint", dynamoURL,
		"--stream", stream, "--app", app, "--worker", worker, "--out", p.out,
		"--max-records", strconv.Itoa(maxRecords), "--checkpoint-every", strconv.Itoa(checkpointEvery),
		"--failover-ms", "2000", "--max-seconds", "60", "--protocol", kclProtocol()}
	p.cmd = exec.CommandContext(ctx, k.java, append(args, flags...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting the KCL consumer on KCL %s: %v", k.Version, err)
	}
	t.Cleanup(func() { // a test that failed early: end the process
		if p.cmd.ProcessState == nil {
			p.cancel()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// stop asks the consumer to shut down gracefully (SIGTERM), as an operator would.
func (p *kclProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signalling the KCL consumer: %v", err)
	}
}

// wait waits for the consumer to exit and returns what it wrote.
func (p *kclProcess) wait(t *testing.T) kclRun {
	t.Helper()
	defer p.cancel()
	err := p.cmd.Wait()
	run := kclRun{Log: p.logs.String(), Took: time.Since(p.start)}
	if dir := os.Getenv("BEAMKINESIS_KCL_LOG_DIR"); dir != "" { // for debugging: keep the log
		_ = os.WriteFile(filepath.Join(dir, p.worker+".log"), p.logs.Bytes(), 0o644)
	}
	if err != nil {
		var exit *exec.ExitError
		// A signal ends the JVM through its shutdown hook with exit code 143.
		if !(errors.As(err, &exit) && exit.ExitCode() == 143 && p.max == 0) {
			if errors.As(err, &exit) && exit.ExitCode() == 3 {
				t.Fatalf("the KCL consumer on KCL %s did not reach %d records in time; its log:\n%s", p.version, p.max, tail(run.Log, 60))
			}
			t.Fatalf("the KCL consumer on KCL %s: %v; its log:\n%s", p.version, err, tail(run.Log, 60))
		}
	}
	f, err := os.Open(p.out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 5 {
			t.Fatalf("the KCL consumer wrote %q; want 5 tab-separated columns", sc.Text())
		}
		sub, err := strconv.ParseInt(cols[3], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		data, err := base64.StdEncoding.DecodeString(cols[4])
		if err != nil {
			t.Fatal(err)
		}
		run.Records = append(run.Records, rec{Shard: cols[0], PK: cols[1], Seq: cols[2], Sub: sub, Data: data})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return run
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// sinks hold what collectFn saw, per key; the pipelines run in this process (Prism with
// loopback workers).
var (
	sinksMu sync.Mutex
	sinks   = map[string]*sink{}
)

// logLevel is the KCL consumer's log level: BEAMKINESIS_KCL_LOG_LEVEL, else warn.
func logLevel() string {
	if l := os.Getenv("BEAMKINESIS_KCL_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}

// kclProtocol is the KCL consumer's HTTP protocol to Kinesis: BEAMKINESIS_KCL_PROTOCOL (h2 or
// http1.1), else http1.1.
func kclProtocol() string {
	if p := os.Getenv("BEAMKINESIS_KCL_PROTOCOL"); p != "" {
		return p
	}
	return "http1.1"
}
