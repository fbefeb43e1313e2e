package kinesisio

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
	"github.com/beamkinesis/beamkinesis/testing/childjob"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x2(keyedByNothing)
	register.DoFn3x2[beam.Window, string, func(*string) bool, string, error](&windowFileFn{})
}

func keyedByNothing(r Record) (string, string) { return "", canonicalRecord(r) }

// windowFileFn is a windowed sink: it appends a window's records, all at once and synced,
// to the file Path, one "<window end> <record>" line each, and outputs the window's end.
// What it wrote survives the job's process being killed; what sat in an open window did
// not reach it.
type windowFileFn struct {
	Path string

	mu sync.Mutex
}

func (fn *windowFileFn) ProcessElement(w beam.Window, _ string, iter func(*string) bool) (string, error) {
	end := w.MaxTimestamp().ToTime().UnixMilli()
	var b strings.Builder
	var rec string
	for iter(&rec) {
		fmt.Fprintf(&b, "%d %s\n", end, rec)
	}
	fn.mu.Lock()
	defer fn.mu.Unlock()
	f, err := os.OpenFile(fn.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return "", fmt.Errorf("opening the window file: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		return "", fmt.Errorf("writing window %d: %w", end, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("syncing window %d: %w", end, err)
	}
	return fmt.Sprint(end), nil
}

// windowedJob is the windowed pipeline of the kill tests: a read of stream, fixed windows
// of size, all of a window's records grouped, then written to path by windowFileFn.
func windowedJob(s beam.Scope, stream string, size time.Duration, path string, opts ...ReadOption) {
	var commit Commit
	recs := Read(s, stream, append(opts, WithCommitAfterSinks(&commit))...)
	windowed := beam.WindowInto(s, window.NewFixedWindows(size), recs)
	grouped := beam.GroupByKey(s, beam.ParDo(s, keyedByNothing, windowed))
	commit.After(s, beam.ParDo(s, &windowFileFn{Path: path}, grouped))
}

// windowedKilledJobEnv names the environment of TestWindowedKilledJobChild.
const windowedKilledJobEnv = "BEAMKINESIS_WINDOWED_KILLED_JOB"

// heldTestWindow is the window of the windowed kill test: long enough that a kill lands
// inside one, short enough for a quick test.
const heldTestWindow = 2 * time.Second

// heldTestOptions are the read options both jobs of the windowed kill test share.
func heldTestOptions(kinesisURL, dyn, table string) []ReadOption {
	return []ReadOption{
		WithEndpoint(kinesisURL), WithRegion("us-east-1"), WithStaticCredentials("test", "test"),
		WithStartingPosition(TrimHorizon()),
		WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn), WithCheckpointLeaseDuration(time.Second),
		WithDescribeShardInterval(100 * time.Millisecond), WithPollInterval(50 * time.Millisecond),
		WithMaxFetchTime(200 * time.Millisecond), WithMaxRecordsPerFetch(7),
	}
}

// TestWindowedKilledJobChild is the first job of TestWindowedJobLosesNothingWhenKilled,
// run in a child process of the test binary so that it can be killed mid-window. It does
// nothing in a normal run.
func TestWindowedKilledJobChild(t *testing.T) {
	args := childjob.Args(t, windowedKilledJobEnv)
	if len(args) != 5 && len(args) != 6 {
		t.Fatalf("%s=%q: want the Kinesis URL, the DynamoDB URL, the stream, the table, the output file and, for enhanced fan-out, the consumer", windowedKilledJobEnv, args)
	}
	kinesisURL, dyn, stream, table, out := args[0], args[1], args[2], args[3], args[4]
	consumer := ""
	if len(args) == 6 {
		consumer = args[5]
	}
	p, s := beam.NewPipelineWithRoot()
	windowedJob(s, stream, heldTestWindow, out, append(heldTestOptions(kinesisURL, dyn, table), readMode(consumer)...)...)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// windowFileRecords returns the records of the window file at path, one per line written.
func windowFileRecords(t *testing.T, path string) []string {
	t.Helper()
	var recs []string
	for _, line := range readLines(t, path) {
		_, rec, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("window file %s has a line without a window: %q", path, line)
		}
		recs = append(recs, rec)
	}
	return recs
}

