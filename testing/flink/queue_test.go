package flink

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x1(queueRecordData)
	register.Function2x1(formatQueueCount)
}

// queueLedger checks what a job of a queue wrote against what was put: every record of
// want must be in out (lost otherwise), and every record written n > 1 times must have been
// delivered by the queue at least n times (a duplicate is a redelivery, nothing else). It
// returns the records lost and how many extra times records were written.
func queueLedger(t *testing.T, srv *kinesistest.Server, arn string, written map[string]int, want []string) (lost []string, dups int) {
	t.Helper()
	recs, err := srv.QueueRecords(arn)
	if err != nil {
		t.Fatal(err)
	}
	deliveries := map[string]int{}
	for _, r := range recs {
		deliveries[string(r.Data)] = r.Deliveries
	}
	for _, w := range want {
		n := written[w]
		if n == 0 {
			lost = append(lost, w)
			continue
		}
		dups += n - 1
		if n > 1 && deliveries[w] < n {
			t.Errorf("%s was written %d times but the queue delivered it %d times: a duplicate that is no redelivery", w, n, deliveries[w])
		}
	}
	return lost, dups
}

// countsOf sums the counts kinesis-to-kinesis --transform=count wrote to out per record.
func countsOf(t *testing.T, srv *kinesistest.Server, out string) map[string]int {
	t.Helper()
	recs, _ := userRecords(t, srv, out)
	return countedByKey(t, recs)
}

// linesOf counts the events of the kinesis-to-files JSON lines under dir, by the event
// as eventJSON made it.
func linesOf(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, id := range stagedIDs(t, dir) {
		var i int
		if _, err := fmt.Sscanf(id, "e-%d", &i); err != nil {
			t.Fatalf("staged event id %q: %v", id, err)
		}
		out[eventJSON(i)]++
	}
	return out
}

// eventsUpTo is what eventJSON made for 0..n-1.
func eventsUpTo(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = eventJSON(i)
	}
	return out
}

// queueWindow and queueFilesWindow are the windows of the queue kill tests' count and
// files jobs: 5 s, as the windowed job, and a multiple of it.
const (
	queueWindow      = 5 * time.Second
	queueFilesWindow = 10 * time.Second
)

