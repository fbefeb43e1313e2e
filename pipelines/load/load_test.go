package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/clitest"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestMain runs the pipelines on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	code := ptest.MainRet(m)
	clitest.Cleanup() // the command firstminute_test.go built
	os.Exit(code)
}

func parse(t *testing.T, args ...string) config {
	t.Helper()
	var cfg config
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	cfg.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runLoad runs a command line against the embedded server and returns the job (for its
// server) and how long the run took from the load's start.
func runLoad(t *testing.T, args ...string) (job, time.Duration) {
	t.Helper()
	j, err := prepare(parse(t, args...), environment{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.stop)
	if j.srv == nil {
		t.Fatalf("%q did not start the embedded server", args)
	}
	if err := j.warmUp(t.Context(), t.Logf); err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	// The sequence's clock has millisecond precision; starting on a millisecond makes its
	// tick times exact offsets from start.
	start := time.Now().Truncate(time.Millisecond)
	passert.Empty(s, j.build(s, start))
	ptest.RunAndValidate(t, p)
	return j, time.Since(start)
}

// stored returns the embedded stream's user records as "key data" strings, sorted.
func stored(t *testing.T, j job) []string {
	t.Helper()
	return storedOn(t, j.srv, j.stream)
}

// storedOn returns the user records of stream on srv as "key data" strings, sorted.
func storedOn(t *testing.T, srv *kinesistest.Server, stream string) []string {
	t.Helper()
	recs, _, err := embedded.UserRecords(srv, stream)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.PartitionKey+" "+r.Data)
	}
	slices.Sort(got)
	return got
}

func TestWritesExactlyCountRecordsOfSizeUnderRoundRobinKeys(t *testing.T) {
	const count, size, keys = 2500, 24, 7
	j, _ := runLoad(t, fmt.Sprint("--count=", count), fmt.Sprint("--size=", size), fmt.Sprint("--keys=", keys))
	want := textRecords(t, count, size, keys)
	if got := stored(t, j); !slices.Equal(got, want) {
		t.Errorf("stream holds %d records, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

// TestRateSpreadsTheRecordsOverTime writes 30 records at 100 a second, 10 every 100ms:
// the run cannot end before the third tick, 200ms after the start, and every record is
// written once, under a random key.
func TestRateSpreadsTheRecordsOverTime(t *testing.T) {
	j, elapsed := runLoad(t, "--count=30", "--rate=100", "--size=12", "--keys=0", "--aggregation=false")
	if elapsed < 200*time.Millisecond {
		t.Errorf("30 records at 100/s took %v, want at least 200ms", elapsed)
	}
	recs, kinesisRecords, err := embedded.UserRecords(j.srv, j.stream)
	if err != nil {
		t.Fatal(err)
	}
	var data, want []string
	for _, r := range recs {
		data = append(data, r.Data)
		if _, err := strconv.ParseUint(r.PartitionKey, 10, 64); err != nil {
			t.Errorf("record %q has key %q, want a random decimal", r.Data, r.PartitionKey)
		}
	}
	for i := 0; i < 30; i++ {
		want = append(want, pad(fmt.Sprintf("record %d ", i), 12))
	}
	slices.Sort(data)
	slices.Sort(want)
	if !slices.Equal(data, want) {
		t.Errorf("stream holds %q, want %q", data, want)
	}
	if kinesisRecords != 30 {
		t.Errorf("without aggregation 30 records took %d Kinesis records", kinesisRecords)
	}
}

func TestJSONFormatWritesEventsOfTheGivenSize(t *testing.T) {
	j, _ := runLoad(t, "--count=5", "--size=60", "--keys=1", "--format=json")
	recs, _, err := embedded.UserRecords(j.srv, j.stream)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		var e struct {
			ID string `json:"id"`
			TS int64  `json:"ts"`
			V  string `json:"v"`
		}
		if err := json.Unmarshal([]byte(r.Data), &e); err != nil {
			t.Errorf("record %q is not an event: %v", r.Data, err)
		}
		if len(r.Data) != 60 || r.PartitionKey != "key-0" || e.TS == 0 {
			t.Errorf("record %q (%d bytes, key %q): want 60 bytes, key key-0 and a timestamp", r.Data, len(r.Data), r.PartitionKey)
		}
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	if want := []string{"0", "1", "2", "3", "4"}; !slices.Equal(ids, want) {
		t.Errorf("ids %q, want %q", ids, want)
	}
}

func TestBadFlagsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--count=0"},
		{"--rate=-1"},
		{"--size=0"},
		{"--keys=-1"},
		{"--format=xml"},
		{"--kinesis_endpoint=http://127.0.0.1:1"},
		{"--warm_throughput_mibps=-1"},
		{"--warm_throughput_mibps=10", "--warm_throughput_timeout=0s"},
	} {
		if j, err := prepare(parse(t, args...), environment{}); err == nil {
			j.stop()
			t.Errorf("%q was accepted", args)
		}
	}
}

// TestVetRunnerAcceptsBothModes proves that every function and type of the graph is
// registered, as remote workers need (--runner=vet).
func TestVetRunnerAcceptsBothModes(t *testing.T) {
	for _, args := range [][]string{
		{"--stream=a", "--kinesis_region=eu-west-1"},
		{"--stream=a", "--kinesis_region=eu-west-1", "--rate=1000", "--count=0"},
	} {
		j, err := prepare(parse(t, args...), environment{})
		if err != nil {
			t.Fatal(err)
		}
		p, s := beam.NewPipelineWithRoot()
		j.build(s, time.Now())
		if _, err := beam.Run(t.Context(), "vet", p); err != nil {
			t.Errorf("%q: vet runner: %v", args, err)
		}
	}
}

// textRecords is what a text load of count records of size bytes under keys keys writes,
// as "key data" strings, sorted.
func textRecords(t *testing.T, count, size, keys int) []string {
	t.Helper()
	var want []string
	for i := 0; i < count; i++ {
		data := pad(fmt.Sprintf("record %d ", i), size)
		if len(data) != size {
			t.Fatalf("record %d is %d bytes", i, len(data))
		}
		want = append(want, fmt.Sprintf("key-%d %s", i%keys, data))
	}
	slices.Sort(want)
	return want
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
