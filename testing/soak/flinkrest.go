package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/beamkinesis/beamkinesis/testing/flink/flinkrest"
)

// flinkCluster is the standalone cluster the soak runs on; to flinkrest's REST calls and
// script verbs it adds the memory of the cluster's processes, which the soak reports.
type flinkCluster struct {
	*flinkrest.Cluster
}

// rss returns the resident set size of each cluster process (jobmanager, tm-1, ...) that
// runs now, from the pid files of the state directory.
func (c *flinkCluster) rss() map[string]uint64 {
	out := map[string]uint64{}
	pids, _ := filepath.Glob(filepath.Join(c.State, "*.pid"))
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
