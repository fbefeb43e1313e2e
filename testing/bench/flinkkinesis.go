package main

// Rows 12 to 14 (with --flink): Flink's own Kinesis consumer, FlinkKinesisConsumer of
// flink-connector-kinesis (4.3.0-1.19 on Flink 1.19, 1.16.3 on Flink 1.16), in a small job of
// ours (testing/anchors/flink-kinesis, built by testing/deps/deps.sh flinkkinesis for the
// cluster's Flink release) on the same standalone Flink cluster, against the same kinesistest
// server, beside this connector's ReadBounded on the Flink job server.

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/beamkinesis/beamkinesis/testing/flink/flinkrest"
)

// EnvFlinkKinesisJar names the jar of testing/anchors/flink-kinesis (deps.sh flinkkinesis
// prints it); unset, the bench looks in deps.sh's default cache, in the directory of the
// Flink release $BEAMKINESIS_FLINK_CLUSTER_VERSION names (cluster.sh start prints it;
// default defaultFlinkRelease).
const EnvFlinkKinesisJar = "BEAMKINESIS_FLINK_KINESIS_JAR"

// defaultFlinkRelease is the Flink release of testing/flink/versions.sh's default pair.
const defaultFlinkRelease = "1.19.3"

// flinkKinesisJar finds the anchor job's jar.
func flinkKinesisJar() (string, error) {
	p := os.Getenv(EnvFlinkKinesisJar)
	if p == "" {
		root := os.Getenv("BEAMKINESIS_CACHE")
		if root == "" {
			c, err := os.UserCacheDir()
			if err != nil {
				return "", fmt.Errorf("finding the cache directory: %w", err)
			}
			root = filepath.Join(c, "beamkinesis")
		}
		release := os.Getenv("BEAMKINESIS_FLINK_CLUSTER_VERSION")
		if release == "" {
			release = defaultFlinkRelease
		}
		p = filepath.Join(root, "flink-kinesis-"+release, "flink-kinesis-anchor.jar")
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the Flink Kinesis anchor jar (build it with testing/deps/deps.sh flinkkinesis, or set $%s): %w", EnvFlinkKinesisJar, err)
	}
	return p, nil
}

// anchorVersions reads the Flink release and the flink-connector-kinesis version the anchor
// jar at path was built with, from its manifest (Flink-Version, Flink-Kinesis-Version).
func anchorVersions(path string) (flink, connector string, err error) {
	z, err := zip.OpenReader(path)
	if err != nil {
		return "", "", fmt.Errorf("opening %s: %w", path, err)
	}
	defer z.Close()
	f, err := z.Open("META-INF/MANIFEST.MF")
	if err != nil {
		return "", "", fmt.Errorf("reading the manifest of %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(strings.TrimRight(sc.Text(), "\r"), ": ")
		switch k {
		case "Flink-Version":
			flink = v
		case "Flink-Kinesis-Version":
			connector = v
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("reading the manifest of %s: %w", path, err)
	}
	if flink == "" || connector == "" {
		return "", "", fmt.Errorf("the manifest of %s names no Flink-Version or Flink-Kinesis-Version; build it again with testing/deps/deps.sh flinkkinesis", path)
	}
	return flink, connector, nil
}

// minorRelease returns the major.minor part of a Flink release such as 1.19.3.
func minorRelease(release string) string {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return release
	}
	return parts[0] + "." + parts[1]
}

// subtaskStatus is one sink subtask's out/subtask-N.status: records counted and the Unix
// nanoseconds of the first and last.
type subtaskStatus struct {
	Records     int64
	First, Last int64
}

// parseStatus reads a status line "records first_unix_nanos last_unix_nanos".
func parseStatus(s string) (subtaskStatus, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return subtaskStatus{}, fmt.Errorf("status %q: want 3 fields, got %d", s, len(f))
	}
	var v [3]int64
	for i, x := range f {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return subtaskStatus{}, fmt.Errorf("status %q: field %d: %w", s, i+1, err)
		}
		v[i] = n
	}
	return subtaskStatus{Records: v[0], First: v[1], Last: v[2]}, nil
}

