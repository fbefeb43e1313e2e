// Package javacoder runs Beam Java's own coders over values that Go encoded, the way a Java
// runner (Flink, Dataflow) builds them from a pipeline's components, and returns what Java
// encodes again. A test uses it to prove that a Java runner which decodes and re-encodes a
// value between stages hands the next Go stage the very bytes the Go SDK wrote.
//
// It compiles Transcode.java against the Beam Java classpath of the project's Flink job
// server (testing/flink/jobserver.sh classpath, which fetches it from Maven once) and runs
// one JVM per call. Without java, javac or that classpath the tests skip, or fail under
// components.RequireEnv=1.
package javacoder

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/protobuf/proto"

	"github.com/beamkinesis/beamkinesis/testing/components"
)

//go:embed Transcode.java
var transcodeJava []byte

// ClasspathEnv names an environment variable holding a Beam Java classpath to use instead of
// the job server's.
const ClasspathEnv = "BEAMKINESIS_BEAM_JAVA_CLASSPATH"

// Value is one encoded value and the id of its coder in the components.
type Value struct {
	CoderID string
	Bytes   []byte
}

// Result is what Java made of a Value: the bytes it encoded again and how it printed the
// decoded value, or the error it met.
type Result struct {
	Bytes []byte
	Java  string
	Err   string
}

var (
	prepared struct {
		once      sync.Once
		classpath string
		dir       string
		err       error
	}
)

// prepare finds the classpath and compiles Transcode.java once per process.
func prepare(ctx context.Context) (classpath, dir string, err error) {
	p := &prepared
	p.once.Do(func() {
		p.classpath, p.err = beamClasspath(ctx)
		if p.err != nil {
			return
		}
		p.dir, p.err = compile(ctx, p.classpath)
	})
	return p.classpath, p.dir, p.err
}

// beamClasspath returns ClasspathEnv, or the job server's classpath from jobserver.sh.
func beamClasspath(ctx context.Context) (string, error) {
	if cp := os.Getenv(ClasspathEnv); cp != "" {
		return cp, nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("%w: cannot locate testing/flink/jobserver.sh", components.ErrUnavailable)
	}
	script := filepath.Join(filepath.Dir(file), "..", "flink", "jobserver.sh")
	if _, err := exec.LookPath("mvn"); err != nil {
		if _, err := exec.LookPath("java"); err != nil {
			return "", fmt.Errorf("%w: java and mvn are not installed", components.ErrUnavailable)
		}
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "classpath")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s classpath: %v\n%s", components.ErrUnavailable, script, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// compile builds Transcode.class into a cache directory named after the source and
// classpath, unless it is there already.
func compile(ctx context.Context, classpath string) (string, error) {
	if _, err := exec.LookPath("javac"); err != nil {
		return "", fmt.Errorf("%w: javac is not installed (a JDK 11 or later is needed)", components.ErrUnavailable)
	}
	sum := sha256.Sum256(append(append([]byte{}, transcodeJava...), classpath...))
	dir := filepath.Join(components.Cache(), "javacoder", hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "Transcode.class")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", fmt.Errorf("javacoder: making the cache directory: %w", err)
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), "build-"); err != nil {
			return "", fmt.Errorf("javacoder: making a build directory: %w", err)
		}
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "Transcode.java")
	if err := os.WriteFile(src, transcodeJava, 0o644); err != nil {
		return "", fmt.Errorf("javacoder: writing %s: %w", src, err)
	}
	out, err := exec.CommandContext(ctx, "javac", "-nowarn", "-cp", classpath, "-d", tmp, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("javacoder: compiling Transcode.java: %v\n%s", err, out)
	}
	if err := os.Remove(src); err != nil {
		return "", fmt.Errorf("javacoder: %w", err)
	}
	// Another process may have compiled it meanwhile; either copy will do.
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "Transcode.class")); statErr != nil {
			return "", fmt.Errorf("javacoder: moving the classes into %s: %w", dir, err)
		}
	}
	return dir, nil
}

// Transcode decodes every value with Beam Java's runner-side coder for its coder id in comps
// and encodes it again. The error is for a failure to run Java at all; a value Java could not
// decode has its Result.Err set. It wraps components.ErrUnavailable when Java or the Beam
// Java classpath is missing.
func Transcode(ctx context.Context, comps *pipepb.Components, values []Value) ([]Result, error) {
	classpath, dir, err := prepare(ctx)
	if err != nil {
		return nil, err
	}
	pb, err := proto.Marshal(comps)
	if err != nil {
		return nil, fmt.Errorf("javacoder: marshalling the components: %w", err)
	}
	f, err := os.CreateTemp("", "javacoder-components-*.pb")
	if err != nil {
		return nil, fmt.Errorf("javacoder: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(pb); err != nil {
		f.Close()
		return nil, fmt.Errorf("javacoder: writing %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("javacoder: writing %s: %w", f.Name(), err)
	}
	var in bytes.Buffer
	for _, v := range values {
		fmt.Fprintf(&in, "%s %s\n", v.CoderID, hex.EncodeToString(v.Bytes))
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "java", "-cp", dir+string(os.PathListSeparator)+classpath, "Transcode", f.Name())
	cmd.Stdin, cmd.Stderr = &in, &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("javacoder: running Transcode: %v\n%s", err, stderr.String())
	}
	var results []Result
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "OK "):
			h, java, _ := strings.Cut(strings.TrimPrefix(line, "OK "), " ")
			b, err := hex.DecodeString(h)
			if err != nil {
				return nil, fmt.Errorf("javacoder: Transcode printed %q: %w", line, err)
			}
			results = append(results, Result{Bytes: b, Java: java})
		case strings.HasPrefix(line, "ERROR "):
			results = append(results, Result{Err: strings.TrimPrefix(line, "ERROR ")})
		default:
			return nil, fmt.Errorf("javacoder: Transcode printed %q", line)
		}
	}
	if len(results) != len(values) {
		return nil, fmt.Errorf("javacoder: Transcode answered %d of %d values\n%s", len(results), len(values), stderr.String())
	}
	return results, nil
}

// TranscodeT is Transcode for a test: it skips t, or fails it under components.RequireEnv=1,
// when Java or the classpath is missing, and fails it on any other error.
func TranscodeT(t testing.TB, comps *pipepb.Components, values []Value) []Result {
	t.Helper()
	res, err := Transcode(context.Background(), comps, values)
	if errors.Is(err, components.ErrUnavailable) {
		components.Unavailable(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}
