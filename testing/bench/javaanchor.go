package main

// The Beam Java side of the --anchors pass: the Maven build of
// testing/anchors/java-kinesisio and one JVM per run, whose last stdout line is its report.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// javaStats is what a Beam Java run's log and report say about how it read or wrote.
type javaStats struct {
	First        time.Duration // from Pipeline.run to the first record counted
	ReaderStarts int           // KinesisReader.start calls ("Starting reader using" at INFO)
	StuckCloses  int           // reader closes that waited 30 s for a shard thread (ShardReadersPool.stop)
	Bundles      int64         // bundles that reached the counting step
	MaxBundle    int64         // the largest of them
}

// anchorReport is what the Java programs print as their last stdout line.
type anchorReport struct {
	Program  string               `json:"program"`
	Complete bool                 `json:"complete"`
	Records  int64                `json:"records"`
	Checksum string               `json:"checksum"`
	Seconds  float64              `json:"seconds"`
	First    float64              `json:"first_seconds"`
	Bundles  int64                `json:"bundles"`
	MaxBndl  int64                `json:"max_bundle"`
	Shards   map[string]shardSpan `json:"shards"`
}

// javaAnchor runs the Java programs.
type javaAnchor struct {
	dir       string
	classpath string
	version   string // the Beam Java release in the pom
	Build     time.Duration
	Built     string // "offline", "online" or "up to date"
}

// findAnchorProject finds testing/anchors/java-kinesisio from the working directory upwards.
func findAnchorProject() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		p := filepath.Join(dir, "testing", "anchors", "java-kinesisio")
		if _, err := os.Stat(filepath.Join(p, "pom.xml")); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testing/anchors/java-kinesisio/pom.xml not found above the working directory")
		}
		dir = parent
	}
}

// anchorToolchain reports whether java and mvn are on PATH.
func anchorToolchain() error {
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: %w", tool, err)
		}
	}
	return nil
}

// buildJavaAnchor packages the Maven project unless target/ is newer than its sources:
// offline first (a warm ~/.m2), then online.
func buildJavaAnchor(ctx context.Context, cfg anchorsConfig) (*javaAnchor, error) {
	if err := anchorToolchain(); err != nil {
		return nil, err
	}
	dir := cfg.ProjectDir
	if dir == "" {
		var err error
		if dir, err = findAnchorProject(); err != nil {
			return nil, err
		}
	}
	pom, err := os.ReadFile(filepath.Join(dir, "pom.xml"))
	if err != nil {
		return nil, fmt.Errorf("reading the pom: %w", err)
	}
	j := &javaAnchor{dir: dir, version: "unknown", Built: "up to date"}
	if _, rest, ok := strings.Cut(string(pom), "<beam.version>"); ok {
		j.version, _, _ = strings.Cut(rest, "<")
	}
	cpFile := filepath.Join(dir, "target", "classpath.txt")
	// Maven leaves classpath.txt alone when it has not changed, so a stamp written after each
	// build says when the last one was.
	stamp := filepath.Join(dir, "target", "anchors-built.stamp")
	if !upToDate(dir, stamp) {
		start := time.Now()
		j.Built = "offline"
		if out, err := mvn(ctx, dir, "-o"); err != nil {
			cfg.logf("offline Maven build failed, building online: %s", lastLines(out, 3))
			j.Built = "online"
			if out, err := mvn(ctx, dir); err != nil {
				return nil, fmt.Errorf("mvn package in %s: %w\n%s", dir, err, lastLines(out, 30))
			}
		}
		j.Build = time.Since(start)
		if err := os.WriteFile(stamp, nil, 0o644); err != nil {
			return nil, fmt.Errorf("writing the build stamp: %w", err)
		}
		cfg.logf("built the Java anchor (%s) in %v", j.Built, j.Build.Round(time.Millisecond))
	}
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		return nil, fmt.Errorf("reading the class path: %w", err)
	}
	j.classpath = filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(cp))
	return j, nil
}

func mvn(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "mvn", append([]string{"-q", "-B"}, append(args, "package")...)...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// upToDate reports whether out exists and is newer than every file of the project outside
// target/.
func upToDate(dir, out string) bool {
	st, err := os.Stat(out)
	if err != nil {
		return false
	}
	newer := false
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || newer {
			return err
		}
		if d.IsDir() && d.Name() == "target" {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && !d.IsDir() && info.ModTime().After(st.ModTime()) {
			newer = true
		}
		return nil
	})
	return !newer
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// run runs one Java program's main class with args and returns its report, its CPU and peak
// RSS (from the child's rusage). Past timeout the JVM gets SIGTERM; its shutdown hook then
// prints what it saw so far, reported incomplete.
func (j *javaAnchor) run(ctx context.Context, timeout time.Duration, class string, args ...string) (anchorRun, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	args = append(args, "--timeout-s="+strconv.Itoa(int(timeout.Seconds())))
	cmd := exec.CommandContext(ctx, "java", append([]string{
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		// Each start of KinesisIO's reader logs one line at INFO: counted below.
		"-Dorg.slf4j.simpleLogger.log.org.apache.beam.sdk.io.aws2.kinesis.KinesisReader=info",
		"-cp", j.classpath, "dev.beamkinesis.anchors." + class,
	}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var rep *anchorReport
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Bytes(); bytes.HasPrefix(line, []byte(`{"program"`)) {
			rep = new(anchorReport)
			if jerr := json.Unmarshal(line, rep); jerr != nil {
				return anchorRun{}, fmt.Errorf("%s: parsing its report: %w", class, jerr)
			}
		}
	}
	if rep == nil || (err != nil && ctx.Err() == nil) {
		return anchorRun{}, fmt.Errorf("%s %s: %v\n%s", class, strings.Join(args, " "), err, lastLines(stderr.Bytes(), 30))
	}
	sum, perr := strconv.ParseUint(rep.Checksum, 10, 64)
	if perr != nil {
		return anchorRun{}, fmt.Errorf("%s: checksum %q: %w", class, rep.Checksum, perr)
	}
	r := anchorRun{
		Got:      multiset{rep.Records, sum},
		Complete: rep.Complete && err == nil,
		Wall:     time.Duration(rep.Seconds * float64(time.Second)),
		Shards:   rep.Shards,
		Java: javaStats{
			First:        time.Duration(rep.First * float64(time.Second)),
			ReaderStarts: bytes.Count(stderr.Bytes(), []byte("Starting reader using")),
			StuckCloses:  bytes.Count(stderr.Bytes(), []byte("Executor service was not completely terminated")),
			Bundles:      rep.Bundles,
			MaxBundle:    rep.MaxBndl,
		},
	}
	if ps := cmd.ProcessState; ps != nil {
		r.CPU = ps.UserTime() + ps.SystemTime()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.PeakRSS = uint64(ru.Maxrss) * 1024
		}
	}
	return r, nil
}

// javaVersion is the first line of java -version.
func javaVersion() string {
	out, err := exec.Command("java", "-version").CombinedOutput()
	if err != nil {
		return "java unknown"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}