// readMode is the read's option for consumer: none for "polling", enhanced fan-out with
// that consumer name otherwise.
func readMode(consumer string) []ReadOption {
	if consumer == "polling" {
		return nil
	}
	return []ReadOption{WithEnhancedFanOut(consumer)}
}

// TestWindowedJobLosesNothingWhenKilled is the kill test of a pipeline that keeps records
// in runner state before its sink: a streaming read of a checkpoint table into 2 s windows,
// each written by a sink once it fires. The job is killed (SIGKILL, no drain) inside a
// window while records arrive; a second job on the same table must write every record the
// first one had not: together they write each record at least once. The duplicates are the
// records of the windows the first job wrote after its last commit.
//
// The stream has two shards, each its own bundle on Prism, whose watermarks the read
// shares (watermark_floor.go) so that neither window drops the other's records as late.
//
// It runs with polling and with enhanced fan-out, each on a table of its own.
func TestWindowedJobLosesNothingWhenKilled(t *testing.T) {
	for _, consumer := range []string{"polling", "held-efo"} {
		t.Run(consumer, func(t *testing.T) { testWindowedJobKilled(t, consumer) })
	}
}

func testWindowedJobKilled(t *testing.T, consumer string) {
	stream, table := "held", "held-positions-"+consumer
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	dyn := startDynalite(t)
	client := srv.Client()
	var n atomic.Int64
	write := func(prefix string) {
		w := newWorkload(t, fmt.Sprintf("%s%d", prefix, n.Add(1)), 6, 0, 0)
		putAll(t, client, stream, w.entries)
	}
	write("before")

	dir := t.TempDir()
	out1, out2 := filepath.Join(dir, "job1.txt"), filepath.Join(dir, "job2.txt")
	child := childjob.Start(t, "TestWindowedKilledJobChild", windowedKilledJobEnv, fmt.Sprintf("%s %s %s %s %s %s", srv.URL(), dyn, stream, table, out1, consumer))

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 600; i++ {
			write("during")
			time.Sleep(50 * time.Millisecond)
		}
	}()
	tab := leasetable.New(emulatorsDynamoDB(dyn), table)
	committed := func() bool {
		l, ok, err := tab.Get(context.Background(), "shardId-000000000000")
		return err == nil && ok && leasetable.IsSequence(l.Checkpoint)
	}
	// Wait until the job has written two windows and committed positions, then kill it a
	// quarter into a window: records of the open window are read and not written.
	child.Await(t, 90*time.Second, "write two windows and commit", func() bool {
		return committed() && len(slices.Compact(windowEnds(t, out1))) >= 2
	})
	now := time.Now()
	time.Sleep(now.Truncate(heldTestWindow).Add(heldTestWindow + heldTestWindow/4).Sub(now))
	child.Kill(t)
	stop.Store(true)
	wg.Wait()
	write("after")
	got1 := windowFileRecords(t, out1)

	p2, s2 := beam.NewPipelineWithRoot()
	windowedJob(s2, stream, heldTestWindow, out2, append(append(heldTestOptions(srv.URL(), dyn, table), readMode(consumer)...), WithMaxReadTime(4*time.Second))...)
	if err := ptest.Run(p2); err != nil {
		t.Fatal(err)
	}
	got2 := windowFileRecords(t, out2)

	all := expected(t, srv, stream, nil, nil)
	lost, dups := ledger(all, got1, got2)
	t.Logf("stream %d records; the killed job wrote %d, the second job %d: %d lost, %d duplicates", len(all), len(got1), len(got2), len(lost), dups)
	for i, r := range lost {
		if i == 5 {
			break
		}
		t.Errorf("no job wrote %s", r)
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d records written by neither job: the table was ahead of the sink when the first job was killed", len(lost), len(all))
	}
	if len(got2) >= len(all) {
		t.Fatalf("the second job wrote %d of %d records: it started again from the beginning", len(got2), len(all))
	}
}

// windowEnds returns the window of each line of the window file at path.
func windowEnds(t *testing.T, path string) []string {
	t.Helper()
	var ends []string
	for _, line := range readLines(t, path) {
		end, _, _ := strings.Cut(line, " ")
		ends = append(ends, end)
	}
	return ends
}

