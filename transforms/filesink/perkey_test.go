package filesink

import (
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/testing/components"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*keyedLine)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*keyedEvent)(nil)).Elem())
	register.Function2x0(emitKeyedLine)
	register.Function2x0(emitKeyedEvent)
	register.Emitter3[beam.EventTime, string, string]()
	register.Emitter3[beam.EventTime, string, event]()
}

// keyedLine is a test input: a line of a key at an event time in milliseconds.
type keyedLine struct {
	AtMillis int64
	Key      string
	Line     string
}

func emitKeyedLine(in keyedLine, emit func(beam.EventTime, string, string)) {
	emit(beam.EventTime(in.AtMillis), in.Key, in.Line)
}

// keyedEvent is a test input: an event of a key at an event time in milliseconds.
type keyedEvent struct {
	AtMillis int64
	Key      string
	Event    event
}

func emitKeyedEvent(in keyedEvent, emit func(beam.EventTime, string, event)) {
	emit(beam.EventTime(in.AtMillis), in.Key, in.Event)
}

// stagePerKey writes in with WritePerKey in one-minute windows to a new directory and
// returns the directory's files.
func stagePerKey(t *testing.T, in []keyedLine, wantPaths ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	lines := beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, emitKeyedLine, beam.CreateList(s, in)))
	paths := WritePerKey(s, lines, Config{Dir: dir})
	var want []any
	for _, p := range wantPaths {
		want = append(want, filepath.Join(dir, p))
	}
	passert.Equals(s, global(s, paths), want...)
	ptest.RunAndValidate(t, p)
	return dirContents(t, dir)
}

// TestWritePerKeyStagesEachKeyOfAWindowApart stages the lines of two Kinesis-like shard
// keys and a key that needs escaping: each key of each window gets a file of its own, with
// its lines sorted, and a key's files come out byte for byte the same when the other keys'
// lines are left out, which a restart that re-reads one shard relies on.
func TestWritePerKeyStagesEachKeyOfAWindowApart(t *testing.T) {
	const s0, s1, odd = "shardId-000000000000", "shardId-000000000001", "a/b c%"
	in := []keyedLine{
		{base + 5_000, s0, `{"id":"b"}`},
		{base + 1_000, s0, `{"id":"a"}`},
		{base + 2_000, s1, `{"id":"c"}`},
		{base + 61_000, s1, `{"id":"d"}`},
		{base + 3_000, odd, `{"id":"e"}`},
	}
	w0 := "part-20261130T140000.000Z-20261130T140100.000Z-"
	w1 := "part-20261130T140100.000Z-20261130T140200.000Z-"
	want := map[string]string{
		w0 + s0 + "-00000-of-00001.jsonl":        `{"id":"a"}` + "\n" + `{"id":"b"}` + "\n",
		w0 + s1 + "-00000-of-00001.jsonl":        `{"id":"c"}` + "\n",
		w1 + s1 + "-00000-of-00001.jsonl":        `{"id":"d"}` + "\n",
		w0 + "a%2Fb%20c%25-00000-of-00001.jsonl": `{"id":"e"}` + "\n",
	}
	got := stagePerKey(t, in, slices.Collect(maps.Keys(want))...)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("staging directory holds:\n%s\nwant:\n%s", formatFiles(got), formatFiles(want))
	}

	var s0Only []keyedLine
	for _, l := range in {
		if l.Key == s0 {
			s0Only = append(s0Only, l)
		}
	}
	name := w0 + s0 + "-00000-of-00001.jsonl"
	if again := stagePerKey(t, s0Only, name); again[name] != want[name] || len(again) != 1 {
		t.Errorf("staging %s's lines alone gives:\n%s\nwant %s as before:\n%q", s0, formatFiles(again), name, want[name])
	}
}

// TestPartNameEscapesEveryByteOutsideTheSafeSet checks distinct keys give distinct names.
func TestPartNameEscapesEveryByteOutsideTheSafeSet(t *testing.T) {
	for key, want := range map[string]string{
		"shardId-000000000007": "shardId-000000000007-00002-of-00004",
		"a%2F":                 "a%252F-00002-of-00004",
		"a/":                   "a%2F-00002-of-00004",
		"é":                    "%C3%A9-00002-of-00004",
		"":                     "-00002-of-00004",
	} {
		if got := partName(key, 2, 4); got != want {
			t.Errorf("partName(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestWriteParquetPerKeyFilesReadByDuckDB stages the events of two shard keys as Parquet:
// DuckDB must read each key's events, and only them, from its window's file of that key.
func TestWriteParquetPerKeyFilesReadByDuckDB(t *testing.T) {
	components.PythonT(t)
	const s0, s1 = "shardId-000000000000", "shardId-000000000001"
	var in []keyedEvent
	var want []string
	for i, te := range parquetInput {
		key := []string{s0, s1}[i%2]
		in = append(in, keyedEvent{te.AtMillis, key, te.Event})
		start := time.UnixMilli(te.AtMillis).UTC().Truncate(time.Minute)
		file := "part-" + start.Format(timeLayout) + "-" + start.Add(time.Minute).Format(timeLayout) + "-" + key + "-00000-of-00001.parquet"
		var v any
		if te.Event.V != nil {
			v = *te.Event.V
		}
		want = append(want, duckRow{file, te.Event.ID, fmt.Sprint(te.Event.TS), v}.String())
	}
	slices.Sort(want)
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	events := beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, emitKeyedEvent, beam.CreateList(s, in)))
	WriteParquetPerKey(s, events, ParquetConfig{Config: Config{Dir: dir}})
	ptest.RunAndValidate(t, p)

	types, rows := readParquetWithDuckDB(t, dir+"/*.parquet")
	if !slices.Equal(types, wantParquetTypes) {
		t.Errorf("DuckDB column types = %v, want %v (the key is not a column)", types, wantParquetTypes)
	}
	if !slices.Equal(rows, want) {
		t.Errorf("DuckDB reads\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
