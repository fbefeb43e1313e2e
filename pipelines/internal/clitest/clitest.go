// Package clitest runs a pipeline's command as its user does, for tests that assert what it
// prints and its exit status: the test builds its own package's main once (go build) and
// runs the binary as a subprocess, in an environment that holds no AWS settings but the
// test's.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildDir  string
)

// BinaryDirEnv names an environment variable that, when set, names a directory of prebuilt
// commands (named after their packages' directories) to run instead of building them, e.g.
// to see what an earlier build printed.
const BinaryDirEnv = "BEAMKINESIS_CLITEST_BINARIES"

// Binary returns the command of the test's package, built once per test binary (the first
// call builds it; a failed build fails every caller).
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if dir := os.Getenv(BinaryDirEnv); dir != "" {
			wd, err := os.Getwd()
			binary, buildErr = filepath.Join(dir, filepath.Base(wd)), err
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "clitest-")
		if buildErr != nil {
			return
		}
		wd, err := os.Getwd()
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(buildDir, filepath.Base(wd))
		out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// Cleanup removes the built binary; call it from TestMain after the tests ran.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Result is what a run printed and how it ended.
type Result struct {
	Stdout, Stderr string
	// Code is the exit status.
	Code int
}

// StderrLines are the lines of standard error.
func (r Result) StderrLines() []string {
	s := strings.TrimSuffix(r.Stderr, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// LastLine is the last line of standard error, "" when there is none.
func (r Result) LastLine() string {
	lines := r.StderrLines()
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// Env is the environment of a run: the test process's without any AWS_ variable, with no
// shared AWS config or credentials files and no instance metadata, plus set (NAME=value).
func Env(t testing.TB, set ...string) []string {
	none := filepath.Join(t.TempDir(), "none")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "AWS_CA_BUNDLE=") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_CONFIG_FILE="+none, "AWS_SHARED_CREDENTIALS_FILE="+none, "AWS_EC2_METADATA_DISABLED=true")
	return append(env, set...)
}

// Run runs the command of the test's package with args in env, for at most timeout.
func Run(t testing.TB, env []string, timeout time.Duration, args ...string) Result {
	t.Helper()
	bin := Binary(t) // the build's time is not the run's
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v did not end within %v; stderr:\n%s", args, timeout, stderr.String())
	}
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running %v: %v", args, err)
	}
	return res
}

// Expect fails t unless the run exited with code and its last line of standard error is
// want.
func Expect(t testing.TB, r Result, code int, want string) {
	t.Helper()
	if r.Code != code || r.LastLine() != want {
		t.Errorf("exit %d, last line\n  %s\nwant exit %d, last line\n  %s\nstderr:\n%s", r.Code, r.LastLine(), code, want, r.Stderr)
	}
}
