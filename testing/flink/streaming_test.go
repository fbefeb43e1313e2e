package flink

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/transforms/count"
)

// streamingWindow is the window of the streaming tests: short, so that windows close
// within seconds of their records.
const streamingWindow = 2 * time.Second

// checkpointFlags are the Flink options of the streaming tests: a checkpoint a second.
var checkpointFlags = []string{"--checkpointing_interval=1000", "--finish_bundle_before_checkpointing=true"}

// kinesisFlags are the flags that point a pipeline at srv.
func kinesisFlags(srv *kinesistest.Server) []string {
	return []string{"--kinesis_endpoint=" + srv.URL(), "--kinesis_region=" + kinesistest.Region, "--aws_credentials_from_env"}
}

// TestWordcountStreamingLiveAcrossASplit runs wordcount as a streaming job on the cluster,
// puts records while it runs, splits the stream's shard between two batches, and checks
// that each window's table prints while the job runs (not when it ends) and that the tables
// printed are exactly the counts of the records in each window of arrival time. It also
// checks from Flink's REST API that the Flink options of flinkrunner reached the job and
// that its checkpoints complete.
func TestWordcountStreamingLiveAcrossASplit(t *testing.T) {
	needCluster(t)
	started := time.Now()
	srv := kinesistest.StartT(t)
	const stream = "events"
	if err := srv.CreateStream(stream, 1); err != nil {
		t.Fatal(err)
	}
	r := startPipeline(t, "wordcount", append(append([]string{"--stream=" + stream, "--bounded=false",
		"--starting_position=trim_horizon", "--window=" + streamingWindow.String()}, kinesisFlags(srv)...), checkpointFlags...)...)

	cfg := userConfig(t, r.job)
	if v, err := strconv.ParseFloat(cfg["checkpointingInterval"], 64); err != nil || v != 1000 {
		t.Errorf("the job's checkpointingInterval is %q, want 1000 (user-config %v)", cfg["checkpointingInterval"], cfg)
	}
	if cfg["finishBundleBeforeCheckpointing"] != "true" {
		t.Errorf("the job's finishBundleBeforeCheckpointing is %q, want true (user-config %v)", cfg["finishBundleBeforeCheckpointing"], cfg)
	}

	// Checkpoints fail to trigger until every task runs; count the failures after that.
	ready := r.awaitCheckpoints(t, 1)
	t.Logf("first checkpoint completed %v after launch", time.Since(r.started).Round(time.Millisecond))
	client := srv.Client()
	put(t, client, stream, entries("before", "alpha beta", "alpha")...)
	awaitTables(t, r, srv, stream, "the first batch's window")

	if _, err := client.SplitShard(context.Background(), &kinesis.SplitShardInput{
		StreamName:         aws.String(stream),
		ShardToSplit:       aws.String("shardId-000000000000"),
		NewStartingHashKey: aws.String("170141183460469231731687303715884105728"), // 2^127
	}); err != nil {
		t.Fatalf("splitting the stream's shard: %v", err)
	}
	var second []string
	for range 20 {
		second = append(second, "gamma")
	}
	put(t, client, stream, entries("after", append(second, "alpha delta")...)...)
	stored, err := srv.StreamRecords(stream)
	if err != nil {
		t.Fatal(err)
	}
	perShard := map[string]int{}
	for _, rec := range stored {
		perShard[rec.ShardID]++
	}
	if len(perShard) != 3 || perShard["shardId-000000000000"] != 2 {
		t.Fatalf("records per shard %v: want 2 in the parent and the rest spread over both children", perShard)
	}
	want := awaitTables(t, r, srv, stream, "the second batch's windows, read from both children")

	cps := checkpoints(t, r.job)
	if cps.Counts.Completed < 2 || cps.Counts.Failed != ready.Counts.Failed {
		t.Errorf("the job's checkpoints: %+v (%+v when its tasks ran), want more completed and no more failed", cps.Counts, ready.Counts)
	}
	r.cancel(t)
	got := tables(r.out())
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("wordcount printed\n%s\nwant exactly the tables\n%s", r.out(), strings.Join(want, ""))
	}
	t.Logf("measured: %v in all, checkpoints %+v", time.Since(started).Round(time.Millisecond), cps.Counts)
}

// awaitTables waits until wordcount has printed the table of every window of the
// records stream holds, while the job runs, and returns those tables sorted.
func awaitTables(t *testing.T, r *liveRun, srv *kinesistest.Server, stream, what string) []string {
	t.Helper()
	want := expectedTables(t, srv, stream)
	put := time.Now()
	await(t, 2*time.Minute, func() string {
		return fmt.Sprintf("%s: wordcount printed\n%s\nwant (among others) the tables\n%s", what, r.out(), strings.Join(want, ""))
	}, func() bool {
		if r.exited() {
			t.Fatalf("%s: wordcount ended before printing its tables: %v\nstdout:\n%s", what, r.err, r.out())
		}
		got := tables(r.out())
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	})
	t.Logf("%s printed %v after the put, while the job ran", what, time.Since(put).Round(time.Millisecond))
	return want
}

