package flink

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/beamkinesis/beamkinesis/testing/emulators"
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

// killMidWindow waits until r's job has written counts and committed a position of every
// shard of the 4-shard input, lets a window open, and a third into it cancels the job hard
// (no savepoint) or, with wholeCluster, kills every TaskManager and the JobManager (kill -9; no
// HA, so the job is gone) and starts them again; either way it kills the job's launcher
// (which, in LOOPBACK, is also its SDK worker).
func killMidWindow(t *testing.T, r *liveRun, db *dynamodb.Client, table string, outputs func() []string, wholeCluster bool) {
	t.Helper()
	await(t, 2*time.Minute, func() string {
		return fmt.Sprintf("%s: want counts in the output and four positions in %s, have %v", r.name, table, tablePositions(t, db, table))
	}, func() bool {
		if len(outputs()) == 0 {
			return false
		}
		n := 0
		for _, cp := range tablePositions(t, db, table) {
			if cp != "" && cp[0] >= '0' && cp[0] <= '9' {
				n++
			}
		}
		return n == 4
	})
	now := time.Now()
	time.Sleep(now.Truncate(heldWindow).Add(heldWindow + heldWindow/3).Sub(now))
	if wholeCluster {
		clusterScript(t, "kill-all")
		r.cmd.Process.Kill()
		<-r.done
		t.Logf("%s: every TaskManager and the JobManager killed, and the launcher, %v after launch, mid-window", r.name, time.Since(r.started).Round(time.Millisecond))
		clusterScript(t, "start-all")
		return
	}
	if err := cluster().Cancel(context.Background(), r.job); err != nil {
		t.Fatalf("cancelling %s's job: %v", r.name, err)
	}
	r.cmd.Process.Kill()
	<-r.done
	t.Logf("%s: job cancelled and launcher killed %v after launch, mid-window", r.name, time.Since(r.started).Round(time.Millisecond))
}

// TestCountWindowsLoseNothingOnARestartFromTheTable is issue 23's case on the cluster:
// kinesis-to-kinesis --transform=count --window=5s with --checkpoint_table on dynalite,
// under a steady producer (200 records/s over 4 shards). The job is cancelled hard in the
// middle of a window and its launcher killed, so its open windows are gone with it; a new
// job started on the table must count every record the first one had not written: every
// produced record is counted at least once. Duplicates are reported.
func TestCountWindowsLoseNothingOnARestartFromTheTable(t *testing.T) {
	testCountWindowsAcrossARestart(t, "flink-held-count", false)
}

// TestCountWindowsLoseNothingWhenTheClusterDies is the same with every TaskManager and the
// JobManager killed (kill -9) mid-window instead of a cancel: the cluster, not only the
// job, dies; it is started again and a new job runs on the table.
func TestCountWindowsLoseNothingWhenTheClusterDies(t *testing.T) {
	testCountWindowsAcrossARestart(t, "flink-held-count-cluster", true)
}

func testCountWindowsAcrossARestart(t *testing.T, table string, killCluster bool) {
	needCluster(t)
	started := time.Now()
	dynURL := emulators.StartT(t, emulators.Dynalite).URL()
	db := dynamodb.New(dynamodb.Options{
		Region:       emulators.Region,
		BaseEndpoint: aws.String(dynURL),
		Credentials:  credentials.NewStaticCredentialsProvider("flink-e2e", "flink-e2e", ""),
	})
	srv := startKinesis(t)
	if err := srv.CreateStream("in", 4); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateStream("out", 2); err != nil {
		t.Fatal(err)
	}
	flags := append(append([]string{"--input_stream=in", "--output_stream=out",
		"--transform=count", "--window=" + heldWindow.String(), "--aggregation=false", "--bounded=false", "--starting_position=trim_horizon",
		"--checkpoint_table=" + table, "--checkpoint_table_endpoint=" + dynURL, "--checkpoint_takeover",
		"--parallelism=2"}, kinesisFlags(srv)...), checkpointFlags...)
	outputs := func() []string {
		got, _ := userRecords(t, srv, "out")
		return got
	}

	first := startPipeline(t, "kinesis-to-kinesis", flags...)
	first.awaitCheckpoints(t, 1)
	prod := startProducer(srv.Client(), "in", 20, 100*time.Millisecond, func(i int) string { return fmt.Sprintf("rec-%06d", i) })
	killMidWindow(t, first, db, table, outputs, killCluster)
	atKill := prod.count()

	second := startPipeline(t, "kinesis-to-kinesis", flags...)
	second.awaitCheckpoints(t, 1)
	time.Sleep(heldWindow) // the producer keeps putting while the second job runs
	want := prod.finish(t)
	var lost []string
	var dups int
	await(t, 2*time.Minute, func() string {
		return fmt.Sprintf("%d of the %d records put are not counted in the output yet (e.g. %q)", len(lost), len(want), lost[:min(3, len(lost))])
	}, func() bool {
		lost, dups = countLedger(t, outputs(), want)
		return len(lost) == 0
	})
	second.cancel(t)
	lost, dups = countLedger(t, outputs(), want)
	t.Logf("measured: %v in all; %d records put (%d before the kill); lost %d, duplicates %d", time.Since(started).Round(time.Millisecond), len(want), atKill, len(lost), dups)
	if len(lost) > 0 {
		t.Errorf("%d of %d records are counted by neither job, e.g. %s", len(lost), len(want), strings.Join(lost[:min(5, len(lost))], ", "))
	}
}
