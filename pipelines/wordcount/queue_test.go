package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/producer"
	"github.com/beamkinesis/beamkinesis/testing/childjob"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.DoFn1x2[string, string, error](&writeTableFn{})
}

// writeTableFn is the tests' sink of wordcount's tables: each table goes to a file of its
// own in Dir, written under a hidden name and renamed, so a killed job leaves no partial
// table. Its output, the table, is what the sink wrote.
type writeTableFn struct{ Dir string }

func (fn *writeTableFn) ProcessElement(table string) (string, error) {
	f, err := os.CreateTemp(fn.Dir, ".table-*")
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(table); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return table, os.Rename(f.Name(), filepath.Join(fn.Dir, strings.TrimPrefix(filepath.Base(f.Name()), ".")+".txt"))
}

// runWrittenCount runs wordcount with args and env on Prism until it ends, its tables
// written to dir and the read's records acknowledged once their tables were written.
func runWrittenCount(t *testing.T, dir string, env environment, args ...string) {
	t.Helper()
	j, err := prepare(context.Background(), parse(t, args...), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.stop()
	p, s := beam.NewPipelineWithRoot()
	tables, commit := j.tables(s)
	commit.After(s, beam.ParDo(s, &writeTableFn{Dir: dir}, tables))
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// writtenTables lists the table files written to dir.
func writtenTables(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "table-*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// wordTotals sums the counts of each word over every table written to dir.
func wordTotals(t *testing.T, dir string) map[string]int {
	t.Helper()
	totals := map[string]int{}
	for _, name := range writtenTables(t, dir) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			cells := strings.Split(line, "|")
			if len(cells) != 4 || strings.TrimSpace(cells[2]) == "count" {
				continue // the title, a rule or the header
			}
			n, err := strconv.Atoi(strings.TrimSpace(cells[2]))
			if err != nil {
				t.Fatalf("table %s: row %q: %v", name, line, err)
			}
			totals[strings.TrimSpace(cells[1])] += n
		}
	}
	return totals
}

// killedQueueCountEnv names the environment of TestKilledQueueCountJobChild: the tables'
// directory, then the job's flags, separated by spaces.
const killedQueueCountEnv = "BEAMKINESIS_WORDCOUNT_KILLED_QUEUE_JOB"

// TestKilledQueueCountJobChild is the first job of TestQueueCountLosesNothingAcrossAKill,
// run in a child process of the test binary so that it can be killed mid-window. A normal
// run skips it.
func TestKilledQueueCountJobChild(t *testing.T) {
	args := childjob.Args(t, killedQueueCountEnv)
	runWrittenCount(t, args[0], environment{}, args[1:]...)
}

// queueCountWindow is the window of the queue kill test, the 5 s.
const queueCountWindow = 5 * time.Second

// TestQueueCountLosesNothingAcrossAKill is the windowed job on Prism: wordcount
// counts the words of a queue (--queue) in 5 s windows while a producer puts JSON events
// ({"id":"e-00001","ts":1}: the words id, e, 00001, ts and 1) into its stream. The job is
// killed (SIGKILL, no drain) half into a window, after it wrote tables; what it had
// received and not acknowledged comes back (the test expires its visibility on the server
// clock rather than waiting a minute), and a second job counts it. The counts summed over
// every table must then be exactly those of the events put, each event counted c ≥ 1 times
// (0 lost), and an event counted more than once (its table written by the killed job, its
// acknowledgement lost with it) must be one the queue delivered at least c times.
//
// Seen failing with the queue read acknowledging records once the runner committed the
// bundle that read them (pipeflags' Read without WithCommitAfterSinks): 636 events put, 92
// lost (the open window's, acknowledged when read and never counted).
func TestQueueCountLosesNothingAcrossAKill(t *testing.T) {
	const stream = "events"
	srv := kinesistest.StartT(t, kinesistest.WithOnDemandStream(stream, 1, ""))
	arn, err := srv.CreateQueue("counts", stream, kinesistest.QueueConfig{StartingPosition: "TRIM_HORIZON"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "wordcount-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wordcount-test")
	dir := t.TempDir()
	args := []string{"--queue=" + arn, "--kinesis_endpoint=" + srv.URL(), "--kinesis_region=" + kinesistest.Region,
		"--aws_credentials_from_env", "--bounded=false", "--window=" + queueCountWindow.String()}

	events := producer.Start(srv, stream, 20)
	child := childjob.Start(t, "TestKilledQueueCountJobChild", killedQueueCountEnv, dir+" "+strings.Join(args, " "))
	events.Steady()
	// Wait until the job wrote two windows' tables and acknowledged records, then kill it
	// half into a window: the open window's events are received and not counted.
	child.Await(t, 3*time.Minute, "write two tables and acknowledge", func() bool {
		st, err := srv.QueueStats(arn)
		return err == nil && st.Acked > 0 && len(writtenTables(t, dir)) >= 2
	})
	atKill, expired := events.KillQueueJob(t, child, arn, queueCountWindow, queueCountWindow/2)
	written1 := len(writtenTables(t, dir))

	runWrittenCount(t, dir, environment{queueOpts: []kinesisio.QueueOption{kinesisio.WithQueueWait(time.Second), kinesisio.WithQueueStopWhenIdle(3 * time.Second)}}, args...)

	totals := wordTotals(t, dir)
	deliveries := queueDeliveries(t, srv, arn)
	want := map[string]int{}
	var lost []string
	counted, dups := 0, 0
	for i := int64(1); i <= events.N(); i++ {
		id := producer.ID(i)
		c := totals[strings.TrimPrefix(id, "e-")]
		if c == 0 {
			lost = append(lost, id)
		}
		if c > 1 {
			dups += c - 1
			if deliveries[id] < c {
				t.Errorf("event %s is counted %d times, but the queue delivered it %d times", id, c, deliveries[id])
			}
		}
		counted += c
		for _, w := range []string{"id", "e", strings.TrimPrefix(id, "e-"), "ts", strconv.FormatInt(i, 10)} {
			want[w] += c
		}
	}
	st, err := srv.QueueStats(arn)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events put; the killed job had written %d tables and acknowledged %d records (%d in flight at the kill, %d let back); after the second job %d tables count %d events: %d lost, %d counted again; queue: %+v",
		events.N(), written1, atKill.Acked, atKill.InFlight, expired, len(writtenTables(t, dir)), counted, len(lost), dups, st)
	if len(lost) != 0 {
		t.Fatalf("%d events lost, e.g. %q", len(lost), lost[:min(len(lost), 5)])
	}
	for w, n := range totals {
		if want[w] != n {
			t.Errorf("the tables count %q %d times, want %d (once for each count of an event that has it)", w, n, want[w])
		}
	}
	if len(totals) != len(want) {
		t.Errorf("the tables count %d words, want %d", len(totals), len(want))
	}
	if int64(dups) > st.Redelivered {
		t.Errorf("%d events counted again, but the queue delivered only %d again", dups, st.Redelivered)
	}
	if st.InFlight != 0 || st.Visible != 0 {
		t.Errorf("the queue still holds records after the second job: %+v", st)
	}
}

// queueDeliveries returns how many times the queue delivered each event, by its id.
func queueDeliveries(t *testing.T, srv *kinesistest.Server, arn string) map[string]int {
	t.Helper()
	recs, err := srv.QueueRecords(arn)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range recs {
		var e struct{ ID string }
		if err := json.Unmarshal(r.Data, &e); err != nil {
			t.Fatalf("queue record %s: %v", r.RecordID, err)
		}
		out[e.ID] += r.Deliveries
	}
	return out
}