// ledger compares what the jobs wrote with all, the records of the stream: the records
// none wrote, and how many were written more than once in all.
func ledger(all []string, written ...[]string) (lost []string, dups int) {
	union := map[string]int{}
	for _, w := range written {
		for _, r := range w {
			union[r]++
		}
	}
	for _, r := range all {
		switch n := union[r]; {
		case n == 0:
			lost = append(lost, r)
		case n > 1:
			dups += n - 1
		}
	}
	return lost, dups
}

// TestCommitTokensHoldTheWatermarkAtTheirRecords drives the shard reader of a read with a
// table directly, with emitters that move its watermark estimator as the SDK harness does
// with every output (Beam v2.77.0 exec/emit.go:135), tokens included. Two batches arrive in
// two windows of a held commit's cut: the reader must end a token at each window's last
// record, stamp each with its records' latest arrival time, and leave the watermark at the
// last record's arrival, never at the wall clock of the call (which would make records not
// read yet late).
func TestCommitTokensHoldTheWatermarkAtTheirRecords(t *testing.T) {
	const stream = "tokens"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	dyn := startDynalite(t)
	put := func(prefix string) int64 {
		putAll(t, srv.Client(), stream, newWorkload(t, prefix, 5, 0, 0).entries)
		stored, err := srv.StreamRecords(stream)
		if err != nil {
			t.Fatal(err)
		}
		last := stored[len(stored)-1].ArrivalTime.UnixMilli()
		for time.Now().UnixMilli() <= last { // the next batch arrives in a later millisecond
			time.Sleep(time.Millisecond)
		}
		return last
	}
	arrivalA, arrivalB := put("a"), put("b")

	cfg := buildConfig(targetRead, connect(srv, WithStartingPosition(TrimHorizon()),
		WithCheckpointTable("tokens"), WithCheckpointTableEndpoint(dyn)))
	fn := &readFn{shardFn{Spec: newReadSpec(stream, cfg)}}
	fn.Spec.Cut = windowCut{Kind: cutFixed, SizeMs: arrivalB - arrivalA, PeriodMs: arrivalB - arrivalA}
	ctx := context.Background()
	if err := fn.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	d := shardDescriptor{Stream: stream, ShardID: "shardId-000000000000", StartKind: startTrimHorizon}
	we := newWatermarkEstimator(mtime.MinTimestamp.Milliseconds())
	var recs []Record
	type stamped struct {
		at  int64
		tok commitToken
	}
	var toks []stamped
	emit := func(et beam.EventTime, r Record) {
		we.ObserveTimestamp(et.ToTime())
		recs = append(recs, r)
	}
	emitCommit := func(et beam.EventTime, tok commitToken) {
		we.ObserveTimestamp(et.ToTime())
		toks = append(toks, stamped{et.Milliseconds(), tok})
	}
	rt := fn.CreateTracker(fn.CreateInitialRestriction(d))
	if _, err := fn.ProcessElement(ctx, we, rt, d, emit, emitCommit); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 10 || len(toks) == 0 {
		t.Fatalf("one reader call read %d records and emitted %d tokens, want the 10 put and their tokens", len(recs), len(toks))
	}
	if got := we.stateMs(); got != arrivalB {
		t.Errorf("watermark after the reads = %d, want %d, the last record's arrival (the call ended at %d)", got, arrivalB, toks[len(toks)-1].tok.EndMs)
	}
	var got []string
	for _, s := range toks {
		got = append(got, fmt.Sprintf("%s/%d records=%d max=%d at=%d", s.tok.Seq, s.tok.Sub, s.tok.Records, s.tok.MaxEventMs, s.at))
	}
	want := []string{
		fmt.Sprintf("%s/0 records=5 max=%d at=%d", recs[4].SequenceNumber, arrivalA, arrivalA),
		fmt.Sprintf("%s/0 records=5 max=%d at=%d", recs[9].SequenceNumber, arrivalB, arrivalB),
	}
	if !slices.Equal(got, want) {
		t.Errorf("commit tokens =\n%s\nwant one per window, at its last record and its arrival time:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
