package filesink

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/memfs"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*timedLine)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*event)(nil)).Elem())
	register.Function2x0(emitTimed)
	register.Emitter2[beam.EventTime, string]()
}

// TestMain runs the package's pipeline tests on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	ptest.Main(m)
}

// timedLine is a test input: a line at an event time in milliseconds.
type timedLine struct {
	AtMillis int64
	Line     string
}

func emitTimed(in timedLine, emit func(beam.EventTime, string)) {
	emit(beam.EventTime(in.AtMillis), in.Line)
}

// event is the seed's schema {id string, ts int64, v string nullable}: a nil V is null.
type event struct {
	ID string  `json:"id" parquet:"id"`
	TS int64   `json:"ts" parquet:"ts"`
	V  *string `json:"v" parquet:"v,optional"`
}

// str returns a pointer to s, for event.V.
func str(s string) *string { return &s }

// base is 2026-11-30T14:00:00Z, the start of the first test window.
var base = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC).UnixMilli()

// dirContents returns every entry of dir, hidden ones included, with its content.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading staging directory: %v", err)
	}
	got := make(map[string]string)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("reading %s: %v", e.Name(), err)
		}
		got[e.Name()] = string(b)
	}
	return got
}

func assertDir(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := dirContents(t, dir)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("staging directory holds:\n%s\nwant:\n%s", formatFiles(got), formatFiles(want))
	}
}

func formatFiles(files map[string]string) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&b, "  %s: %q\n", name, files[name])
	}
	return b.String()
}

// global re-windows col into the global window, which passert needs to compare it with
// its expected values.
func global(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.WindowInto(s, window.NewGlobalWindows(), col)
}

func TestWriteStagesOneFilePerFixedWindowWithExactContents(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s,
		timedLine{base + 5_000, `{"id":"b","ts":5}`},
		timedLine{base + 1_000, `{"id":"a","ts":1}`},
		timedLine{base + 59_999, `{"id":"c","ts":59}`},
		timedLine{base + 60_000, `{"id":"d","ts":60}`},
		timedLine{base + 60_000, `{"id":"d","ts":60}`}, // duplicates are the caller's business (see dedup)
		timedLine{base + 180_000, `{"id":"e","ts":180}`},
	)
	lines := beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, emitTimed, in))
	paths := Write(s, lines, Config{Dir: dir})

	w0 := "part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001.jsonl"
	w1 := "part-20261130T140100.000Z-20261130T140200.000Z-00000-of-00001.jsonl"
	w3 := "part-20261130T140300.000Z-20261130T140400.000Z-00000-of-00001.jsonl"
	passert.Equals(s, global(s, paths), filepath.Join(dir, w0), filepath.Join(dir, w1), filepath.Join(dir, w3))
	ptest.RunAndValidate(t, p)

	assertDir(t, dir, map[string]string{
		w0: `{"id":"a","ts":1}` + "\n" + `{"id":"b","ts":5}` + "\n" + `{"id":"c","ts":59}` + "\n",
		w1: `{"id":"d","ts":60}` + "\n" + `{"id":"d","ts":60}` + "\n",
		w3: `{"id":"e","ts":180}` + "\n",
	})
}

func TestWriteSpreadsAWindowOverShardsByLineContent(t *testing.T) {
	dir := t.TempDir()
	var inputs []timedLine
	var all []string
	for i := range 20 {
		l := fmt.Sprintf(`{"id":"%02d"}`, i)
		inputs = append(inputs, timedLine{base + int64(i)*1000, l})
		all = append(all, l)
	}
	p, s := beam.NewPipelineWithRoot()
	lines := beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, emitTimed, beam.CreateList(s, inputs)))
	Write(s, lines, Config{Dir: dir, Prefix: "events", Suffix: ".json", Shards: 3})
	ptest.RunAndValidate(t, p)

	// The shard of a line is FNV-1a of its bytes modulo Shards, so the expected files are
	// known in advance; a retried upstream bundle sends every line to the same file.
	want := make(map[string]string)
	for _, l := range all { // all is sorted, as lines within a file are
		h := fnv.New32a()
		h.Write([]byte(l))
		name := fmt.Sprintf("events-20261130T140000.000Z-20261130T140100.000Z-%05d-of-00003.json", h.Sum32()%3)
		want[name] += l + "\n"
	}
	if len(want) != 3 {
		t.Fatalf("test lines cover %d of 3 shards; pick other lines", len(want))
	}
	assertDir(t, dir, want)
}

func TestWriteNamesTheGlobalWindowOfABoundedInput(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	Write(s, beam.Create(s, "y", "x"), Config{Dir: filepath.Join(dir, "created", "on", "demand")})
	ptest.RunAndValidate(t, p)
	assertDir(t, filepath.Join(dir, "created", "on", "demand"), map[string]string{
		"part-global-00000-of-00001.jsonl": "x\ny\n",
	})
}

func TestWriteStreamingFixedWindowsWithALatePane(t *testing.T) {
	// An unbounded input (TestStream): each window is written when the watermark passes
	// its end; a late element within the allowed lateness produces a second pane, written
	// to its own file so the first pane's file is never rewritten with other content.
	cfg := teststream.NewConfig()
	steps := []error{
		cfg.AddElements(base+1_000, "a1", "a2"),
		cfg.AddElements(base+61_000, "b1"),
		cfg.AdvanceWatermark(base + 60_000), // closes [14:00, 14:01)
		cfg.AddElements(base+2_000, "a3-late"),
		cfg.AdvanceWatermark(base + 120_000), // closes [14:01, 14:02)
		cfg.AdvanceWatermarkToInfinity(),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("test stream step %d: %v", i, err)
		}
	}
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	lines := beam.WindowInto(s, window.NewFixedWindows(time.Minute), teststream.Create(s, cfg),
		beam.AllowedLateness(time.Hour))
	paths := Write(s, lines, Config{Dir: dir})

	w0 := "part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001.jsonl"
	w0late := "part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001-pane-1.jsonl"
	w1 := "part-20261130T140100.000Z-20261130T140200.000Z-00000-of-00001.jsonl"
	passert.Equals(s, global(s, paths), filepath.Join(dir, w0), filepath.Join(dir, w0late), filepath.Join(dir, w1))
	ptest.RunAndValidate(t, p)
	assertDir(t, dir, map[string]string{
		w0:     "a1\na2\n",
		w0late: "a3-late\n",
		w1:     "b1\n",
	})
}

