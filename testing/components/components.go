// Package components finds the third-party components that testing/deps/deps.sh installs
// for the test suite (a Python virtualenv with PyPI packages, npm packages, Flink), so a
// test can run against a real implementation. A missing component skips the test with the
// command that installs it, unless RequireEnv=1 (set by testing/test.sh and CI), which
// makes it a failure.
package components

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RequireEnv names the environment variable that, set to 1, turns a missing component into
// a test failure instead of a skip.
const RequireEnv = "BEAMKINESIS_REQUIRE_COMPONENTS"

// PythonEnv names the environment variable holding the virtualenv's python executable;
// testing/deps/deps.sh prints it.
const PythonEnv = "BEAMKINESIS_PYTHON"

// InstallHint says how to install the components.
const InstallHint = "install them with testing/deps/deps.sh (or run the whole suite with testing/test.sh)"

// ErrUnavailable is wrapped by the errors of components that are not installed.
var ErrUnavailable = errors.New("component not installed")

// Cache is the cache root deps.sh installs into: BEAMKINESIS_CACHE, else
// $XDG_CACHE_HOME/beamkinesis, else ~/.cache/beamkinesis.
func Cache() string {
	if d := os.Getenv("BEAMKINESIS_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "beamkinesis")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "beamkinesis-cache")
	}
	return filepath.Join(home, ".cache", "beamkinesis")
}

// Python returns the virtualenv's python executable: PythonEnv if set, else the one deps.sh
// makes in the cache. The error wraps ErrUnavailable when there is none.
func Python() (string, error) {
	if p := os.Getenv(PythonEnv); p != "" {
		return p, nil
	}
	p := filepath.Join(Cache(), "venv", "bin", "python")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: no Python virtualenv at %s", ErrUnavailable, filepath.Dir(filepath.Dir(p)))
	}
	return p, nil
}

// Required reports whether RequireEnv asks for missing components to fail tests.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Unavailable skips t because of err, or fails it when Required.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%v (%s=1, so this fails instead of skipping)", err, RequireEnv)
	}
	t.Skipf("skipping: %v; %s", err, InstallHint)
}

// PythonT returns the virtualenv's python for t, or skips or fails t (see Unavailable).
func PythonT(t testing.TB) string {
	t.Helper()
	p, err := Python()
	if err != nil {
		Unavailable(t, err)
	}
	return p
}

// JavaClientEnv names the environment variable holding the directory where deps.sh built the
// Java SDK v2 conformance client (testing/conformance/java-sdkv2): classes/ and classpath.txt.
const JavaClientEnv = "BEAMKINESIS_JAVA_CLIENT"

// JavaClient returns the java executable and the class path of the Java SDK v2 conformance
// client that deps.sh built (JavaClientEnv, else <Cache>/java-sdkv2). The error wraps
// ErrUnavailable when java or the build is missing.
func JavaClient() (java, classPath string, err error) {
	return builtJava(JavaClientEnv, "java-sdkv2", "Java SDK v2 client", "java")
}

// builtJava returns the java executable and the class path of a Java program deps.sh built
// into the directory named by env (else <Cache>/cacheDir) as classes/ and classpath.txt;
// what names the program and component the deps.sh argument in errors, which wrap
// ErrUnavailable.
func builtJava(env, cacheDir, what, component string) (java, classPath string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", fmt.Errorf("%w: java is not on PATH", ErrUnavailable)
	}
	dir := os.Getenv(env)
	if dir == "" {
		dir = filepath.Join(Cache(), cacheDir)
	}
	deps, err := os.ReadFile(filepath.Join(dir, "classpath.txt"))
	if err != nil {
		return "", "", fmt.Errorf("%w: no %s built in %s (testing/deps/deps.sh %s)", ErrUnavailable, what, dir, component)
	}
	return java, filepath.Join(dir, "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(deps)), nil
}

// JavaClientT returns JavaClient's results for t, or skips or fails t (see Unavailable).
func JavaClientT(t testing.TB) (java, classPath string) {
	t.Helper()
	java, classPath, err := JavaClient()
	if err != nil {
		Unavailable(t, err)
	}
	return java, classPath
}
