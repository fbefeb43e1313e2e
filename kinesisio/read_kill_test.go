package kinesisio

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/childjob"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.DoFn1x1[Record, error](&appendFn{})
}

// appendFn appends the canonical form of each record, one line per write, to the file
// Path: what a job read survives the job's process being killed.
type appendFn struct {
	Path string

	mu sync.Mutex
	f  *os.File
}

func (fn *appendFn) ProcessElement(r Record) error {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	if fn.f == nil {
		f, err := os.OpenFile(fn.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		fn.f = f
	}
	_, err := fn.f.WriteString(canonicalRecord(r) + "\n")
	return err
}

// killedJobEnv names the environment of TestKilledJobChild, the job the restart test kills.
const killedJobEnv = "BEAMKINESIS_KILLED_JOB"

// TestKilledJobChild is the first job of TestReadResumesAfterTheJobWasKilled, run in a
// child process of the test binary so that it can be killed (SIGKILL, no drain): a
// streaming read of the table that never ends on its own. A normal run skips it.
func TestKilledJobChild(t *testing.T) {
	args := childjob.Args(t, killedJobEnv)
	if len(args) != 5 {
		t.Fatalf("%s=%q: want the Kinesis URL, the DynamoDB URL, the stream, the table and the output file", killedJobEnv, args)
	}
	kinesisURL, dyn, stream, table, out := args[0], args[1], args[2], args[3], args[4]
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream,
		WithEndpoint(kinesisURL), WithRegion("us-east-1"), WithStaticCredentials("test", "test"),
		WithStartingPosition(TrimHorizon()),
		WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn), WithCheckpointLeaseDuration(time.Second),
		WithDescribeShardInterval(100*time.Millisecond), WithPollInterval(50*time.Millisecond),
		WithMaxFetchTime(200*time.Millisecond), WithMaxRecordsPerFetch(7))
	beam.ParDo0(s, &appendFn{Path: out}, recs)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// The abrupt-kill restart test: a streaming job on the table is killed (SIGKILL) while
// records are being written; a new job on the same table, after the dead owner's leases
// expire, resumes from what the killed job committed. Every record is read at least once,
// none is skipped, each job reads none twice, and the second job does not start again from
// the beginning. The duplicates are the records the killed job read after its last commit.
func TestReadResumesAfterTheJobWasKilled(t *testing.T) {
	const stream, table = "killed", "positions"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	dyn := startDynalite(t)
	client := srv.Client()
	aggs := map[string][]kpl.UserRecord{}
	var aggsMu sync.Mutex
	write := func(prefix string) {
		w := newWorkload(t, prefix, 30, 4, 5)
		aggsMu.Lock()
		for k, v := range w.aggregates {
			aggs[k] = v
		}
		aggsMu.Unlock()
		putAll(t, client, stream, w.entries)
	}
	write("before")

	dir := t.TempDir()
	out := filepath.Join(dir, "job1.txt")
	child := childjob.Start(t, "TestKilledJobChild", killedJobEnv, fmt.Sprintf("%s %s %s %s %s", srv.URL(), dyn, stream, table, out))

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 200; i++ {
			write(fmt.Sprintf("during%d", i))
			time.Sleep(100 * time.Millisecond)
		}
	}()
	tab := leasetable.New(emulatorsDynamoDB(dyn), table)
	committed := func() bool {
		for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
			l, ok, err := tab.Get(context.Background(), id)
			if err != nil || !ok || !leasetable.IsSequence(l.Checkpoint) {
				return false
			}
		}
		return true
	}
	child.Await(t, 60*time.Second, "commit and read 300 records", func() bool {
		return committed() && len(readLines(t, out)) >= 300
	})
	// Mid-stream, between commits: the job is reading and writing positions.
	time.Sleep(700 * time.Millisecond)
	child.Kill(t)
	stop.Store(true)
	wg.Wait()
	write("after")
	got1 := readLines(t, out)

	p2, s2 := beam.NewPipelineWithRoot()
	second := collect(s2, t.Name()+"/2", Read(s2, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(5*time.Second),
		WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn), WithCheckpointLeaseDuration(time.Second),
		WithDescribeShardInterval(100*time.Millisecond), WithPollInterval(50*time.Millisecond),
		WithMaxFetchTime(200*time.Millisecond), WithMaxRecordsPerFetch(7))...))
	if err := ptest.Run(p2); err != nil {
		t.Fatal(err)
	}
	got2 := second.get()

	all := expected(t, srv, stream, aggs, nil)
	inStream := countsOf(all)
	for i, got := range [][]string{got1, got2} {
		for r, n := range countsOf(got) {
			switch {
			case inStream[r] == 0:
				t.Errorf("job %d read %s, which is not in the stream", i+1, r)
			case n > 1:
				t.Errorf("job %d read %d× %s; a job reads each record once", i+1, n, r)
			}
		}
	}
	union := countsOf(got1)
	for r := range countsOf(got2) {
		union[r]++
	}
	var missing int
	for _, r := range all {
		if union[r] == 0 {
			if missing++; missing <= 5 {
				t.Errorf("no job read %s", r)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d records read by neither job (killed job %d, second job %d)", missing, len(all), len(got1), len(got2))
	}
	if len(got2) >= len(all) {
		t.Fatalf("job 2 read %d of %d records: it started again from the beginning", len(got2), len(all))
	}
	dups := len(got1) + len(got2) - len(all)
	t.Logf("stream %d records; killed job read %d, job 2 read %d; %d read by both (duplicates across the kill)", len(all), len(got1), len(got2), dups)
}

// readLines returns the complete lines of the file at path (none if it does not exist).
func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return lines // a last line without its newline was cut by the kill
		}
		lines = append(lines, strings.TrimSuffix(line, "\n"))
	}
}