// interval is the fixed window [start, start+1min) for start in ms since the epoch.
func interval(start int64) window.IntervalWindow {
	return window.IntervalWindow{Start: mtime.FromMilliseconds(start), End: mtime.FromMilliseconds(start + 60_000)}
}

// iterOver is a GroupByKey value iterator over lines, as the runner passes to writeFn.
func iterOver(lines ...string) func(*string) bool {
	return func(out *string) bool {
		if len(lines) == 0 {
			return false
		}
		*out, lines = lines[0], lines[1:]
		return true
	}
}

func TestWriteFnRetryLeavesOneCompleteFileAndNoTemporaries(t *testing.T) {
	dir := t.TempDir()
	fn := &writeFn{files{Dir: dir, Prefix: "part", Suffix: ".jsonl", Shards: 2}}
	if err := fn.Setup(context.Background()); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	name := "part-20261130T140000.000Z-20261130T140100.000Z-00001-of-00002.jsonl"

	// A previous attempt died after creating its temporary file, and a stale partial file
	// sits under the final name (as if written by something else before the rename rule).
	stale := filepath.Join(dir, "."+name+".tmp-123456")
	if err := os.WriteFile(stale, []byte(`{"id":"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"id":"x"`), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	w := interval(base)
	// The runner retries the bundle and delivers the group's lines in another order.
	for attempt, order := range [][]string{{"b", "a", "c"}, {"c", "b", "a"}} {
		path, err := fn.ProcessElement(ctx, beam.PaneInfo{}, w, 1, iterOver(order...))
		if err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if want := filepath.Join(dir, name); path != want {
			t.Errorf("attempt %d returned %q, want %q", attempt, path, want)
		}
		assertDir(t, dir, map[string]string{name: "a\nb\nc\n"})
	}
	info, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o644 {
		t.Errorf("file mode = %v, want -rw-r--r--", perm)
	}
}

func TestWriteFnRejectsLineBreaksAndLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	fn := &writeFn{files{Dir: dir, Prefix: "part", Suffix: ".jsonl", Shards: 1}}
	_, err := fn.ProcessElement(context.Background(), beam.PaneInfo{}, interval(base), 0, iterOver("ok", "two\nlines"))
	want := `filesink: line "two\nlines" has a line break at byte 3; encode values so each is one line`
	if err == nil || err.Error() != want {
		t.Errorf("ProcessElement error = %v, want %q", err, want)
	}
	assertDir(t, dir, map[string]string{})
}

func TestWritePanicsAtConstructionOnBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no dir", Config{}, "Config.Dir is empty"},
		{"negative shards", Config{Dir: "d", Shards: -1}, "Config.Shards is -1"},
		{"separator in prefix", Config{Dir: "d", Prefix: "a/b"}, "may not contain a path separator"},
		{"hidden prefix", Config{Dir: "d", Prefix: ".x"}, "starts with '.', which marks temporary files"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "filesink.Write: ") || !strings.Contains(msg, tc.want) {
					t.Errorf("panic = %q, want a filesink.Write panic containing %q", msg, tc.want)
				}
			}()
			_, s := beam.NewPipelineWithRoot()
			Write(s, beam.Create(s, "x"), tc.cfg)
		})
	}
}

func TestEncodeJSONWritesOneLinePerValue(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	// An absent value is null, an empty one stays empty.
	in := beam.Create(s, event{ID: "a", TS: 1, V: str("x")}, event{ID: "b\nc", TS: 2}, event{ID: "d", TS: 3, V: str("")})
	passert.Equals(s, EncodeJSON(s, in), `{"id":"a","ts":1,"v":"x"}`, `{"id":"b\nc","ts":2,"v":null}`, `{"id":"d","ts":3,"v":""}`)
	ptest.RunAndValidate(t, p)
}

func TestWriteToARegisteredBeamFilesystem(t *testing.T) {
	// memfs stands for any Beam filesystem the program imports (gs://, ...): Write looks the
	// scheme up on the worker and writes each complete file through its writer.
	dir := "memfs://staging-" + strings.ReplaceAll(t.Name(), "/", "-")
	p, s := beam.NewPipelineWithRoot()
	lines := beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, emitTimed, beam.Create(s,
		timedLine{base + 2_000, "b"}, timedLine{base + 1_000, "a"})))
	name := "part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001.jsonl"
	passert.Equals(s, global(s, Write(s, lines, Config{Dir: dir})), dir+"/"+name)
	ptest.RunAndValidate(t, p)

	ctx := context.Background()
	fs, err := filesystem.New(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	files, err := fs.List(ctx, dir+"/*")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{dir + "/" + name}; !slices.Equal(files, want) {
		t.Fatalf("filesystem holds %q, want %q", files, want)
	}
	r, err := fs.OpenRead(ctx, files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "a\nb\n" {
		t.Errorf("%s holds %q, want %q", name, got, "a\nb\n")
	}
}
