package main

import (
	"context"
	"fmt"
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

// addCounters adds the ledger's counters of a running job, as its task attempts counted
// them, to rep, named as on Prism (namespace/name).
func (c *flinkCluster) addCounters(ctx context.Context, rep *flinkReport, job string) error {
	got, err := c.Counters(ctx, job, func(n string) bool {
		return counterName(n) != n && ledgerCounter(n) // this job's namespaces only
	})
	if err != nil {
		return fmt.Errorf("reading the counters of Flink job %s: %w", job, err)
	}
	for n, v := range got {
		rep.counters[counterName(n)] += v
	}
	return nil
}

// counterName turns the name Beam's Flink runner gives a counter of this job back into
// namespace/name; a name outside the job's namespaces comes back as it is.
func counterName(flinkName string) string {
	for _, ns := range []string{"kinesisio.Write", "kinesisio", "soak"} {
		if p := strings.ReplaceAll(ns, ".", "_") + "_"; strings.HasPrefix(flinkName, p) {
			return ns + "/" + strings.TrimPrefix(flinkName, p)
		}
	}
	return flinkName
}
