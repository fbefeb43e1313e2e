package emulators

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// RequireEnv names the environment variable that, set to 1, turns every skip
// for a missing node or npm package into a test failure.
const RequireEnv = "BEAMKINESIS_REQUIRE_EMULATORS"

// InstallHint tells a developer how to install what these tests need.
const InstallHint = "install node (>= 18) and run testing/deps/deps.sh npm (or `cd testing/emulators && npm ci`); set " +
	RequireEnv + "=1 to fail instead of skipping"

// Kind names a Kinesis emulator.
type Kind string

// The emulators this package can start, named after their npm packages.
const (
	KinesisLocal Kind = "kinesis-local"
	Kinesalite   Kind = "kinesalite"
	// Dynalite is a DynamoDB implementation (not Kinesis), for the checkpoint table tests.
	Dynalite Kind = "dynalite"
)

// Region is the region clients of Emulator.Client sign for.
const Region = "us-east-1"

// startTimeout bounds how long Start waits for an emulator to answer. A cold
// kinesis-local (an 8 MB Scala.js bundle) takes a few seconds on a busy
// two-core machine.
const startTimeout = 90 * time.Second

// ErrUnavailable reports that node or an npm package is not installed.
var ErrUnavailable = errors.New("emulators: not installed")

// Required reports whether RequireEnv asks for missing emulators to fail
// tests rather than skip them.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Unavailable skips t with err's message and InstallHint, or fails t when
// Required.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%v (%s=1, so this fails instead of skipping)", err, RequireEnv)
	}
	t.Skipf("skipping: %v; %s", err, InstallHint)
}

// DirEnv names an environment variable that, when set, overrides where Dir
// looks for package.json and node_modules.
const DirEnv = "BEAMKINESIS_EMULATORS_DIR"

// Dir returns the directory holding package.json and node_modules: DirEnv if
// set, else the cache that testing/deps/deps.sh installs into once it holds a
// complete install, else the directory of this source file, else (for binaries
// built with -trimpath) testing/emulators under the module root found above the
// working directory.
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	if d := filepath.Join(components.Cache(), "npm"); fileExists(filepath.Join(d, "node_modules", ".installed")) {
		return d
	}
	return sourceDir()
}

// sourceDir is testing/emulators in the source tree, where package.json and this
// package's node scripts live: the directory of this source file, else (for binaries built
// with -trimpath) testing/emulators under the module root found above the working
// directory.
func sourceDir() string {
	if _, file, _, ok := runtime.Caller(0); ok {
		d := filepath.Dir(file)
		if _, err := os.Stat(filepath.Join(d, "package.json")); err == nil {
			return d
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return filepath.Join("testing", "emulators")
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "testing", "emulators")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(wd, "testing", "emulators")
		}
	}
}

// Node returns the path of the node executable. The error wraps
// ErrUnavailable when there is none on PATH.
func Node() (string, error) {
	p, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("%w: node is not on PATH: %v", ErrUnavailable, err)
	}
	return p, nil
}

// PackageDir returns the installed directory of npm package name under
// node_modules. The error wraps ErrUnavailable when node or the package is
// missing.
func PackageDir(name string) (string, error) {
	if _, err := Node(); err != nil {
		return "", err
	}
	dir := filepath.Join(Dir(), "node_modules", name)
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		return "", fmt.Errorf("%w: npm package %s is not installed in %s", ErrUnavailable, name, filepath.Join(Dir(), "node_modules"))
	}
	return dir, nil
}

// Emulator is a running emulator process.
type Emulator struct {
	kind Kind
	url  string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when the process has exited
	err  error         // the process's exit status, once done is closed

	stopOnce sync.Once
	stopErr  error
}

// Start starts an emulator of kind on free loopback ports and returns once it
// answers ListStreams. The error wraps ErrUnavailable when node or its package
// is not installed, and includes the emulator's output when it failed to come
// up. Stop it when done.
func Start(ctx context.Context, kind Kind) (*Emulator, error) {
	var lastErr error
	// A free port found here can be taken by another process before the
	// emulator binds it; try again on fresh ports then.
	for attempt := 0; attempt < 3; attempt++ {
		e, err := start(ctx, kind)
		if err == nil {
			return e, nil
		}
		lastErr = err
		if errors.Is(err, ErrUnavailable) || ctx.Err() != nil || !errors.Is(err, errExited) {
			break
		}
	}
	return nil, lastErr
}

