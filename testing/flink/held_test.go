package flink

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// heldWindow is the window of the held-commit tests: --window=5s as in issue 23.
const heldWindow = 5 * time.Second

// countLedger sums the counts kinesis-to-kinesis --transform=count wrote to out per value:
// the records of want no count covers, and how many were counted more than once.
func countLedger(t *testing.T, out []string, want []string) (lost []string, dups int) {
	t.Helper()
	counted := countedByKey(t, out)
	for _, w := range want {
		switch n := counted[w]; {
		case n == 0:
			lost = append(lost, w)
		case n > 1:
			dups += n - 1
		}
	}
	return lost, dups
}

// countedByKey sums the counts kinesis-to-kinesis --transform=count wrote, per key.
func countedByKey(t *testing.T, out []string) map[string]int {
	t.Helper()
	counted := map[string]int{}
	for _, rec := range out {
		var c struct {
			Key   string `json:"key"`
			Count int    `json:"count"`
		}
		if err := json.Unmarshal([]byte(rec), &c); err != nil {
			t.Fatalf("an output record is not a count: %q: %v", rec, err)
		}
		counted[c.Key] += c.Count
	}
	return counted
}

// heldJob is one job of the kill-and-restart tests: its run, whether it has written
// output yet, and whether its read has settled enough of it to be killed (with what it
// has, for a timeout's message).
type heldJob struct {
	run     *liveRun
	written func() bool
	settled func() (ok bool, has string)
}

// tableSettled is the settled of a job whose read commits to table: it holds positions of
// at least four shards (the input's four, or after the split their children).
func tableSettled(t *testing.T, db *dynamodb.Client, table string) func() (bool, string) {
	return func() (bool, string) {
		positions := tablePositions(t, db, table)
		n := 0
		for _, cp := range positions {
			if cp != "" && cp[0] >= '0' && cp[0] <= '9' {
				n++
			}
		}
		return n >= 4, fmt.Sprintf("positions %v in %s", positions, table)
	}
}

// killKind is how killMidWindow kills the jobs.
type killKind int

const (
	// cancelJobs cancels the jobs hard (no savepoint) and kills their launchers.
	cancelJobs killKind = iota
	// killTaskManager kills TaskManager 1 (kill -9) and starts it again: the jobs live on
	// and restore from their last checkpoints; their launchers (in LOOPBACK, also their SDK
	// workers) live on too.
	killTaskManager
	// killCluster kills every TaskManager and the JobManager (kill -9; no HA, so the jobs
	// are gone) and their launchers, and starts the cluster again.
	killCluster
)

// killMidWindow waits until every job has written output of its own and settled. Then, a
// third into the next window of size (the one open, if a third of it is still to come), it
// kills the jobs as kill says. size is a multiple of every job's window, so the kill is
// inside a window of each. It returns when the kill happened.
func killMidWindow(t *testing.T, size time.Duration, kill killKind, jobs ...heldJob) time.Time {
	t.Helper()
	for _, j := range jobs {
		has := ""
		await(t, 2*time.Minute, func() string {
			return fmt.Sprintf("%s: want output of its own and its read settled, have %s", j.run.name, has)
		}, func() bool {
			ok := false
			ok, has = j.settled()
			return j.written() && ok
		})
	}
	now := time.Now()
	at := now.Truncate(size).Add(size / 3)
	if at.Before(now) {
		at = at.Add(size)
	}
	time.Sleep(at.Sub(now))
	killed := time.Now()
	switch kill {
	case killTaskManager:
		clusterScript(t, "kill-tm", "1")
		t.Logf("TaskManager 1 killed mid-window, jobs %v", jobNames(jobs))
		clusterScript(t, "start-tm", "1")
		return killed
	case killCluster:
		clusterScript(t, "kill-all")
	}
	for _, j := range jobs {
		if kill == cancelJobs {
			if err := cluster().Cancel(context.Background(), j.run.job); err != nil {
				t.Fatalf("cancelling %s's job: %v", j.run.name, err)
			}
		}
		j.run.cmd.Process.Kill()
		<-j.run.done
		t.Logf("%s: launcher killed %v after launch, mid-window (whole cluster killed: %v)", j.run.name, time.Since(j.run.started).Round(time.Millisecond), kill == killCluster)
	}
	if kill == killCluster {
		clusterScript(t, "start-all")
	}
	return killed
}

// jobNames names the jobs' pipelines, for logs.
func jobNames(jobs []heldJob) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.run.name)
	}
	return out
}

