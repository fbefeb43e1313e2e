package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/transforms/decode"
)

// TestMain runs the pipelines on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	ptest.Main(m)
}

func parse(t *testing.T, args ...string) config {
	t.Helper()
	var cfg config
	fs := flag.NewFlagSet("kinesis-to-files", flag.ContinueOnError)
	cfg.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// deadLetterErrors are the stage and error each malformed embedded record must get.
var deadLetterErrors = map[string][2]string{
	`{"id":"b","ts":2`:            {decode.StageJSON, "decoding JSON object: unexpected end of JSON input"},
	`{"ts":4,"v":"w"}`:            {decode.StageJSON, `required key "id" is missing`},
	`{"id":"e","ts":"yesterday"}`: {decode.StageJSON, "decoding JSON into main.Event: json: cannot unmarshal string into Go struct field Event.ts of type int64"},
	"\xff\xfe not text":           {decode.StageUTF8, "invalid UTF-8 at byte 0 of 11"},
}

// windowName is the name of the file of the one-minute window starting at start.
func windowName(start time.Time, suffix string) string {
	const layout = "20060102T150405.000Z"
	return "part-" + start.UTC().Format(layout) + "-" + start.Add(time.Minute).UTC().Format(layout) + "-00000-of-00001" + suffix
}

// twoMinuteSeed puts the embedded records into two minutes of clock's time: the first
// four, then the others.
func twoMinuteSeed(clock *kinesistest.ManualClock) func(ctx context.Context, srv *kinesistest.Server) error {
	return func(ctx context.Context, srv *kinesistest.Server) error {
		if err := embedded.PutStrings(ctx, srv.Client(), embeddedStream, "1", embeddedRecords[:4]...); err != nil {
			return err
		}
		clock.Advance(time.Minute)
		return embedded.PutStrings(ctx, srv.Client(), embeddedStream, "1", embeddedRecords[4:]...)
	}
}

// wantEventLines are the JSON lines of the good embedded events by window (0 or 1), as
// twoMinuteSeed puts them.
var wantEventLines = [2][]string{
	{`{"id":"a","ts":1,"v":"x"}`, `{"id":"c","ts":3,"v":"z"}`},
	{`{"id":"f","ts":6,"v":null}`, `{"id":"g","ts":7,"v":""}`, `{"id":"h","ts":8,"v":null}`},
}

// wantEventRows are the good embedded events by window as DuckDB shows them (see
// parquetRows): absent and null v are NULL, the empty v is "".
var wantEventRows = [2][]string{
	{`a 1 "x"`, `c 3 "z"`},
	{`f 6 <nil>`, `g 7 ""`, `h 8 <nil>`},
}

// TestStagesEventsAndDeadLettersPerWindow puts the embedded records into two minutes of the
// server's clock and runs the command line in both formats, bounded and streaming: each
// must stage exactly one events file and one dead-letter file per minute, with exactly the
// expected events (read back by DuckDB for Parquet) and lines, and nothing else.
func TestStagesEventsAndDeadLettersPerWindow(t *testing.T) {
	for _, args := range [][]string{
		{"--format=jsonl"},
		{"--format=jsonl", "--bounded=false", "--max_read_time=1s"},
		nil, // parquet
		{"--bounded=false", "--max_read_time=1s"},
	} {
		t.Run(strings.Join(append([]string{"args"}, args...), " "), func(t *testing.T) {
			parquet := !slices.Contains(args, "--format=jsonl")
			if parquet {
				components.PythonT(t)
			}
			t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Minute)
			clock := kinesistest.NewManualClock(t0.Add(5 * time.Second))
			env := environment{serverOptions: []kinesistest.Option{kinesistest.WithClock(clock)}, seed: twoMinuteSeed(clock)}
			dir := t.TempDir()
			j, err := prepare(context.Background(), parse(t, append([]string{"--staging_dir=" + dir}, args...)...), env)
			if err != nil {
				t.Fatal(err)
			}
			defer j.stop()
			p, s := beam.NewPipelineWithRoot()
			j.build(s)
			ptest.RunAndValidate(t, p)

			got := readTree(t, dir)
			want := map[string]string{}
			for path, lines := range expectedDeadLetters(t, j.srv) {
				want["dead-letters/"+windowName(path, ".jsonl")] = lines
			}
			if parquet {
				assertParquetEvents(t, filepath.Join(dir, "events"), map[string][]string{
					windowName(t0, ".parquet"):                  wantEventRows[0],
					windowName(t0.Add(time.Minute), ".parquet"): wantEventRows[1],
				})
				for name := range got {
					if strings.HasPrefix(name, "events/") {
						want[name] = got[name] // checked by DuckDB
					}
				}
			} else {
				want["events/"+windowName(t0, ".jsonl")] = strings.Join(wantEventLines[0], "\n") + "\n"
				want["events/"+windowName(t0.Add(time.Minute), ".jsonl")] = strings.Join(wantEventLines[1], "\n") + "\n"
			}
			if !maps.Equal(got, want) {
				t.Errorf("staging directory holds\n%s\nwant\n%s", dump(got), dump(want))
			}
		})
	}
}