// expectedTables returns the wordcount tables of the records stream holds, one per
// window of streamingWindow of arrival time, sorted.
func expectedTables(t *testing.T, srv *kinesistest.Server, stream string) []string {
	t.Helper()
	stored, err := srv.StreamRecords(stream)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[time.Time]map[string]int64{}
	for _, rec := range stored {
		start := rec.ArrivalTime.UTC().Truncate(streamingWindow)
		if counts[start] == nil {
			counts[start] = map[string]int64{}
		}
		for _, w := range strings.Fields(string(rec.Data)) {
			counts[start][w]++
		}
	}
	var out []string
	for start, words := range counts {
		var rows []count.KeyCount
		for w, n := range words {
			rows = append(rows, count.KeyCount{Key: w, Count: n})
		}
		out = append(out, fmt.Sprintf("Window: %s to %s\n", start.Format(time.RFC3339Nano), start.Add(streamingWindow).Format(time.RFC3339Nano))+
			count.FormatTable("word", rows))
	}
	sort.Strings(out)
	return out
}

// TestKinesisToKinesisStreamingOnBothTaskManagers copies a twelve-shard stream to a
// three-shard one with KPL aggregation, as a streaming job at --parallelism=2, while
// records are put, through a Reshuffle of the Records (--reshuffle), which Flink transcodes
// with Beam Java's coders. Every record must arrive exactly once (nothing fails in this
// run, so the at-least-once sink makes no duplicates), the records with empty data too,
// and Flink's REST API must show the shard reader running on both TaskManagers, each
// reading records.
func TestKinesisToKinesisStreamingOnBothTaskManagers(t *testing.T) {
	needCluster(t)
	started := time.Now()
	srv := kinesistest.StartT(t)
	if err := srv.CreateStream("in", 12); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateStream("out", 3); err != nil {
		t.Fatal(err)
	}
	r := startPipeline(t, "kinesis-to-kinesis", append(append([]string{"--input_stream=in", "--output_stream=out",
		"--transform=passthrough", "--reshuffle", "--aggregation", "--bounded=false", "--starting_position=trim_horizon",
		"--parallelism=2"}, kinesisFlags(srv)...), checkpointFlags...)...)
	ready := r.awaitCheckpoints(t, 1)

	var want []string
	for batch := range 3 {
		var data []string
		for i := range 100 {
			d := fmt.Sprintf("record-%d-%03d", batch, i)
			if i%25 == 0 {
				d = "" // Kinesis allows empty data; a nil in a row-coded Record broke on Java runners
			}
			data = append(data, d)
		}
		put(t, srv.Client(), "in", entries(fmt.Sprintf("b%d", batch), data...)...)
		want = append(want, data...)
	}
	sort.Strings(want)
	var got []string
	aggregates := 0
	await(t, 2*time.Minute, func() string {
		return fmt.Sprintf("the output stream holds %d of the %d user records", len(got), len(want))
	}, func() bool {
		got, aggregates = userRecords(t, srv, "out")
		return len(got) >= len(want)
	})
	if !slices.Equal(got, want) {
		t.Errorf("the output stream holds %d user records, want each of the %d input records once; got %v", len(got), len(want), got)
	}
	if aggregates == 0 {
		t.Errorf("the output stream holds no KPL aggregate, want aggregation to pack the records")
	}
	// The REST API's task metrics lag (Flink fetches them every few seconds).
	var perTM map[string]int64
	await(t, time.Minute, func() string {
		return fmt.Sprintf("the shard reader read shards on the TaskManagers %v, want two", perTM)
	}, func() bool {
		perTM = readerTaskManagers(t, r.job)
		return len(perTM) == 2
	})
	cps := checkpoints(t, r.job)
	if cps.Counts.Failed != ready.Counts.Failed {
		t.Errorf("the job's checkpoints: %+v (%+v when its tasks ran), want no more failed", cps.Counts, ready.Counts)
	}
	r.cancel(t)
	t.Logf("measured: %v in all, %d user records in %d aggregates, shards read per TaskManager %v, checkpoints %+v",
		time.Since(started).Round(time.Millisecond), len(got), aggregates, perTM, cps.Counts)
}

// readerTaskManagers returns, for each TaskManager on which the job's shard reader (the
// vertex that runs kinesisio's readFn on the shard restrictions) received shards to read,
// how many it received.
func readerTaskManagers(t *testing.T, job string) map[string]int64 {
	t.Helper()
	var j struct {
		Vertices []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"vertices"`
	}
	restGet(t, "/jobs/"+job, &j)
	var names []string
	for _, v := range j.Vertices {
		names = append(names, v.Name)
		if !strings.Contains(v.Name, "kinesisio.Read") || strings.Contains(v.Name, "discoverFn") || strings.Contains(v.Name, "SplitAndSize") {
			continue
		}
		var tms struct {
			TaskManagers []struct {
				ID      string `json:"taskmanager-id"`
				Host    string `json:"host"`
				Metrics struct {
					ReadRecords int64 `json:"read-records"`
				} `json:"metrics"`
			} `json:"taskmanagers"`
		}
		restGet(t, "/jobs/"+job+"/vertices/"+v.ID+"/taskmanagers", &tms)
		out := map[string]int64{}
		for _, tm := range tms.TaskManagers {
			if tm.Metrics.ReadRecords > 0 {
				out[tm.ID] = tm.Metrics.ReadRecords
			}
		}
		return out
	}
	t.Fatalf("the job has no shard reader vertex among %q", names)
	return nil
}