// TestWindowsLoseNothingAcrossRestartsFromTheTable is issue 23's case on the cluster, for
// both pipelines that keep records in windows before their sink, run side by side on the
// same input (4 shards, 100 records/s), each with its own --checkpoint_table on dynalite:
// kinesis-to-kinesis --transform=count --window=5s, and kinesis-to-files --window=10s
// staging Parquet; and beside them kinesis-to-kinesis --transform=passthrough, which
// keeps nothing in state. In the middle of a window, the jobs are first cancelled hard (no
// savepoint) with their launchers killed; the input splits to 8 shards; new jobs start on
// the tables, reading each parent to its end before its children; in the middle of a
// window again, every TaskManager and the JobManager are killed (kill -9, no HA, so the
// jobs are gone) and the cluster started again; third jobs start on the tables. Their
// open windows die with each kill. When the producer stops, every record put must be
// counted at least once, copied at least once, and staged exactly once (DuckDB): a new
// files job re-reads each shard from the first record of a window it had not committed
// and rewrites that window's files of the shard with the same events.
func TestWindowsLoseNothingAcrossRestartsFromTheTable(t *testing.T) {
	needCluster(t)
	components.PythonT(t)
	started := time.Now()
	dynURL := emulators.StartT(t, emulators.Dynalite).URL()
	db := dynamodb.New(dynamodb.Options{
		Region:       emulators.Region,
		BaseEndpoint: aws.String(dynURL),
		Credentials:  credentials.NewStaticCredentialsProvider("flink-e2e", "flink-e2e", ""),
	})
	srv := kinesistest.StartT(t)
	if err := srv.CreateStream("in", 4); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{"out", "copy"} {
		if err := srv.CreateStream(out, 2); err != nil {
			t.Fatal(err)
		}
	}
	common := append(append([]string{"--bounded=false", "--starting_position=trim_horizon", "--checkpoint_table_endpoint=" + dynURL,
		"--checkpoint_takeover", "--parallelism=2"}, kinesisFlags(srv)...), checkpointFlags...)
	const countTable, filesTable, copyTable = "flink-held-count", "flink-held-files", "flink-held-copy"
	countFlags := append([]string{"--input_stream=in", "--output_stream=out", "--transform=count", "--window=" + heldWindow.String(),
		"--aggregation=false", "--checkpoint_table=" + countTable}, common...)
	// The passthrough job keeps no state before its sink; one worker is enough for it.
	copyFlags := append(append([]string{"--input_stream=in", "--output_stream=copy", "--transform=passthrough", "--aggregation=false",
		"--checkpoint_table=" + copyTable}, common...), "--parallelism=1")
	staging := t.TempDir()
	filesFlags := append([]string{"--stream=in", "--staging_dir=" + staging, "--window=" + filesWindow.String(),
		"--checkpoint_table=" + filesTable}, common...)
	outputs := func() []string {
		got, _ := userRecords(t, srv, "out")
		return got
	}
	copies := func() []string {
		got, _ := userRecords(t, srv, "copy")
		return got
	}
	start := func() []heldJob {
		count := startPipeline(t, "kinesis-to-kinesis", countFlags...)
		files := startPipeline(t, "kinesis-to-files", filesFlags...)
		copier := startPipeline(t, "kinesis-to-kinesis", copyFlags...)
		count.awaitCheckpoints(t, 1)
		files.awaitCheckpoints(t, 1)
		copier.awaitCheckpoints(t, 1)
		// A job is ready to be killed once it wrote something of its own.
		counts, staged, copied := len(outputs()), len(parquetFiles(t, staging)), len(copies())
		return []heldJob{
			{count, func() bool { return len(outputs()) > counts }, tableSettled(t, db, countTable)},
			{files, func() bool { return len(parquetFiles(t, staging)) > staged }, tableSettled(t, db, filesTable)},
			{copier, func() bool { return len(copies()) > copied }, tableSettled(t, db, copyTable)},
		}
	}

	jobs := start()
	prod := startProducer(srv.Client(), "in", 10, 100*time.Millisecond, func(i int) string { return fmt.Sprintf(`{"id":"rec-%06d","ts":%d}`, i, i) })
	killMidWindow(t, filesWindow, cancelJobs, jobs...)
	atCancel, filesAtCancel := prod.count(), len(parquetFiles(t, staging))
	// The input splits from 4 shards to 8 while no job runs: the next jobs read each parent
	// on from its table position to its end, then its children (parents first).
	if _, err := srv.Client().UpdateShardCount(context.Background(), &kinesis.UpdateShardCountInput{StreamName: aws.String("in"),
		TargetShardCount: aws.Int32(8), ScalingType: kinesistypes.ScalingTypeUniformScaling}); err != nil {
		t.Fatalf("splitting the input: %v", err)
	}
	jobs = start()
	killMidWindow(t, filesWindow, killCluster, jobs...)
	atKill, filesAtKill := prod.count(), len(parquetFiles(t, staging))
	jobs = start()
	time.Sleep(heldWindow) // the producer keeps putting while the third jobs run
	want := prod.finish(t)
	t.Logf("%d records put: %d before the cancel (%d files staged), %d before the cluster kill (%d files)", len(want), atCancel, filesAtCancel, atKill, filesAtKill)

	var lost []string
	var dups int
	await(t, 2*time.Minute, func() string {
		return fmt.Sprintf("%d of the %d records put are not counted in the output yet (e.g. %q)", len(lost), len(want), lost[:min(3, len(lost))])
	}, func() bool {
		lost, dups = countLedger(t, outputs(), want)
		return len(lost) == 0
	})
	jobs[0].run.cancel(t)
	lost, dups = countLedger(t, outputs(), want)
	t.Logf("measured, count: %v since the start; lost %d of %d, duplicates %d", time.Since(started).Round(time.Millisecond), len(lost), len(want), dups)
	if len(lost) > 0 {
		t.Errorf("%d of %d records are counted by no count job, e.g. %s", len(lost), len(want), strings.Join(lost[:min(5, len(lost))], ", "))
	}
	assertStagedOnce(t, jobs[1].run, staging, want)
	var copyLost []string
	copyDups := 0
	await(t, 2*time.Minute, func() string {
		return fmt.Sprintf("%d of the %d records put are not in the copy yet", len(copyLost), len(want))
	}, func() bool {
		copyLost, copyDups = copyLedger(copies(), want)
		return len(copyLost) == 0
	})
	jobs[2].run.cancel(t)
	copyLost, copyDups = copyLedger(copies(), want)
	t.Logf("measured, passthrough: lost %d of %d, duplicates %d", len(copyLost), len(want), copyDups)
	if len(copyLost) > 0 {
		t.Errorf("%d of %d records are in no copy, e.g. %s", len(copyLost), len(want), strings.Join(copyLost[:min(5, len(copyLost))], ", "))
	}
	t.Logf("measured: %v in all", time.Since(started).Round(time.Millisecond))
}