// StartT starts an emulator for a test and stops it when the test ends.
// It skips the test (or fails it, when Required) if the emulator is not
// installed, and fails it if the emulator does not come up.
func StartT(t testing.TB, kind Kind) *Emulator {
	t.Helper()
	e, err := Start(context.Background(), kind)
	if errors.Is(err, ErrUnavailable) {
		Unavailable(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping %s: %v", kind, err)
		}
	})
	return e
}

var errExited = errors.New("exited before answering")

// clientGone keeps dynalite and kinesalite serving when a client goes away in the middle of
// a request (client-gone.cjs), which without it ends them.
//
//go:embed client-gone.cjs
var clientGone []byte

const clientGoneFile = "client-gone.cjs"

func start(ctx context.Context, kind Kind) (*Emulator, error) {
	node, err := Node()
	if err != nil {
		return nil, err
	}
	pkg, err := PackageDir(string(kind))
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	switch kind {
	case KinesisLocal:
		tlsPort, err := freePort()
		if err != nil {
			return nil, err
		}
		cmd = exec.Command(node, filepath.Join(pkg, "main.js"))
		// kinesis-local is configured by environment only; it serves plain
		// HTTP and HTTPS on two ports. State transitions are shortened so
		// tests wait less, and data is kept in memory only.
		cmd.Env = append(os.Environ(),
			"KINESIS_MOCK_PLAIN_PORT="+strconv.Itoa(port),
			"KINESIS_MOCK_TLS_PORT="+strconv.Itoa(tlsPort),
			"KINESIS_MOCK_CERT_PATH="+filepath.Join(pkg, "server.json"),
			"SHOULD_PERSIST_DATA=false",
			"LOAD_DATA_IF_EXISTS=false",
			"LOG_LEVEL=ERROR",
			"SHARD_LIMIT=200",
			"CREATE_STREAM_DURATION=50ms",
			"DELETE_STREAM_DURATION=50ms",
			"MERGE_SHARDS_DURATION=50ms",
			"SPLIT_SHARD_DURATION=50ms",
			"UPDATE_SHARD_COUNT_DURATION=50ms",
			"UPDATE_STREAM_MODE_DURATION=50ms",
			"REGISTER_STREAM_CONSUMER_DURATION=50ms",
			"DEREGISTER_STREAM_CONSUMER_DURATION=50ms",
		)
	case Kinesalite:
		// In memory (memdown) unless --path is given.
		cmd = exec.Command(node, "--require", "./"+clientGoneFile, filepath.Join(pkg, "cli.js"),
			"--port", strconv.Itoa(port),
			"--createStreamMs", "50", "--deleteStreamMs", "50", "--updateStreamMs", "50",
			"--shardLimit", "200")
	case Dynalite:
		// In memory; tables are ACTIVE at once instead of after dynalite's default delay.
		cmd = exec.Command(node, "--require", "./"+clientGoneFile, filepath.Join(pkg, "cli.js"),
			"--port", strconv.Itoa(port),
			"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	default:
		return nil, fmt.Errorf("emulators: unknown emulator %q", kind)
	}
	// Run from a private directory: kinesis-local may write files relative to it.
	wd, err := os.MkdirTemp("", "beamkinesis-"+string(kind)+"-")
	if err != nil {
		return nil, fmt.Errorf("emulators: %w", err)
	}
	cmd.Dir = wd
	if err := os.WriteFile(filepath.Join(wd, clientGoneFile), clientGone, 0o644); err != nil {
		os.RemoveAll(wd)
		return nil, fmt.Errorf("emulators: %w", err)
	}
	out := &tailBuffer{max: 64 << 10}
	cmd.Stdout = out
	cmd.Stderr = out
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(wd)
		return nil, fmt.Errorf("emulators: starting %s: %w", kind, err)
	}
	e := &Emulator{
		kind: kind,
		url:  "http://127.0.0.1:" + strconv.Itoa(port),
		cmd:  cmd,
		out:  out,
		done: make(chan struct{}),
	}
	go func() {
		e.err = cmd.Wait()
		os.RemoveAll(wd)
		close(e.done)
	}()
	if err := e.waitReady(ctx); err != nil {
		e.Stop()
		return nil, fmt.Errorf("emulators: %s on %s: %w\n--- output ---\n%s", kind, e.url, err, e.Output())
	}
	return e, nil
}

