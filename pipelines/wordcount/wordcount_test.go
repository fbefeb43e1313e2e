package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/clitest"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/prismtest"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestMain runs the pipelines on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	code := ptest.MainRet(m)
	clitest.Cleanup() // the command firstminute_test.go built
	os.Exit(code)
}

// parse reads a wordcount command line.
func parse(t *testing.T, args ...string) config {
	t.Helper()
	var cfg config
	fs := flag.NewFlagSet("wordcount", flag.ContinueOnError)
	cfg.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// defaultTablePath holds what `go run ./pipelines/wordcount` prints: the seed's five words
// and the sample text, counted. testing/flink expects the same table from a Flink run.
const defaultTablePath = "testdata/embedded-table.txt"

// defaultPipeline builds the pipeline of a command line without flags, with its tables
// asserted to be exactly the table in defaultTablePath.
func defaultPipeline(t *testing.T) *beam.Pipeline {
	t.Helper()
	j, err := prepare(context.Background(), parse(t), environment{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.stop)
	if !j.in.Bounded || j.in.Stream != embeddedStream {
		t.Fatalf("no flags resolved to stream %q bounded=%v, want the embedded %q, bounded", j.in.Stream, j.in.Bounded, embeddedStream)
	}
	p, s := beam.NewPipelineWithRoot()
	passert.Equals(s, j.build(s), readTable(t, defaultTablePath))
	return p
}

func TestNoFlagsCountsTheSeedWordsAndSampleTextOfTheEmbeddedServer(t *testing.T) {
	ptest.RunAndValidate(t, defaultPipeline(t))
}

// TestStreamingPrintsEachWindowsTable reads the embedded stream unbounded, in one-minute
// windows of arrival time. The server's clock puts the seed's words in one minute and two
// more records in the next, so each window's table is known exactly.
func TestStreamingPrintsEachWindowsTable(t *testing.T) {
	t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Minute)
	clock := kinesistest.NewManualClock(t0.Add(5 * time.Second))
	env := environment{
		serverOptions: []kinesistest.Option{kinesistest.WithClock(clock)},
		seed: func(ctx context.Context, srv *kinesistest.Server) error {
			if err := embedded.PutStrings(ctx, srv.Client(), embeddedStream, "1", embedded.SeedWords...); err != nil {
				return err
			}
			clock.Advance(time.Minute)
			return embedded.PutStrings(ctx, srv.Client(), embeddedStream, "2", "Kinesis for Beam", "Kinesis for Go")
		},
	}
	j, err := prepare(context.Background(), parse(t, "--bounded=false", "--window=1m", "--max_read_time=1s"), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.stop()
	if j.in.Bounded {
		t.Fatal("--bounded=false resolved to a bounded read")
	}
	title := func(start time.Time) string {
		return fmt.Sprintf("Window: %s to %s\n", start.UTC().Format(time.RFC3339Nano), start.Add(time.Minute).UTC().Format(time.RFC3339Nano))
	}
	want := []string{
		title(t0) + `+---------+-----+
|     word|count|
+---------+-----+
|   Apache|    1|
|Connector|    1|
|  Kinesis|    1|
|    Spark|    1|
|      for|    1|
+---------+-----+
`,
		title(t0.Add(time.Minute)) + `+-------+-----+
|   word|count|
+-------+-----+
|Kinesis|    2|
|    for|    2|
|   Beam|    1|
|     Go|    1|
+-------+-----+
`,
	}
	p, s := beam.NewPipelineWithRoot()
	// passert compares in the global window; the tables' windows are in their titles.
	tables := beam.WindowInto(s, window.NewGlobalWindows(), j.build(s))
	passert.Equals(s, tables, want[0], want[1])
	ptest.RunAndValidate(t, p)
}

func TestFlagsResolveARealStream(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		wantBounded bool
		wantOpts    int // client options + starting position (+ max read time) (+ the startup timeout of a streaming read)
	}{
		{[]string{"--stream=orders", "--kinesis_region=eu-west-1"}, false, 3},
		{[]string{"--stream=orders", "--kinesis_region=eu-west-1", "--bounded"}, true, 2},
		{[]string{"--stream=orders", "--kinesis_endpoint=http://127.0.0.1:4567", "--kinesis_region=us-east-1", "--aws_profile=dev",
			"--role_arn=arn:aws:iam::123456789012:role/reader", "--starting_position=AT_TIMESTAMP 2026-11-30T00:00:00Z", "--max_read_time=1m"}, false, 7},
	} {
		j, err := prepare(context.Background(), parse(t, tc.args...), environment{})
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		j.stop()
		if j.srv != nil {
			t.Errorf("%q started the embedded server", tc.args)
		}
		if j.in.Stream != "orders" || j.in.Bounded != tc.wantBounded || len(j.in.ReadOpts) != tc.wantOpts {
			t.Errorf("%q: stream %q bounded=%v with %d options, want orders bounded=%v with %d", tc.args, j.in.Stream, j.in.Bounded, len(j.in.ReadOpts), tc.wantBounded, tc.wantOpts)
		}
	}
}

func TestBadFlagsAreRefusedBeforeAnythingStarts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kinesis_endpoint=http://127.0.0.1:4567"}, "--kinesis_endpoint needs --stream"},
		{[]string{"--stream=orders", "--starting_position=yesterday"}, "--starting_position: starting position \"yesterday\""},
		{[]string{"--stream=orders", "--window=0s"}, "--window=0s"},
	} {
		j, err := prepare(context.Background(), parse(t, tc.args...), environment{})
		j.stop()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestVetRunnerAcceptsBothModes proves that every function and type of the graph is
// registered, as remote workers need (--runner=vet).
func TestVetRunnerAcceptsBothModes(t *testing.T) {
	for _, args := range [][]string{
		{"--stream=orders", "--kinesis_region=eu-west-1", "--bounded"},
		{"--stream=orders", "--kinesis_region=eu-west-1"},
	} {
		j, err := prepare(context.Background(), parse(t, args...), environment{})
		if err != nil {
			t.Fatal(err)
		}
		p, s := beam.NewPipelineWithRoot()
		j.buildPrinted(s)
		if _, err := beam.Run(context.Background(), "vet", p); err != nil {
			t.Errorf("%q: vet runner: %v", args, err)
		}
	}
}

// TestJobServerRunsTheDefaultJob submits the no-flags job to a separately started Prism job
// server, as `go run github.com/apache/beam/sdks/v2/go/cmd/prism` starts one, with
// --runner=universal --endpoint=localhost:PORT --environment_type=LOOPBACK: the portable
// submission path Flink's job server also takes.
func TestJobServerRunsTheDefaultJob(t *testing.T) {
	prismtest.UseJobServer(t)
	ctx := context.Background()
	if _, err := beam.Run(ctx, "universal", defaultPipeline(t)); err != nil {
		t.Fatalf("job on the Prism job server: %v", err)
	}
}

// readTable returns the expected table stored at path.
func readTable(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the expected table: %v", err)
	}
	return string(b)
}

// TestEmbeddedQueueCountsTheSameTable reads the embedded stream through a queue
// (--queue=embedded) on Prism: the table is the shard read's, every record is acknowledged
// once and none is left in flight or redelivered.
func TestEmbeddedQueueCountsTheSameTable(t *testing.T) {
	j, err := prepare(context.Background(), parse(t, "--queue=embedded"), environment{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.stop()
	if !j.in.Bounded || j.in.Stream != "" || !strings.Contains(j.in.Queue, ":queue/") {
		t.Fatalf("--queue=embedded resolved to stream %q queue %q bounded=%v, want the embedded queue, bounded", j.in.Stream, j.in.Queue, j.in.Bounded)
	}
	p, s := beam.NewPipelineWithRoot()
	passert.Equals(s, j.build(s), readTable(t, defaultTablePath))
	ptest.RunAndValidate(t, p)
	st, err := j.srv.QueueStats(j.in.Queue)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(len(embedded.SeedWords) + len(sampleText))
	if st.Ingested != want || st.Acked != want || st.InFlight != 0 || st.Visible != 0 || st.Redelivered != 0 {
		t.Fatalf("the queue after the count: %+v; want %d records ingested and acknowledged, none left", st, want)
	}
}
