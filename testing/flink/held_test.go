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
	counted := map[string]int64{}
	for _, rec := range out {
		var c struct {
			Key   string `json:"key"`
			Count int64  `json:"count"`
		}
		if err := json.Unmarshal([]byte(rec), &c); err != nil {
			t.Fatalf("an output record is not a count: %q: %v", rec, err)
		}
		counted[c.Key] += c.Count
	}
	for _, w := range want {
		switch n := counted[w]; {
		case n == 0:
			lost = append(lost, w)
		case n > 1:
			dups += int(n - 1)
		}
	}
	return lost, dups
}

// heldJob is one job of the held-commit restart tests: its run, the table it commits to,
// and whether it has written output yet.
type heldJob struct {
	run     *liveRun
	table   string
	written func() bool
}

// killMidWindow waits until every job has written output of its own and its table holds
// positions of at least four shards (the input's four, or after the split their children).
// Then, a third into the next window of size (the one open, if a third of it is still to
// come), it cancels the jobs hard (no savepoint) or, with wholeCluster, kills every
// TaskManager and the JobManager (kill -9; no HA, so the jobs are gone) and starts them
// again; either way it kills the jobs' launchers (which, in LOOPBACK, are also their SDK
// workers). size is a multiple of every job's window, so the kill is inside a window of each.
func killMidWindow(t *testing.T, db *dynamodb.Client, size time.Duration, wholeCluster bool, jobs ...heldJob) {
	t.Helper()
	for _, j := range jobs {
		await(t, 2*time.Minute, func() string {
			return fmt.Sprintf("%s: want output and four positions in %s, have %v", j.run.name, j.table, tablePositions(t, db, j.table))
		}, func() bool {
			if !j.written() {
				return false
			}
			n := 0
			for _, cp := range tablePositions(t, db, j.table) {
				if cp != "" && cp[0] >= '0' && cp[0] <= '9' {
					n++
				}
			}
			return n >= 4
		})
	}
	now := time.Now()
	kill := now.Truncate(size).Add(size / 3)
	if kill.Before(now) {
		kill = kill.Add(size)
	}
	time.Sleep(kill.Sub(now))
	if wholeCluster {
		clusterScript(t, "kill-all")
	}
	for _, j := range jobs {
		if !wholeCluster {
			if err := cluster().Cancel(context.Background(), j.run.job); err != nil {
				t.Fatalf("cancelling %s's job: %v", j.run.name, err)
			}
		}
		j.run.cmd.Process.Kill()
		<-j.run.done
		t.Logf("%s: launcher killed %v after launch, mid-window (whole cluster killed: %v)", j.run.name, time.Since(j.run.started).Round(time.Millisecond), wholeCluster)
	}
	if wholeCluster {
		clusterScript(t, "start-all")
	}
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
			{count, countTable, func() bool { return len(outputs()) > counts }},
			{files, filesTable, func() bool { return len(parquetFiles(t, staging)) > staged }},
			{copier, copyTable, func() bool { return len(copies()) > copied }},
		}
	}

	jobs := start()
	prod := startProducer(srv.Client(), "in", 10, 100*time.Millisecond, func(i int) string { return fmt.Sprintf(`{"id":"rec-%06d","ts":%d}`, i, i) })
	killMidWindow(t, db, filesWindow, false, jobs...)
	atCancel, filesAtCancel := prod.count(), len(parquetFiles(t, staging))
	// The input splits from 4 shards to 8 while no job runs: the next jobs read each parent
	// on from its table position to its end, then its children (parents first).
	if _, err := srv.Client().UpdateShardCount(context.Background(), &kinesis.UpdateShardCountInput{StreamName: aws.String("in"),
		TargetShardCount: aws.Int32(8), ScalingType: kinesistypes.ScalingTypeUniformScaling}); err != nil {
		t.Fatalf("splitting the input: %v", err)
	}
	jobs = start()
	killMidWindow(t, db, filesWindow, true, jobs...)
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