// parquetRows reads the Parquet files matching glob with DuckDB, checks the column types
// are the seed's (id VARCHAR, ts BIGINT, v VARCHAR) and returns each file's rows as
// `id ts "v"` (<nil> for NULL), sorted.
func parquetRows(t *testing.T, glob string) map[string][]string {
	t.Helper()
	tab := components.DuckDBT(t, "SELECT parse_filename(filename) AS file, id, ts, v FROM read_parquet('"+glob+"', filename=true)")
	if want := []string{"file", "id", "ts", "v"}; !slices.Equal(tab.Columns, want) {
		t.Fatalf("DuckDB columns = %v, want %v", tab.Columns, want)
	}
	if want := []string{"VARCHAR", "BIGINT", "VARCHAR"}; !slices.Equal(tab.Types[1:], want) {
		t.Errorf("DuckDB column types of id, ts, v = %v, want %v", tab.Types[1:], want)
	}
	rows := map[string][]string{}
	for _, r := range tab.Rows {
		v := "<nil>"
		if r[3] != nil {
			v = fmt.Sprintf("%q", r[3])
		}
		file := r[0].(string)
		rows[file] = append(rows[file], fmt.Sprintf("%s %s %s", r[1], r[2], v))
	}
	for _, rs := range rows {
		slices.Sort(rs)
	}
	return rows
}

// assertParquetEvents asserts that DuckDB reads exactly want (file name to rows) from the
// Parquet files in dir.
func assertParquetEvents(t *testing.T, dir string, want map[string][]string) {
	t.Helper()
	got := parquetRows(t, dir+"/*.parquet")
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("DuckDB reads %v, want %v", got, want)
	}
}

// expectedDeadLetters returns the dead-letter file content of each window start, built from
// the records the server stored (their shards, sequence numbers and arrival times).
func expectedDeadLetters(t *testing.T, srv *kinesistest.Server) map[time.Time]string {
	t.Helper()
	stored, err := srv.StreamRecords(embeddedStream)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[time.Time][]string{}
	for _, r := range stored {
		e, ok := deadLetterErrors[string(r.Data)]
		if !ok {
			continue
		}
		b, err := json.Marshal(decode.DeadLetter{
			Record: kinesisio.Record{StreamName: embeddedStream, ShardID: r.ShardID, PartitionKey: r.PartitionKey,
				SequenceNumber: r.SequenceNumber, ApproximateArrivalTimestamp: r.ArrivalTime.UTC(), Data: r.Data},
			Stage: e[0], Error: e[1],
		})
		if err != nil {
			t.Fatal(err)
		}
		w := r.ArrivalTime.Truncate(time.Minute)
		lines[w] = append(lines[w], string(b))
	}
	out := map[time.Time]string{}
	for w, ls := range lines {
		slices.Sort(ls)
		out[w] = strings.Join(ls, "\n") + "\n"
	}
	if n := len(lines); n != 2 {
		t.Fatalf("the dead letters span %d windows, want 2", n)
	}
	return out
}

// readTree returns every file under dir (hidden temporary files included) by relative path.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func dump(files map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(files)) {
		b.WriteString(k + ":\n" + files[k])
	}
	return b.String()
}

func TestBadFlagsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--kinesis_endpoint=http://127.0.0.1:1"},
		{"--stream=a", "--shards=0"},
		{"--stream=a", "--window=-1s"},
		{"--stream=a", "--starting_position=soon"},
		{"--stream=a", "--format=csv"},
		{"--stream=a", "--staging_dir=gs://bucket/x"},
		{"--stream=a", "--staging_dir=s3:///x"},
		{"--stream=a", "--s3_endpoint=http://127.0.0.1:1"},
		{"--stream=a", "--staging_dir=s3://b/x", "--aws_credentials_from_env"},
	} {
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		if j, err := prepare(context.Background(), parse(t, args...), environment{}); err == nil {
			j.stop()
			t.Errorf("%q was accepted", args)
		}
	}
}

// TestVetRunnerAcceptsBothModes proves that every function and type of the graph is
// registered, as remote workers need (--runner=vet).
func TestVetRunnerAcceptsBothModes(t *testing.T) {
	for _, args := range [][]string{
		{"--stream=a", "--kinesis_region=eu-west-1", "--staging_dir=/staging"},
		{"--stream=a", "--kinesis_region=eu-west-1", "--staging_dir=/staging", "--bounded", "--strict", "--shards=4", "--format=jsonl"},
		{"--stream=a", "--kinesis_region=eu-west-1", "--staging_dir=s3://lake/staging", "--s3_endpoint=http://127.0.0.1:1"},
	} {
		j, err := prepare(context.Background(), parse(t, args...), environment{})
		if err != nil {
			t.Fatal(err)
		}
		p, s := beam.NewPipelineWithRoot()
		events, dead := j.build(s)
		beam.ParDo0(s, printStaged, events)
		beam.ParDo0(s, printStaged, dead)
		if _, err := beam.Run(context.Background(), "vet", p); err != nil {
			t.Errorf("%q: vet runner: %v", args, err)
		}
	}
}
