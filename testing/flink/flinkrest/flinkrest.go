// Package flinkrest drives the standalone Flink cluster of testing/flink/cluster.sh for the
// Flink tests, the Flink soak and the bench: the parts of Flink's REST API they use (jobs,
// checkpoint statistics, exception history, savepoints, jar uploads and runs) and the
// script's verbs that kill and restart TaskManagers.
package flinkrest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// EnvClusterState is the environment variable through which cluster.sh finds the state
// directory of the cluster it acts on.
const EnvClusterState = "BEAMKINESIS_FLINK_CLUSTER_STATE"

// callTimeout bounds one REST call; Flink answers these in milliseconds when it is up.
const callTimeout = 30 * time.Second

// Cluster is one standalone cluster: its REST API, its state directory and the script that
// manages it.
type Cluster struct {
	// REST is the base URL of the REST API, e.g. http://localhost:8081.
	REST string
	// State is the cluster's state directory (pid files, logs, configuration).
	State string
	// Script is the path of cluster.sh.
	Script string
}

// Call sends method path (with body as JSON unless it is nil) to the REST API and decodes
// the JSON answer into out unless out is nil. An answer other than 2xx is an error holding
// Flink's message.
func (c *Cluster) Call(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding the body of %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.send(ctx, method, path, "application/json", r, out)
}

// send sends method path with body of contentType and decodes the JSON answer into out
// unless out is nil.
func (c *Cluster) send(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.REST, "/")+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decoding %s: %w", method, path, b, err)
	}
	return nil
}

// UploadJar sends the jar at path to /jars/upload and returns its id for RunJar. The
// JobManager keeps the upload until DeleteJar or its end.
func (c *Cluster) UploadJar(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("jarfile", filepath.Base(path))
		if err == nil {
			_, err = io.Copy(part, f)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	var out struct {
		Filename string `json:"filename"`
		Status   string `json:"status"`
	}
	if err := c.send(ctx, http.MethodPost, "/jars/upload", mw.FormDataContentType(), pr, &out); err != nil {
		pr.CloseWithError(err)
		return "", err
	}
	if out.Filename == "" {
		return "", fmt.Errorf("POST /jars/upload: no file name in the answer (status %q)", out.Status)
	}
	return filepath.Base(out.Filename), nil
}

// RunJar starts the uploaded jar with program arguments and returns the job's id.
func (c *Cluster) RunJar(ctx context.Context, jar string, args []string) (string, error) {
	var out struct {
		JobID string `json:"jobid"`
	}
	if err := c.Call(ctx, http.MethodPost, "/jars/"+jar+"/run", map[string]any{"programArgsList": args}, &out); err != nil {
		return "", err
	}
	return out.JobID, nil
}

// DeleteJar removes an uploaded jar from the JobManager.
func (c *Cluster) DeleteJar(ctx context.Context, jar string) error {
	return c.Call(ctx, http.MethodDelete, "/jars/"+jar, nil, nil)
}

// Job is one job of /jobs/overview.
type Job struct {
	ID    string `json:"jid"`
	Name  string `json:"name"`
	State string `json:"state"`
}

// Jobs lists every job the cluster knows.
func (c *Cluster) Jobs(ctx context.Context) ([]Job, error) {
	var ov struct {
		Jobs []Job `json:"jobs"`
	}
	if err := c.Call(ctx, http.MethodGet, "/jobs/overview", nil, &ov); err != nil {
		return nil, err
	}
	return ov.Jobs, nil
}

// JobStates returns the state (RUNNING, FINISHED, ...) of every job the cluster knows, by
// job id.
func (c *Cluster) JobStates(ctx context.Context) (map[string]string, error) {
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(jobs))
	for _, j := range jobs {
		out[j.ID] = j.State
	}
	return out, nil
}

// CheckpointStats is the part of GET /jobs/<id>/checkpoints the tests and the soak read.
type CheckpointStats struct {
	Counts struct {
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
		Restored  int `json:"restored"`
	} `json:"counts"`
	Latest struct {
		Completed *struct {
			ID       int64  `json:"id"`
			External string `json:"external_path"`
		} `json:"completed"`
		Restored *struct {
			ID          int64  `json:"id"`
			RestoreTime int64  `json:"restore_timestamp"`
			External    string `json:"external_path"`
			IsSavepoint bool   `json:"is_savepoint"`
		} `json:"restored"`
	} `json:"latest"`
}

// Checkpoints returns the job's checkpoint statistics. A job Flink has given up on
// (FAILED) is an error holding the start of its root exception.
func (c *Cluster) Checkpoints(ctx context.Context, job string) (CheckpointStats, error) {
	var s CheckpointStats
	var j struct {
		State string `json:"state"`
	}
	if err := c.Call(ctx, http.MethodGet, "/jobs/"+job, nil, &j); err != nil {
		return s, err
	}
	if j.State == "FAILED" {
		var ex struct {
			Root string `json:"root-exception"`
		}
		if err := c.Call(ctx, http.MethodGet, "/jobs/"+job+"/exceptions", nil, &ex); err != nil {
			return s, fmt.Errorf("flink job %s failed, and its exceptions could not be read: %w", job, err)
		}
		return s, fmt.Errorf("flink job %s failed: %s", job, FirstLines(ex.Root, 30))
	}
	err := c.Call(ctx, http.MethodGet, "/jobs/"+job+"/checkpoints", nil, &s)
	return s, err
}

