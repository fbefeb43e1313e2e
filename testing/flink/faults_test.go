package flink

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/flink/flinkrest"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// producer puts numbered records to a stream in small batches until stopped, as a live
// source does while a fault hits the job.
type producer struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	sent []string
	err  error
}

// startProducer puts batches of batch records made by data(i) to stream every interval.
func startProducer(client *kinesis.Client, stream string, batch int, interval time.Duration, data func(i int) string) *producer {
	p := &producer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 0; ; {
			entries := make([]types.PutRecordsRequestEntry, batch)
			var sent []string
			for i := range entries {
				d := data(n)
				entries[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("key-%d", n)), Data: []byte(d)}
				sent = append(sent, d)
				n++
			}
			out, err := client.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
			if err == nil && aws.ToInt32(out.FailedRecordCount) != 0 {
				err = fmt.Errorf("%d of %d records failed", aws.ToInt32(out.FailedRecordCount), batch)
			}
			p.mu.Lock()
			if err != nil {
				p.err = fmt.Errorf("putting to %s: %w", stream, err)
				p.mu.Unlock()
				return
			}
			p.sent = append(p.sent, sent...)
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// finish stops the producer and returns what it put, sorted.
func (p *producer) finish(t *testing.T) []string {
	t.Helper()
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	if p.err != nil {
		t.Fatal(p.err)
	}
	out := slices.Clone(p.sent)
	sort.Strings(out)
	return out
}

// count returns how many records the producer has put so far.
func (p *producer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sent)
}

