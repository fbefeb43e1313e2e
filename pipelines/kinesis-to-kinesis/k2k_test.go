package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/clitest"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/report"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x1(failureString)
}

// TestMain runs the pipelines on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	code := ptest.MainRet(m)
	clitest.Cleanup() // the command firstminute_test.go built
	os.Exit(code)
}

// failureString renders what a test asserts about a failed message.
func failureString(f kinesisio.FailedMessage) string {
	return f.ErrorCode + " " + f.PartitionKey + " " + string(f.Data)
}

func parse(t *testing.T, args ...string) config {
	t.Helper()
	var cfg config
	fs := flag.NewFlagSet("kinesis-to-kinesis", flag.ContinueOnError)
	cfg.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// start resolves a command line in the embedded mode.
func start(t *testing.T, env environment, args ...string) job {
	t.Helper()
	j, err := prepare(context.Background(), parse(t, args...), env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.stop)
	if j.srv == nil {
		t.Fatalf("%q did not start the embedded server", args)
	}
	return j
}

// output returns the user records of the embedded output stream as "key data" strings,
// sorted, and how many Kinesis records carried them.
func output(t *testing.T, j job) ([]string, int) {
	t.Helper()
	recs, n, err := embedded.UserRecords(j.srv, j.output)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.PartitionKey+" "+r.Data)
	}
	slices.Sort(got)
	return got, n
}

