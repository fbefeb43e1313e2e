package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// flinkCluster is the standalone Flink cluster of testing/flink/cluster.sh: its REST API,
// and the state directory that cluster.sh kill-tm and start-tm act on.
type flinkCluster struct {
	rest, state, script string
}

// restCall sends method path (with a JSON body unless nil) to the cluster's REST API and
// decodes the JSON answer into out unless out is nil.
func (c *flinkCluster) restCall(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding the body of %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.rest+path, r)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
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

// jobStates returns the state of every job the cluster knows, by job id.
func (c *flinkCluster) jobStates(ctx context.Context) (map[string]string, error) {
	var ov struct {
		Jobs []struct {
			ID    string `json:"jid"`
			State string `json:"state"`
		} `json:"jobs"`
	}
	if err := c.restCall(ctx, http.MethodGet, "/jobs/overview", nil, &ov); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, j := range ov.Jobs {
		out[j.ID] = j.State
	}
	return out, nil
}

// checkpointStats is the part of GET /jobs/<id>/checkpoints the soak reads.
type checkpointStats struct {
	Counts struct {
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
		Restored  int `json:"restored"`
	} `json:"counts"`
	Latest struct {
		Completed *struct {
			ID int64 `json:"id"`
		} `json:"completed"`
		Restored *struct {
			ID          int64 `json:"id"`
			RestoreTime int64 `json:"restore_timestamp"`
			IsSavepoint bool  `json:"is_savepoint"`
		} `json:"restored"`
	} `json:"latest"`
}

// checkpoints returns the job's checkpoint statistics; an error when Flink has given up
// on the job (FAILED), with its root exception.
func (c *flinkCluster) checkpoints(ctx context.Context, job string) (checkpointStats, error) {
	var s checkpointStats
	var j struct {
		State string `json:"state"`
	}
	if err := c.restCall(ctx, http.MethodGet, "/jobs/"+job, nil, &j); err != nil {
		return s, err
	}
	if j.State == "FAILED" {
		var ex struct {
			Root string `json:"root-exception"`
		}
		c.restCall(ctx, http.MethodGet, "/jobs/"+job+"/exceptions", nil, &ex)
		return s, fmt.Errorf("flink job %s failed: %s", job, firstLines(ex.Root, 8))
	}
	err := c.restCall(ctx, http.MethodGet, "/jobs/"+job+"/checkpoints", nil, &s)
	return s, err
}

// failure is an entry of a job's exception history: a task failure that restarted it.
type failure struct {
	at   time.Time
	name string
}

// failures returns the job's exception history, oldest first.
func (c *flinkCluster) failures(ctx context.Context, job string) ([]failure, error) {
	var ex struct {
		History struct {
			Entries []struct {
				Name      string `json:"exceptionName"`
				Timestamp int64  `json:"timestamp"`
				Task      string `json:"taskName"`
			} `json:"entries"`
		} `json:"exceptionHistory"`
	}
	if err := c.restCall(ctx, http.MethodGet, "/jobs/"+job+"/exceptions", nil, &ex); err != nil {
		return nil, err
	}
	var out []failure
	for i := len(ex.History.Entries) - 1; i >= 0; i-- { // the API lists the newest first
		e := ex.History.Entries[i]
		out = append(out, failure{at: time.UnixMilli(e.Timestamp), name: e.Name})
	}
	return out, nil
}

// stopWithSavepoint asks Flink to stop job with a savepoint (without draining) and
// returns the savepoint's location once it is complete.
func (c *flinkCluster) stopWithSavepoint(ctx context.Context, job string) (string, error) {
	var trigger struct {
		RequestID string `json:"request-id"`
	}
	if err := c.restCall(ctx, http.MethodPost, "/jobs/"+job+"/stop", map[string]any{"drain": false}, &trigger); err != nil {
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
	err := await(ctx, 3*time.Minute, "the savepoint to complete", func() (bool, error) {
		err := c.restCall(ctx, http.MethodGet, "/jobs/"+job+"/savepoints/"+trigger.RequestID, nil, &status)
		return status.Status.ID == "COMPLETED", err
	})
	if err != nil {
		return "", err
	}
	if f := status.Operation.FailureCause; f != nil {
		return "", fmt.Errorf("the savepoint of job %s failed: %s\n%s", job, f.Class, firstLines(f.StackTrace, 8))
	}
	return status.Operation.Location, nil
}

// cancel cancels job.
func (c *flinkCluster) cancel(ctx context.Context, job string) error {
	return c.restCall(ctx, http.MethodPatch, "/jobs/"+job+"?mode=cancel", nil, nil)
}

// script runs cluster.sh with args on the cluster's state directory.
func (c *flinkCluster) scriptRun(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.script}, args...)...)
	cmd.Env = append(os.Environ(), "BEAMKINESIS_FLINK_CLUSTER_STATE="+c.state)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", c.script, strings.Join(args, " "), err, out)
	}
	return nil
}

// rss returns the resident set size of each cluster process (jobmanager, tm-1, ...) that
// runs now, from the pid files of the state directory.
func (c *flinkCluster) rss() map[string]uint64 {
	out := map[string]uint64{}
	pids, _ := filepath.Glob(filepath.Join(c.state, "*.pid"))
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		if rss, ok := processRSS(pid); ok {
			out[strings.TrimSuffix(filepath.Base(f), ".pid")] = rss
		}
	}
	return out
}

// await polls cond every 500 ms until it returns true, an error, or timeout passes
// (an error naming what).
func await(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
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
		case <-time.After(500 * time.Millisecond): // poll interval of the deadline loop
		}
	}
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