// stagedIDs returns the id of every event in the kinesis-to-files event files under dir,
// sorted, one entry per line of the files.
func stagedIDs(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "events", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			var e struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%s: line %q: %v", f, line, err)
			}
			ids = append(ids, e.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// duplicates returns how many entries of the sorted got repeat an earlier one, and
// the entries of the sorted want that got lacks.
func duplicates(got, want []string) (dups int, missing []string) {
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, n := range seen {
		dups += n - 1
	}
	for _, w := range want {
		if seen[w] == 0 {
			missing = append(missing, w)
		}
	}
	return dups, missing
}

// eventJSON is the i-th event the fault tests put: {"id":"e-00042","ts":42,"v":"x"}.
func eventJSON(i int) string {
	return fmt.Sprintf(`{"id":"e-%05d","ts":%d,"v":"x"}`, i, i)
}

// ids returns the ids of events made by eventJSON, sorted.
func ids(events []string) []string {
	out := make([]string, len(events))
	for i, e := range events {
		var v struct {
			ID string `json:"id"`
		}
		json.Unmarshal([]byte(e), &v)
		out[i] = v.ID
	}
	sort.Strings(out)
	return out
}

// awaitRestored waits until the run's job has restored from a checkpoint after a fault and
// completed a checkpoint since, and returns its checkpoint statistics.
func (r *liveRun) awaitRestored(t *testing.T) flinkrest.CheckpointStats {
	t.Helper()
	var cps flinkrest.CheckpointStats
	await(t, 3*time.Minute, func() string {
		return fmt.Sprintf("%s's job has not restored and checkpointed again: %+v", r.name, cps.Counts)
	}, func() bool {
		cps = checkpoints(t, r.job)
		return cps.Latest.Restored != nil && cps.Latest.Completed != nil && cps.Latest.Completed.ID > cps.Latest.Restored.ID
	})
	return cps
}

// TestTaskManagerKillRestoresFromTheLastCheckpoint runs kinesis-to-files as a streaming
// job at --parallelism=2 while a producer puts events, kills one TaskManager with kill -9
// after some checkpoints, and starts a replacement. The job must restore from its last
// checkpoint and the staged files must end up holding every event exactly once: the
// file sink writes each window's file whole and under a deterministic name, so what the
// restored job writes again replaces what it wrote before.
func TestTaskManagerKillRestoresFromTheLastCheckpoint(t *testing.T) {
	needCluster(t)
	started := time.Now()
	srv := kinesistest.StartT(t)
	if err := srv.CreateStream("events", 2); err != nil {
		t.Fatal(err)
	}
	staging := t.TempDir()
	r := startPipeline(t, "kinesis-to-files", append(append([]string{"--stream=events", "--bounded=false",
		"--starting_position=trim_horizon", "--window=" + streamingWindow.String(), "--staging_dir=" + staging,
		// JSON lines, which stagedIDs reads; the Parquet files' content is checked by DuckDB
		// in pipelines/kinesis-to-files, and their determinism in transforms/filesink.
		"--format=jsonl", "--shards=2", "--parallelism=2"}, kinesisFlags(srv)...), checkpointFlags...)...)
	ready := r.awaitCheckpoints(t, 1)
	prod := startProducer(srv.Client(), "events", 10, 200*time.Millisecond, eventJSON)
	before := r.awaitCheckpoints(t, ready.Counts.Completed+3)
	last := before.Latest.Completed.ID

	clusterScript(t, "kill-tm", "1")
	killed := time.Now()
	sentAtKill := prod.count()
	clusterScript(t, "start-tm", "1")
	cps := r.awaitRestored(t)
	running := time.Since(killed)
	restoredFrom := cps.Latest.Restored.ID
	restoreAfter := time.UnixMilli(cps.Latest.Restored.RestoreTime).Sub(killed)
	if restoredFrom < last {
		t.Errorf("the job restored from checkpoint %d, want the last one completed before the kill (%d) or later", restoredFrom, last)
	}
	// A few more windows after the restore, then the producer stops and every event
	// must be staged.
	time.Sleep(2 * streamingWindow) // the producer keeps putting across the restore
	want := ids(prod.finish(t))
	var got []string
	await(t, 2*time.Minute, func() string { return fmt.Sprintf("%d of the %d events are staged", len(got), len(want)) }, func() bool {
		got = stagedIDs(t, staging)
		return len(got) >= len(want)
	})
	final := checkpoints(t, r.job)
	r.cancel(t)
	got = stagedIDs(t, staging)
	dups, missing := duplicates(got, want)
	if !slices.Equal(got, want) {
		t.Errorf("the staged files hold %d events (%d duplicates, missing %v), want each of the %d put exactly once", len(got), dups, missing, len(want))
	}
	t.Logf("measured: %v in all; %d events (%d put before the kill); checkpoint %d completed before the kill, restored from %d (restore began %v after the kill), running and checkpointing again %v after it; checkpoints %+v; %d duplicate lines",
		time.Since(started).Round(time.Millisecond), len(want), sentAtKill, last, restoredFrom, restoreAfter.Round(time.Millisecond), running.Round(time.Millisecond), final.Counts, dups)
}

// TestTaskManagerKillLosesNoRecordOfKinesisToKinesis kills a TaskManager under a
// streaming kinesis-to-kinesis job as TestTaskManagerKillRestoresFromTheLastCheckpoint
// does. The Kinesis sink is at-least-once: after the restore the job writes again what it
// wrote since the last checkpoint, so the output must hold every input record at least
// once; the test reports the duplicates.
func TestTaskManagerKillLosesNoRecordOfKinesisToKinesis(t *testing.T) {
	needCluster(t)
	started := time.Now()
	srv := kinesistest.StartT(t)
	if err := srv.CreateStream("in", 2); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateStream("out", 2); err != nil {
		t.Fatal(err)
	}
	r := startPipeline(t, "kinesis-to-kinesis", append(append([]string{"--input_stream=in", "--output_stream=out",
		"--transform=passthrough", "--aggregation=false", "--bounded=false", "--starting_position=trim_horizon",
		"--parallelism=2"}, kinesisFlags(srv)...), checkpointFlags...)...)
	ready := r.awaitCheckpoints(t, 1)
	prod := startProducer(srv.Client(), "in", 10, 200*time.Millisecond, func(i int) string { return fmt.Sprintf("record-%05d", i) })
	before := r.awaitCheckpoints(t, ready.Counts.Completed+3)
	clusterScript(t, "kill-tm", "2")
	killed := time.Now()
	clusterScript(t, "start-tm", "2")
	cps := r.awaitRestored(t)
	running := time.Since(killed)
	time.Sleep(2 * time.Second) // the producer keeps putting across the restore
	want := prod.finish(t)
	var got []string
	await(t, 2*time.Minute, func() string { return fmt.Sprintf("%d records in the output, want all %d", len(got), len(want)) }, func() bool {
		got, _ = userRecords(t, srv, "out")
		_, missing := duplicates(got, want)
		return len(missing) == 0
	})
	r.cancel(t)
	got, _ = userRecords(t, srv, "out")
	dups, missing := duplicates(got, want)
	if len(missing) != 0 || len(got) != len(want)+dups {
		t.Errorf("the output holds %d records (%d duplicates), missing %v; want every one of the %d input records", len(got), dups, missing, len(want))
	}
	t.Logf("measured: %v in all; %d records; checkpoint %d completed before the kill, restored from %d (restore began %v after the kill), checkpointing again %v after it; %d duplicates written",
		time.Since(started).Round(time.Millisecond), len(want), before.Latest.Completed.ID, cps.Latest.Restored.ID,
		time.UnixMilli(cps.Latest.Restored.RestoreTime).Sub(killed).Round(time.Millisecond), running.Round(time.Millisecond), dups)
}

// TestSavepointRestartReadsOnFromTheSavepoint runs kinesis-to-kinesis as a streaming job,
// stops it with a savepoint (Flink's stop), and starts it again from that savepoint
// (--savepoint_path) writing to a second output stream. Together the two runs must have
// copied every record, and the second must not start from the beginning: none of the
// records the first run copied before the savepoint's batch reappear in its output.
func TestSavepointRestartReadsOnFromTheSavepoint(t *testing.T) {
	needCluster(t)
	started := time.Now()
	srv := kinesistest.StartT(t)
	for name, shards := range map[string]int{"in": 2, "out1": 1, "out2": 1} {
		if err := srv.CreateStream(name, shards); err != nil {
			t.Fatal(err)
		}
	}
	args := func(out string, extra ...string) []string {
		return append(append(append([]string{"--input_stream=in", "--output_stream=" + out,
			"--transform=passthrough", "--aggregation=false", "--bounded=false", "--starting_position=trim_horizon"},
			kinesisFlags(srv)...), checkpointFlags...), extra...)
	}
	batch := func(name string, n int) []string {
		var data []string
		for i := range n {
			data = append(data, fmt.Sprintf("%s-%03d", name, i))
		}
		put(t, srv.Client(), "in", entries(name, data...)...)
		return data
	}
	first := startPipeline(t, "kinesis-to-kinesis", args("out1")...)
	first.awaitCheckpoints(t, 1)
	a := batch("a", 100)
	await(t, 2*time.Minute, func() string { return "the first run has not copied batch a" }, func() bool {
		got, _ := userRecords(t, srv, "out1")
		_, missing := duplicates(got, a)
		return len(missing) == 0
	})
	b := batch("b", 100) // may be partly copied when the savepoint is taken
	savepoint := first.stopWithSavepoint(t)
	out1, _ := userRecords(t, srv, "out1")
	t.Logf("savepoint %s taken %v after the start; the first run copied %d records", savepoint, time.Since(started).Round(time.Millisecond), len(out1))

	second := startPipeline(t, "kinesis-to-kinesis", args("out2", "--savepoint_path="+savepoint)...)
	cps := second.awaitCheckpoints(t, 1)
	if cps.Latest.Restored == nil || !cps.Latest.Restored.IsSavepoint {
		t.Errorf("the second run's job restored %+v, want the savepoint %s", cps.Latest.Restored, savepoint)
	}
	c := batch("c", 100)
	want := append(append(append([]string{}, a...), b...), c...)
	sort.Strings(want)
	var both []string
	await(t, 2*time.Minute, func() string { return fmt.Sprintf("the two runs copied %d records, want all %d", len(both), len(want)) }, func() bool {
		out2, _ := userRecords(t, srv, "out2")
		both = append(append([]string{}, out1...), out2...)
		sort.Strings(both)
		_, missing := duplicates(both, want)
		return len(missing) == 0
	})
	second.cancel(t)
	out2, _ := userRecords(t, srv, "out2")
	again := 0
	for _, rec := range out2 {
		if slices.Contains(a, rec) {
			again++
		}
	}
	if again != 0 {
		t.Errorf("the second run copied %d records of batch a, which the first run had copied before the savepoint; want it to resume from the savepoint, not the beginning", again)
	}
	dups, missing := duplicates(both, want)
	if len(missing) != 0 || len(both) != len(want)+dups {
		t.Errorf("the two runs copied %d records (%d duplicates), missing %v", len(both), dups, missing)
	}
	t.Logf("measured: %v in all; first run %d records, second %d, %d copied by both", time.Since(started).Round(time.Millisecond), len(out1), len(out2), dups)
}