// UserConfig returns the job's Beam pipeline options as Flink shows them
// (GET /jobs/<id>/config, field user-config).
func (c *Cluster) UserConfig(ctx context.Context, job string) (map[string]string, error) {
	var cfg struct {
		ExecutionConfig struct {
			UserConfig map[string]string `json:"user-config"`
		} `json:"execution-config"`
	}
	err := c.Call(ctx, http.MethodGet, "/jobs/"+job+"/config", nil, &cfg)
	return cfg.ExecutionConfig.UserConfig, err
}

// Failure is an entry of a job's exception history: a task failure that restarted it.
type Failure struct {
	// At is when the failure happened.
	At time.Time
	// Name is the exception's class name.
	Name string
}

// Failures returns the job's exception history, oldest first.
func (c *Cluster) Failures(ctx context.Context, job string) ([]Failure, error) {
	var ex struct {
		History struct {
			Entries []struct {
				Name      string `json:"exceptionName"`
				Timestamp int64  `json:"timestamp"`
			} `json:"entries"`
		} `json:"exceptionHistory"`
	}
	if err := c.Call(ctx, http.MethodGet, "/jobs/"+job+"/exceptions", nil, &ex); err != nil {
		return nil, err
	}
	out := make([]Failure, 0, len(ex.History.Entries))
	for i := len(ex.History.Entries) - 1; i >= 0; i-- { // the API lists the newest first
		e := ex.History.Entries[i]
		out = append(out, Failure{At: time.UnixMilli(e.Timestamp), Name: e.Name})
	}
	return out, nil
}

// StopWithSavepoint asks Flink to stop job with a savepoint (without draining) and returns
// the savepoint's location once it is complete, waiting at most timeout.
func (c *Cluster) StopWithSavepoint(ctx context.Context, job string, timeout time.Duration) (string, error) {
	var trigger struct {
		RequestID string `json:"request-id"`
	}
	if err := c.Call(ctx, http.MethodPost, "/jobs/"+job+"/stop", map[string]any{"drain": false}, &trigger); err != nil {
		return "", fmt.Errorf("stopping job %s with a savepoint: %w", job, err)
	}
	var status struct {
		Status struct {
			ID string `json:"id"`
		} `json:"status"`
		Operation struct {
			Location     string `json:"location"`
			FailureCause *struct {
				Class      string `json:"class"`
				StackTrace string `json:"stack-trace"`
			} `json:"failure-cause"`
		} `json:"operation"`
	}
	err := Await(ctx, timeout, "the savepoint of job "+job+" to complete", func() (bool, error) {
		err := c.Call(ctx, http.MethodGet, "/jobs/"+job+"/savepoints/"+trigger.RequestID, nil, &status)
		return status.Status.ID == "COMPLETED", err
	})
	if err != nil {
		return "", err
	}
	if f := status.Operation.FailureCause; f != nil {
		return "", fmt.Errorf("the savepoint of job %s failed: %s\n%s", job, f.Class, FirstLines(f.StackTrace, 30))
	}
	return status.Operation.Location, nil
}

// Cancel cancels job.
func (c *Cluster) Cancel(ctx context.Context, job string) error {
	return c.Call(ctx, http.MethodPatch, "/jobs/"+job+"?mode=cancel", nil, nil)
}

// RunScript runs cluster.sh with args (e.g. "kill-tm", "1") on the cluster's state
// directory.
func (c *Cluster) RunScript(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.Script}, args...)...)
	cmd.Env = append(os.Environ(), EnvClusterState+"="+c.State)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", c.Script, strings.Join(args, " "), err, out)
	}
	return nil
}

// pollInterval is how often Await asks again.
const pollInterval = 200 * time.Millisecond

// Await polls cond until it returns true, an error, or timeout passes (an error naming
// what was awaited).
func Await(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// FirstLines returns the first n lines of s.
func FirstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// Counters sums the user counters of a running job over its tasks and subtasks, from the
// task metrics the REST API shows. Beam's Flink runner names a counter of namespace N and
// name M "N_M", the dots of N turned into underscores; keep selects, by that name, the
// metrics to read (the API shows gauges and Flink's own metrics beside them). A counter
// lives in its task attempt: after a restart it counts from 0 again, and once the job has
// ended the API shows none.
func (c *Cluster) Counters(ctx context.Context, job string, keep func(name string) bool) (map[string]int64, error) {
	var detail struct {
		Vertices []struct {
			ID string `json:"id"`
		} `json:"vertices"`
	}
	if err := c.Call(ctx, http.MethodGet, "/jobs/"+job, nil, &detail); err != nil {
		return nil, err
	}
	type metric struct {
		ID    string `json:"id"`
		Value string `json:"value"`
	}
	out := map[string]int64{}
	for _, v := range detail.Vertices {
		path := "/jobs/" + job + "/vertices/" + v.ID + "/metrics"
		var listed []metric
		if err := c.Call(ctx, http.MethodGet, path, nil, &listed); err != nil {
			return nil, err
		}
		// A task metric's id is <subtask>.<operator>.<metric>: operator names carry no dots.
		names := map[string]string{}
		var ids []string
		for _, m := range listed {
			if parts := strings.SplitN(m.ID, ".", 3); len(parts) == 3 && keep(parts[2]) {
				names[m.ID] = parts[2]
				ids = append(ids, m.ID)
			}
		}
		for len(ids) > 0 {
			n := min(len(ids), 40) // keep the query string short
			var got []metric
			if err := c.Call(ctx, http.MethodGet, path+"?get="+url.QueryEscape(strings.Join(ids[:n], ",")), nil, &got); err != nil {
				return nil, err
			}
			ids = ids[n:]
			for _, m := range got {
				val, err := strconv.ParseInt(m.Value, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("metric %s of job %s is %q, not a counter", m.ID, job, m.Value)
				}
				out[names[m.ID]] += val
			}
		}
	}
	return out, nil
}