// sumStatuses adds the subtasks' counts and takes the earliest first and latest last record
// (subtasks that counted nothing have no times).
func sumStatuses(ss []subtaskStatus) subtaskStatus {
	var t subtaskStatus
	for _, s := range ss {
		if s.Records == 0 {
			continue
		}
		if t.Records == 0 || s.First < t.First {
			t.First = s.First
		}
		t.Last = max(t.Last, s.Last)
		t.Records += s.Records
	}
	return t
}

// parseArrivals reads out/subtask-N.arrivals lines "index arrival_unix_nanos" into got,
// ignoring a last line without its newline (still being written).
func parseArrivals(b []byte, got map[uint64]int64) error {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil
		}
		line := string(b[:i])
		b = b[i+1:]
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			return fmt.Errorf("arrival line %q: want index and time", line)
		}
		idx, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return fmt.Errorf("arrival line %q: %w", line, err)
		}
		at, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("arrival line %q: %w", line, err)
		}
		got[idx] = at
	}
	return nil
}

// flinkRESTClient is the part of Flink's REST API the anchor job needs: upload a jar, run
// it, watch and cancel the job.
type flinkRESTClient struct{ c *flinkrest.Cluster }

// state returns the job's state (RUNNING, FAILED, ...).
func (c flinkRESTClient) state(ctx context.Context, jobID string) (string, error) {
	var out struct {
		State string `json:"state"`
	}
	err := c.c.Call(ctx, http.MethodGet, "/jobs/"+jobID, nil, &out)
	return out.State, err
}