// TestQueueWindowsLoseNothingAcrossKills runs two windowed jobs that read a queue each
// (--queue; two queues on one on-demand stream, so each job gets every record) while a
// producer puts 100 events a second: kinesis-to-kinesis --transform=count --window=5s and
// kinesis-to-files --window=10s staging JSON lines, both at --parallelism=2 with a
// checkpoint a second. A third into a window, TaskManager 1 is killed (kill -9) and started
// again; the jobs live on and restore from their last checkpoints, and while they live
// every event put before the kill must reach both outputs: what the dead tasks had emitted
// after the checkpoint must come back. Then, a third into a window again, every
// TaskManager and the JobManager are killed (no HA: the jobs are gone) with the jobs'
// launchers, the cluster started again, and new jobs started on the same queues; what the
// dead jobs held is let back at once on the server clock (the read's visibility would
// return it within a minute). When the producer stops, every event put must be counted and
// staged at least once, and each one written more than once must have been delivered by
// its queue as many times.
func TestQueueWindowsLoseNothingAcrossKills(t *testing.T) {
	needCluster(t)
	started := time.Now()
	srv := kinesistest.StartT(t)
	if err := srv.CreateOnDemandStream("in", 2, ""); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateStream("out", 2); err != nil {
		t.Fatal(err)
	}
	arns := map[string]string{}
	for _, q := range []string{"count", "files"} {
		arn, err := srv.CreateQueue(q, "in", kinesistest.QueueConfig{StartingPosition: types.QueueStartingPositionTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		arns[q] = arn
	}
	common := append(append([]string{"--bounded=false", "--parallelism=2"}, kinesisFlags(srv)...), checkpointFlags...)
	countFlags := append([]string{"--queue=" + arns["count"], "--output_stream=out", "--transform=count",
		"--window=" + queueWindow.String(), "--aggregation=false"}, common...)
	staging := t.TempDir()
	filesFlags := append([]string{"--queue=" + arns["files"], "--staging_dir=" + staging, "--window=" + queueFilesWindow.String(),
		"--format=jsonl"}, common...)
	acked := func(q string) int64 {
		st, err := srv.QueueStats(arns[q])
		if err != nil {
			t.Fatal(err)
		}
		return st.Acked
	}
	settled := func(q string) func() (bool, string) {
		from := acked(q)
		return func() (bool, string) {
			st, err := srv.QueueStats(arns[q])
			if err != nil {
				t.Fatal(err)
			}
			return st.Acked > from, fmt.Sprintf("queue %s: %+v (%d acknowledged when the job started)", q, st, from)
		}
	}
	start := func() []heldJob {
		count := startPipeline(t, "kinesis-to-kinesis", countFlags...)
		files := startPipeline(t, "kinesis-to-files", filesFlags...)
		count.awaitCheckpoints(t, 1)
		files.awaitCheckpoints(t, 1)
		counts, staged := len(countsOf(t, srv, "out")), len(stagedIDs(t, staging))
		return []heldJob{
			{count, func() bool { return len(countsOf(t, srv, "out")) > counts }, settled("count")},
			{files, func() bool { return len(stagedIDs(t, staging)) > staged }, settled("files")},
		}
	}
	ledgers := func(what string, want []string, timeout time.Duration) {
		t.Helper()
		for _, c := range []struct {
			queue   string
			written func() map[string]int
		}{{"count", func() map[string]int { return countsOf(t, srv, "out") }}, {"files", func() map[string]int { return linesOf(t, staging) }}} {
			var lost []string
			dups := 0
			await(t, timeout, func() string {
				st, _ := srv.QueueStats(arns[c.queue])
				return fmt.Sprintf("%s, %s: %d of the %d events put are not written (e.g. %s); queue %+v",
					what, c.queue, len(lost), len(want), strings.Join(lost[:min(3, len(lost))], " "), st)
			}, func() bool {
				lost, dups = queueLedger(t, srv, arns[c.queue], c.written(), want)
				return len(lost) == 0
			})
			st, err := srv.QueueStats(arns[c.queue])
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("measured, %s, %s: %d put, 0 lost, %d duplicates (queue: %d received, %d redelivered, %d acknowledged) %v after the start",
				what, c.queue, len(want), dups, st.Received, st.Redelivered, st.Acked, time.Since(started).Round(time.Millisecond))
		}
	}

	jobs := start()
	prod := startProducer(srv.Client(), "in", 10, 100*time.Millisecond, eventJSON)
	killMidWindow(t, queueFilesWindow, killTaskManager, jobs...)
	atTM := prod.count()
	for _, j := range jobs {
		j.run.awaitRestored(t)
	}
	// The jobs live: what their dead tasks held must come back while they run, within the
	// read's visibility (1 minute) and a window.
	ledgers("after the TaskManager kill", eventsUpTo(atTM), 2*time.Minute)

	killMidWindow(t, queueFilesWindow, killCluster, jobs...)
	atCluster := prod.count()
	for q, arn := range arns {
		n, err := srv.ExpireQueueInFlight(arn)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("queue %s: %d records in flight when the cluster died let back", q, n)
	}
	jobs = start()
	time.Sleep(queueFilesWindow) // the producer keeps putting while the new jobs run
	want := prod.finish(t)
	t.Logf("%d events put: %d before the TaskManager kill, %d before the cluster kill", len(want), atTM, atCluster)
	ledgers("after the cluster kill", want, 2*time.Minute)
	for _, j := range jobs {
		j.run.cancel(t)
	}
	t.Logf("measured: %v in all", time.Since(started).Round(time.Millisecond))
}

// queueSink collects what the pipeline of TestQueueWindowLongerThanVisibility wrote, by
// window and record: its workers run in this process (LOOPBACK).
var queueSink struct {
	mu  sync.Mutex
	got []string
}

// queueRecordData is a queue record's data.
func queueRecordData(r kinesisio.QueueRecord) string { return string(r.Data) }

// formatQueueCount is a record's count in its window, as kinesisio.Write writes it.
func formatQueueCount(data string, n int) kinesisio.Message {
	return kinesisio.Message{PartitionKey: data, Data: []byte(fmt.Sprintf("%s=%d", data, n))}
}

// TestQueueWindowLongerThanVisibilityIsNotRedelivered reads a queue whose visibility
// timeout (2 s, also the read's WithQueueVisibility) is a fifth of the job's 10 s windows,
// acknowledging after the sink (WithCommitAfterSinks): records wait in an open window five
// times their visibility, and the read must keep them invisible while the job lives. Every
// record put must be counted exactly once, none delivered twice, none let back by an
// expired visibility, and each acknowledged once.
func TestQueueWindowLongerThanVisibilityIsNotRedelivered(t *testing.T) {
	needCluster(t)
	started := time.Now()
	const visibility, win = 2 * time.Second, 10 * time.Second
	srv := kinesistest.StartT(t)
	if err := srv.CreateOnDemandStream("in", 1, ""); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateStream("out", 1); err != nil {
		t.Fatal(err)
	}
	arn, err := srv.CreateQueue("long", "in", kinesistest.QueueConfig{StartingPosition: types.QueueStartingPositionTypeTrimHorizon, VisibilityTimeout: visibility})
	if err != nil {
		t.Fatal(err)
	}
	endpoint, region, keys := kinesisio.WithEndpoint(srv.URL()), kinesisio.WithRegion(kinesistest.Region), kinesisio.WithStaticCredentials("flink-e2e", "flink-e2e")
	var commit kinesisio.Commit
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.ReadQueue(s, arn, kinesisio.WithQueueVisibility(visibility), kinesisio.WithQueueWait(time.Second),
		kinesisio.WithCommitAfterSinks(&commit), endpoint, region, keys)
	windowed := beam.WindowInto(s, window.NewFixedWindows(win), beam.ParDo(s, queueRecordData, recs))
	counts := stats.Count(s, windowed)
	failed := kinesisio.Write(s, "out", beam.ParDo(s, formatQueueCount, counts), kinesisio.WithoutAggregation(), kinesisio.WithFailOnError(), endpoint, region, keys)
	commit.After(s, failed)

	before, done := executeInProcess(t, p)
	var job string
	await(t, pipelineTimeout, func() string { return "the job is not running" }, func() bool {
		select {
		case err := <-done:
			t.Fatalf("the job ended before running: %v", err)
		default:
		}
		for id, state := range jobIDs(t) {
			if _, old := before[id]; !old && state == "RUNNING" {
				job = id
				return true
			}
		}
		return false
	})
	defer func() {
		if err := cluster().Cancel(context.Background(), job); err != nil {
			t.Errorf("cancelling the job: %v", err)
		}
		<-done
	}()

	var want []string
	for batch := range 3 {
		var data []string
		for i := range 100 {
			data = append(data, fmt.Sprintf("long-%d-%03d", batch, i))
		}
		put(t, srv.Client(), "in", entries(fmt.Sprintf("b%d", batch), data...)...)
		want = append(want, data...)
		time.Sleep(win / 3) // the batches spread over the windows' span
	}
	written := func() map[string]int {
		recs, _ := userRecords(t, srv, "out")
		out := map[string]int{}
		for _, r := range recs {
			data, n, ok := strings.Cut(r, "=")
			if !ok {
				t.Fatalf("an output record is not data=count: %q", r)
			}
			var c int
			fmt.Sscan(n, &c)
			out[data] += c
		}
		return out
	}
	var st kinesistest.QueueStats
	await(t, 2*time.Minute, func() string {
		return fmt.Sprintf("%d of %d records written; queue %+v", len(written()), len(want), st)
	}, func() bool {
		st, _ = srv.QueueStats(arn)
		return len(written()) >= len(want) && st.Acked >= int64(len(want))
	})
	lost, dups := queueLedger(t, srv, arn, written(), want)
	st, _ = srv.QueueStats(arn)
	t.Logf("measured: %d put, %d lost, %d duplicates; queue %+v; %v in all", len(want), len(lost), dups, st, time.Since(started).Round(time.Millisecond))
	if len(lost) != 0 || dups != 0 {
		t.Errorf("%d records lost, %d written more than once; want each exactly once", len(lost), dups)
	}
	if st.Redelivered != 0 || st.Expired != 0 || st.Received != int64(len(want)) || st.Acked != int64(len(want)) || st.InFlight != 0 {
		t.Errorf("the queue: %+v; want each of the %d records received and acknowledged once, none expired or redelivered", st, len(want))
	}
}
