package components

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// KCLEnv names the environment variable holding the directory where deps.sh built the KCL
// consumer of the interop test (testing/kcl): classes/ and classpath.txt.
const KCLEnv = "BEAMKINESIS_KCL"

// KCL returns the java executable and the class path of the KCL consumer that deps.sh built
// (KCLEnv, else <Cache>/kcl). The error wraps ErrUnavailable when java or the build is
// missing.
func KCL() (java, classPath string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", fmt.Errorf("%w: java is not on PATH", ErrUnavailable)
	}
	dir := os.Getenv(KCLEnv)
	if dir == "" {
		dir = filepath.Join(Cache(), "kcl")
	}
	deps, err := os.ReadFile(filepath.Join(dir, "classpath.txt"))
	if err != nil {
		return "", "", fmt.Errorf("%w: no KCL consumer built in %s (testing/deps/deps.sh kcl)", ErrUnavailable, dir)
	}
	return java, filepath.Join(dir, "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(deps)), nil
}

// KCLT returns KCL's results for t, or skips or fails t (see Unavailable).
func KCLT(t testing.TB) (java, classPath string) {
	t.Helper()
	java, classPath, err := KCL()
	if err != nil {
		Unavailable(t, err)
	}
	return java, classPath
}