// cancel cancels the job and waits until it is no longer running.
func (c flinkRESTClient) cancel(ctx context.Context, jobID string) error {
	if err := c.c.Cancel(ctx, jobID); err != nil {
		return err
	}
	for {
		st, err := c.state(ctx, jobID)
		if err != nil {
			return err
		}
		if jobOver(st) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for job %s to cancel: %w", jobID, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// running returns the ids of the cluster's jobs that are not over.
func (c flinkRESTClient) running(ctx context.Context) (map[string]bool, error) {
	js, err := c.c.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, j := range js {
		if !jobOver(j.State) {
			ids[j.ID] = true
		}
	}
	return ids, nil
}

// cancelNew cancels the jobs that are not over, not in before and whose names do not start
// with skip: the Beam job the bench submitted through the job server, which does not say
// its Flink job id.
func (c flinkRESTClient) cancelNew(ctx context.Context, before map[string]bool, skip string) error {
	js, err := c.c.Jobs(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, j := range js {
		if !jobOver(j.State) && !before[j.ID] && !strings.HasPrefix(j.Name, skip) {
			if err := c.cancel(ctx, j.ID); err != nil {
				errs = append(errs, fmt.Errorf("cancelling job %s (%s): %w", j.ID, j.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// jobOver reports whether a Flink job state is terminal.
func jobOver(state string) bool {
	switch state {
	case "CANCELED", "FAILED", "FINISHED":
		return true
	}
	return false
}

// flinkKinesisRun is one run of the anchor job.
type flinkKinesisRun struct {
	Counted  subtaskStatus
	Start    time.Time        // the /jars/<id>/run request
	Arrivals map[uint64]int64 // latency runs: record index → arrival, Unix nanoseconds
}

// steadyRate is records per second from the first record counted to the last.
func (r flinkKinesisRun) steadyRate() float64 {
	if r.Counted.Last <= r.Counted.First {
		return 0
	}
	return float64(r.Counted.Records) / time.Duration(r.Counted.Last-r.Counted.First).Seconds()
}

// startup is the run request to the first record counted.
func (r flinkKinesisRun) startup() time.Duration { return time.Unix(0, r.Counted.First).Sub(r.Start) }

// total is the run request to the last record counted.
func (r flinkKinesisRun) total() time.Duration { return time.Unix(0, r.Counted.Last).Sub(r.Start) }

func (r flinkKinesisRun) rate() float64 { return float64(r.Counted.Records) / r.total().Seconds() }

// flinkKinesisJob runs the anchor job on one cluster.
type flinkKinesisJob struct {
	rest  flinkRESTClient
	jarID string
	// connector is the flink-connector-kinesis version of the jar, e.g. 4.3.0-1.19.
	connector string
	log       func(format string, args ...any)
}

// newFlinkKinesisJob uploads the anchor jar to the cluster whose REST API is at rest. It
// refuses a jar built for another Flink minor release than the cluster's.
func newFlinkKinesisJob(ctx context.Context, rest string, log func(string, ...any)) (*flinkKinesisJob, error) {
	jar, err := flinkKinesisJar()
	if err != nil {
		return nil, err
	}
	built, connector, err := anchorVersions(jar)
	if err != nil {
		return nil, err
	}
	c := flinkRESTClient{&flinkrest.Cluster{REST: rest}}
	var overview struct {
		Version string `json:"flink-version"`
	}
	if err := c.c.Call(ctx, http.MethodGet, "/overview", nil, &overview); err != nil {
		return nil, fmt.Errorf("asking the cluster for its Flink release: %w", err)
	}
	if minorRelease(overview.Version) != minorRelease(built) {
		return nil, fmt.Errorf("the Flink Kinesis anchor %s was built for Flink %s, the cluster at %s runs %s: build it for the cluster's release (BEAMKINESIS_FLINK_VERSION=%s testing/deps/deps.sh flinkkinesis) or point $%s at that build",
			jar, built, rest, overview.Version, minorRelease(overview.Version), EnvFlinkKinesisJar)
	}
	start := time.Now()
	id, err := c.c.UploadJar(ctx, jar)
	if err != nil {
		return nil, fmt.Errorf("uploading the Flink Kinesis anchor: %w", err)
	}
	log("uploaded %s to %s as %s in %v", jar, rest, id, time.Since(start).Round(time.Millisecond))
	return &flinkKinesisJob{rest: c, jarID: id, connector: connector, log: log}, nil
}

// close deletes the uploaded jar.
func (j *flinkKinesisJob) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return j.rest.c.DeleteJar(ctx, j.jarID)
}

// run reads stream from url with the anchor job at parallelism until until(counted) holds,
// then cancels the job. It fails when the job fails or timeout passes first. extra are
// more program arguments (--initpos=LATEST, --latency=true, --prop.K=V).
func (j *flinkKinesisJob) run(ctx context.Context, url, stream string, parallelism int, timeout time.Duration,
	until func(subtaskStatus) bool, extra ...string) (flinkKinesisRun, error) {
	dir, err := os.MkdirTemp("", "bench-flink-kinesis-")
	if err != nil {
		return flinkKinesisRun{}, fmt.Errorf("creating the output directory: %w", err)
	}
	defer os.RemoveAll(dir)
	latency := false
	for _, a := range extra {
		latency = latency || a == "--latency=true"
	}
	args := append([]string{"--endpoint=" + url, "--stream=" + stream, "--parallelism=" + strconv.Itoa(parallelism), "--out=" + dir}, extra...)
	r := flinkKinesisRun{Start: time.Now()}
	jobID, err := j.rest.c.RunJar(ctx, j.jarID, args)
	if err != nil {
		return r, fmt.Errorf("running the Flink Kinesis anchor: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := j.rest.cancel(cctx, jobID); err != nil {
			j.log("cancelling Flink job %s: %v", jobID, err)
		}
	}()
	deadline := time.Now().Add(timeout)
	for n := 0; ; n++ {
		counted, err := readStatuses(dir, parallelism)
		if err != nil {
			return r, err
		}
		r.Counted = counted
		if until(counted) {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("Flink job %s counted %d records in %v, not done", jobID, counted.Records, timeout)
		}
		if n%10 == 0 {
			st, err := j.rest.state(ctx, jobID)
			if err != nil {
				return r, err
			}
			if jobOver(st) {
				return r, fmt.Errorf("Flink job %s is %s after %d records (the cluster's logs say why)", jobID, st, counted.Records)
			}
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if latency {
		r.Arrivals = map[uint64]int64{}
		for i := range parallelism {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("subtask-%d.arrivals", i)))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return r, fmt.Errorf("reading arrivals: %w", err)
			}
			if err := parseArrivals(b, r.Arrivals); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// readStatuses sums the status files the job's sink subtasks wrote so far.
func readStatuses(dir string, parallelism int) (subtaskStatus, error) {
	var ss []subtaskStatus
	for i := range parallelism {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("subtask-%d.status", i)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return subtaskStatus{}, fmt.Errorf("reading a sink's status: %w", err)
		}
		s, err := parseStatus(string(b))
		if err != nil {
			return subtaskStatus{}, err
		}
		ss = append(ss, s)
	}
	return sumStatuses(ss), nil
}