func TestNoFlagsWritesEachValuesCountToTheOutputStreamOnceAggregated(t *testing.T) {
	j := start(t, environment{})
	p, s := beam.NewPipelineWithRoot()
	passert.Empty(s, j.build(s))
	ptest.RunAndValidate(t, p)

	got, kinesisRecords := output(t, j)
	want := []string{
		`Apache {"key":"Apache","count":2}`,
		`Connector {"key":"Connector","count":1}`,
		`Kinesis {"key":"Kinesis","count":3}`,
		`Spark {"key":"Spark","count":1}`,
		`for {"key":"for","count":1}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("output stream holds\n%q\nwant\n%q", got, want)
	}
	// Two shards: at most one aggregate per shard for so few records.
	if kinesisRecords > 2 {
		t.Errorf("%d user records took %d Kinesis records; aggregation should pack them into at most one per shard", len(got), kinesisRecords)
	}
}

func TestStreamingPassthroughWritesEveryRecordOnceUnderRandomKeys(t *testing.T) {
	for _, reshuffle := range []bool{false, true} {
		t.Run(fmt.Sprintf("reshuffle=%t", reshuffle), func(t *testing.T) {
			streamingPassthrough(t, fmt.Sprintf("--reshuffle=%t", reshuffle))
		})
	}
}

func streamingPassthrough(t *testing.T, reshuffle string) {
	j := start(t, environment{}, "--transform=passthrough", "--bounded=false", "--max_read_time=1s", "--aggregation=false", reshuffle)
	if j.in.Bounded {
		t.Fatal("--bounded=false resolved to a bounded read")
	}
	p, s := beam.NewPipelineWithRoot()
	passert.Empty(s, j.build(s))
	ptest.RunAndValidate(t, p)

	recs, kinesisRecords, err := embedded.UserRecords(j.srv, j.output)
	if err != nil {
		t.Fatal(err)
	}
	var data []string
	for _, r := range recs {
		data = append(data, r.Data)
		if _, err := strconv.ParseUint(r.PartitionKey, 10, 64); err != nil {
			t.Errorf("record %q has partition key %q, want a random decimal", r.Data, r.PartitionKey)
		}
	}
	slices.Sort(data)
	want := slices.Sorted(slices.Values(embeddedRecords))
	if !slices.Equal(data, want) {
		t.Errorf("output stream holds %q, want %q", data, want)
	}
	if kinesisRecords != len(want) {
		t.Errorf("without aggregation %d messages took %d Kinesis records, want one each", len(want), kinesisRecords)
	}
}

// TestStreamingCountsEachValuePerWindow reads the embedded input unbounded in one-minute
// windows of arrival time; the server's clock puts three records in one minute and one in
// the next, so the output stream must hold exactly one count per value and window.
func TestStreamingCountsEachValuePerWindow(t *testing.T) {
	t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Minute)
	clock := kinesistest.NewManualClock(t0.Add(5 * time.Second))
	j := start(t, environment{
		serverOptions: []kinesistest.Option{kinesistest.WithClock(clock)},
		seed: func(ctx context.Context, srv *kinesistest.Server) error {
			if err := embedded.PutStrings(ctx, srv.Client(), embeddedInput, "1", "Kinesis", "for", "Kinesis"); err != nil {
				return err
			}
			clock.Advance(time.Minute)
			return embedded.PutStrings(ctx, srv.Client(), embeddedInput, "2", "Kinesis")
		},
	}, "--bounded=false", "--max_read_time=1s", "--window=1m")
	p, s := beam.NewPipelineWithRoot()
	passert.Empty(s, j.build(s))
	ptest.RunAndValidate(t, p)

	w0, w1, w2 := t0.Format(time.RFC3339Nano), t0.Add(time.Minute).Format(time.RFC3339Nano), t0.Add(2*time.Minute).Format(time.RFC3339Nano)
	want := []string{
		`Kinesis {"key":"Kinesis","count":1,"window_start":"` + w1 + `","window_end":"` + w2 + `"}`,
		`Kinesis {"key":"Kinesis","count":2,"window_start":"` + w0 + `","window_end":"` + w1 + `"}`,
		`for {"key":"for","count":1,"window_start":"` + w0 + `","window_end":"` + w1 + `"}`,
	}
	slices.Sort(want)
	if got, _ := output(t, j); !slices.Equal(got, want) {
		t.Errorf("output stream holds\n%q\nwant\n%q", got, want)
	}
}

// TestFailedWritesAreReportedAndCounted makes the server fail every PutRecords entry: each
// count must come out of the failed output with the service's error code, be counted, and
// the output stream must stay empty.
func TestFailedWritesAreReportedAndCounted(t *testing.T) {
	j := start(t, environment{extra: []kinesisio.ClientOption{kinesisio.WithRetries(1, time.Millisecond, time.Millisecond)}})
	j.srv.SetFaults(kinesistest.Faults{Seed: 1, PutEntryInternalFailureRate: 1, Operations: []string{"PutRecords"}})

	p, s := beam.NewPipelineWithRoot()
	passert.Equals(s, beam.ParDo(s, failureString, j.build(s)),
		`InternalFailure Apache {"key":"Apache","count":2}`,
		`InternalFailure Connector {"key":"Connector","count":1}`,
		`InternalFailure Kinesis {"key":"Kinesis","count":3}`,
		`InternalFailure Spark {"key":"Spark","count":1}`,
		`InternalFailure for {"key":"for","count":1}`,
	)
	res := ptest.RunAndValidate(t, p)
	if n := report.FailedCount(res, metricsNamespace); n != 5 {
		t.Errorf("failed_messages counter is %d, want 5", n)
	}
	if got, _ := output(t, j); len(got) != 0 {
		t.Errorf("output stream holds %q, want nothing", got)
	}
}

func TestBadFlagsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--input_stream=a"},
		{"--kinesis_endpoint=http://127.0.0.1:1"},
		{"--input_stream=a", "--output_stream=b", "--transform=sum"},
		{"--input_stream=a", "--output_stream=b", "--starting_position=soon"},
		{"--input_stream=a", "--output_stream=b", "--reshuffle"},
	} {
		if j, err := prepare(context.Background(), parse(t, args...), environment{}); err == nil {
			j.stop()
			t.Errorf("%q was accepted", args)
		}
	}
}

// TestVetRunnerAcceptsEveryMode proves that every function and type of the graph is
// registered, as remote workers need (--runner=vet).
func TestVetRunnerAcceptsEveryMode(t *testing.T) {
	for _, args := range [][]string{
		{"--input_stream=a", "--output_stream=b", "--kinesis_region=eu-west-1"},
		{"--input_stream=a", "--output_stream=b", "--kinesis_region=eu-west-1", "--bounded"},
		{"--input_stream=a", "--output_stream=b", "--kinesis_region=eu-west-1", "--transform=passthrough"},
		{"--input_stream=a", "--output_stream=b", "--kinesis_region=eu-west-1", "--transform=passthrough", "--reshuffle"},
	} {
		j, err := prepare(context.Background(), parse(t, args...), environment{})
		if err != nil {
			t.Fatal(err)
		}
		p, s := beam.NewPipelineWithRoot()
		j.build(s)
		if _, err := beam.Run(context.Background(), "vet", p); err != nil {
			t.Errorf("%q: vet runner: %v", args, err)
		}
	}
}
