package components

import "testing"

// KCLEnv names the environment variable holding the directory where deps.sh built the KCL
// consumer of the interop test (testing/kcl): classes/ and classpath.txt.
const KCLEnv = "BEAMKINESIS_KCL"

// KCL returns the java executable and the class path of the KCL consumer that deps.sh built
// (KCLEnv, else <Cache>/kcl). The error wraps ErrUnavailable when java or the build is
// missing.
func KCL() (java, classPath string, err error) {
	return builtJava(KCLEnv, "kcl", "KCL consumer", "kcl")
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
