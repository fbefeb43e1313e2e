package main

import (
	"context"
	"encoding/json"
	"flag"
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

// TestStagesEventsAndDeadLettersPerWindow puts the embedded records into two minutes of the
// server's clock (the first four, then the other three) and runs the default command line,
// bounded and streaming: both must stage exactly one events file and one dead-letter file
// per minute, with exactly the expected lines, and nothing else.
func TestStagesEventsAndDeadLettersPerWindow(t *testing.T) {
	for _, args := range [][]string{nil, {"--bounded=false", "--max_read_time=1s"}} {
		t.Run(strings.Join(append([]string{"args"}, args...), " "), func(t *testing.T) {
			t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Minute)
			clock := kinesistest.NewManualClock(t0.Add(5 * time.Second))
			env := environment{
				serverOptions: []kinesistest.Option{kinesistest.WithClock(clock)},
				seed: func(ctx context.Context, srv *kinesistest.Server) error {
					if err := embedded.PutStrings(ctx, srv.Client(), embeddedStream, "1", embeddedRecords[:4]...); err != nil {
						return err
					}
					clock.Advance(time.Minute)
					return embedded.PutStrings(ctx, srv.Client(), embeddedStream, "1", embeddedRecords[4:]...)
				},
			}
			dir := t.TempDir()
			j, err := prepare(context.Background(), parse(t, append([]string{"--staging_dir=" + dir}, args...)...), env)
			if err != nil {
				t.Fatal(err)
			}
			defer j.stop()
			p, s := beam.NewPipelineWithRoot()
			j.build(s)
			ptest.RunAndValidate(t, p)

			name := func(start time.Time) string {
				const layout = "20060102T150405.000Z"
				return "part-" + start.UTC().Format(layout) + "-" + start.Add(time.Minute).UTC().Format(layout) + "-00000-of-00001.jsonl"
			}
			want := map[string]string{
				"events/" + name(t0):                  `{"id":"a","ts":1,"v":"x"}` + "\n" + `{"id":"c","ts":3,"v":"z"}` + "\n",
				"events/" + name(t0.Add(time.Minute)): `{"id":"f","ts":6,"v":""}` + "\n",
			}
			for path, lines := range expectedDeadLetters(t, j.srv) {
				want["dead-letters/"+name(path)] = lines
			}
			got := readTree(t, dir)
			if !maps.Equal(got, want) {
				t.Errorf("staging directory holds\n%s\nwant\n%s", dump(got), dump(want))
			}
		})
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
	} {
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
		{"--stream=a", "--kinesis_region=eu-west-1", "--staging_dir=/staging", "--bounded", "--strict", "--shards=4"},
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