// copyLedger compares the records a passthrough job wrote with want: the records of want
// it did not write, and how many it wrote more than once.
func copyLedger(out, want []string) (lost []string, dups int) {
	written := map[string]int{}
	for _, r := range out {
		written[r]++
	}
	for _, w := range want {
		switch n := written[w]; {
		case n == 0:
			lost = append(lost, w)
		case n > 1:
			dups += n - 1
		}
	}
	return lost, dups
}

// assertStagedOnce waits until the files staged under dir hold every event of want (JSON
// records with an id), cancels files, and checks that DuckDB reads each exactly once.
func assertStagedOnce(t *testing.T, files *liveRun, dir string, want []string) {
	t.Helper()
	wantIDs := map[string]bool{}
	for _, rec := range want {
		var e struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(rec), &e); err != nil || e.ID == "" {
			t.Fatalf("a record put is not an event: %q (%v)", rec, err)
		}
		wantIDs[e.ID] = true
	}
	var staged map[string]int
	last := time.Time{}
	await(t, 2*time.Minute, func() string {
		return fmt.Sprintf("DuckDB reads %d distinct events of the %d put from %d files", len(staged), len(want), len(parquetFiles(t, dir)))
	}, func() bool {
		if time.Since(last) < 2*time.Second { // a DuckDB read starts a Python process
			return false
		}
		last = time.Now()
		staged = stagedEventCounts(t, dir)
		return len(staged) >= len(wantIDs)
	})
	files.cancel(t)
	staged = stagedEventCounts(t, dir)
	lost, dups := 0, 0
	for id := range wantIDs {
		if staged[id] == 0 {
			lost++
		}
	}
	for id, n := range staged {
		if !wantIDs[id] {
			t.Errorf("DuckDB reads event %s, which was not put", id)
		}
		dups += n - 1
	}
	t.Logf("measured, files: %d files; DuckDB reads %d distinct events: lost %d of %d, duplicates %d", len(parquetFiles(t, dir)), len(staged), lost, len(want), dups)
	if lost > 0 || dups > 0 {
		t.Errorf("the staged files hold %d of %d events put, %d more than once; want each exactly once", len(staged), len(want), dups)
	}
}

// filesWindow is the window of the files job of the held-commit tests (issue 23's
// --window=10s), a multiple of heldWindow.
const filesWindow = 10 * time.Second

// parquetFiles lists the event files kinesis-to-files staged under dir.
func parquetFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "events", "part-*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// stagedEventCounts reads the event files staged under dir with DuckDB and returns how
// many rows each event id has.
func stagedEventCounts(t *testing.T, dir string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	if len(parquetFiles(t, dir)) == 0 {
		return counts
	}
	tab := components.DuckDBT(t, "SELECT id, count(*) AS n FROM read_parquet('"+dir+"/events/part-*.parquet') GROUP BY id")
	for _, r := range tab.Rows {
		n, err := strconv.Atoi(fmt.Sprint(r[1]))
		if err != nil {
			t.Fatalf("DuckDB count of %v: %v", r[0], err)
		}
		counts[fmt.Sprint(r[0])] = n
	}
	return counts
}