// waitReady polls ListStreams (ListTables for dynalite) until the emulator
// answers it, the process exits, ctx ends or startTimeout passes.
func (e *Emulator) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	client := e.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	db := e.DynamoDB(func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		if e.kind == Dynalite {
			_, err = db.ListTables(callCtx, &dynamodb.ListTablesInput{})
		} else {
			_, err = client.ListStreams(callCtx, &kinesis.ListStreamsInput{})
		}
		callCancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-e.done:
			return fmt.Errorf("%w (%v); last ListStreams error: %v", errExited, e.err, lastErr)
		case <-ctx.Done():
			return fmt.Errorf("not answering ListStreams after %v: %v", startTimeout, lastErr)
		case <-tick.C:
		}
	}
}

// Kind returns which emulator e is.
func (e *Emulator) Kind() Kind { return e.kind }

// URL returns the emulator's plain-HTTP endpoint, e.g. "http://127.0.0.1:40123".
func (e *Emulator) URL() string { return e.url }

// Client returns an aws-sdk-go-v2 Kinesis client for the emulator: region
// Region, static credentials "test"/"test", BaseEndpoint URL and the HTTP
// client of kinesistest.HTTPClient. optFns adjust the options further.
func (e *Emulator) Client(optFns ...func(*kinesis.Options)) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region:       Region,
		BaseEndpoint: aws.String(e.url),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   kinesistest.HTTPClient(),
	}, optFns...)
}

// DynamoDB returns an aws-sdk-go-v2 DynamoDB client for the emulator (dynalite),
// configured as Client is.
func (e *Emulator) DynamoDB(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       Region,
		BaseEndpoint: aws.String(e.url),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   kinesistest.HTTPClient(),
	}, optFns...)
}

// Output returns the last 64 KiB the emulator wrote to stdout and stderr.
func (e *Emulator) Output() string { return e.out.String() }

// Exited reports whether the emulator's process has ended, and with what error.
func (e *Emulator) Exited() (bool, error) {
	select {
	case <-e.done:
		return true, e.err
	default:
		return false, nil
	}
}

// Stop kills the emulator's process group and waits for the process to exit.
// The emulators keep their data in memory only, so nothing is lost by not
// asking them to shut down gracefully (which kinesis-local would delay while
// clients hold keep-alive connections). It is safe to call more than once.
func (e *Emulator) Stop() error {
	e.stopOnce.Do(func() {
		select {
		case <-e.done:
			return // exited already
		default:
		}
		kill(e.cmd)
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			e.stopErr = fmt.Errorf("emulators: %s (pid %d) did not exit after SIGKILL", e.kind, e.cmd.Process.Pid)
		}
	})
	return e.stopErr
}

// RunNode runs the node script at path (relative to this package's source directory
// unless absolute, with the npm packages of Dir on NODE_PATH)
// with args and stdin, and returns its standard output. The error wraps
// ErrUnavailable when node is missing, and quotes the script's standard
// error when it fails.
func RunNode(ctx context.Context, script string, stdin []byte, args ...string) ([]byte, error) {
	node, err := Node()
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(script) {
		script = filepath.Join(sourceDir(), script)
	}
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = Dir()
	// The scripts live in the source tree, the packages they require wherever Dir says.
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(Dir(), "node_modules"))
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("emulators: node %s: %w\n--- stderr ---\n%s", filepath.Base(script), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("emulators: finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last max bytes written to it; it is safe for
// concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
	cut bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.cut = true
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cut {
		return "[...]\n" + string(b.buf)
	}
	return string(b.buf)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
