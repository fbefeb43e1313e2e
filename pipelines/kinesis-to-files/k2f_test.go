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
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/clitest"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/javacoder"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/transforms/decode"
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

// windowName is the name of the file of the one-minute window starting at start that holds
// the records of shard.
func windowName(start time.Time, shard, suffix string) string {
	const layout = "20060102T150405.000Z"
	return "part-" + start.UTC().Format(layout) + "-" + start.Add(time.Minute).UTC().Format(layout) + "-" + shard + "-00000-of-00001" + suffix
}

// embeddedShard is the shard the embedded records are put into (partition key "1").
const embeddedShard = "shardId-000000000001"

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
			for name, lines := range expectedDeadLetters(t, j.srv) {
				want["dead-letters/"+name] = lines
			}
			if parquet {
				assertParquetEvents(t, filepath.Join(dir, "events"), map[string][]string{
					windowName(t0, embeddedShard, ".parquet"):                  wantEventRows[0],
					windowName(t0.Add(time.Minute), embeddedShard, ".parquet"): wantEventRows[1],
				})
				for name := range got {
					if strings.HasPrefix(name, "events/") {
						want[name] = got[name] // checked by DuckDB
					}
				}
			} else {
				want["events/"+windowName(t0, embeddedShard, ".jsonl")] = strings.Join(wantEventLines[0], "\n") + "\n"
				want["events/"+windowName(t0.Add(time.Minute), embeddedShard, ".jsonl")] = strings.Join(wantEventLines[1], "\n") + "\n"
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

// expectedDeadLetters returns the content of each dead-letter file by name, built from the
// records the server stored (their shards, sequence numbers and arrival times).
func expectedDeadLetters(t *testing.T, srv *kinesistest.Server) map[string]string {
	t.Helper()
	stored, err := srv.StreamRecords(embeddedStream)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string][]string{}
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
		name := windowName(r.ArrivalTime.Truncate(time.Minute), r.ShardID, ".jsonl")
		lines[name] = append(lines[name], string(b))
	}
	out := map[string]string{}
	for name, ls := range lines {
		slices.Sort(ls)
		out[name] = strings.Join(ls, "\n") + "\n"
	}
	if n := len(lines); n != 2 {
		t.Fatalf("the dead letters span %d files (windows and shards), want 2", n)
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

// TestStagesToS3ReadBackByDuckDBAndPyArrow runs the embedded demo with its default format, Parquet,
// to an s3:// staging dir on moto's S3 server: the bucket must hold exactly the two event
// files and two dead-letter files, and DuckDB must read every good event exactly once from
// the objects (downloaded with boto3), and pyarrow straight from S3.
func TestStagesToS3ReadBackByDuckDBAndPyArrow(t *testing.T) {
	moto := components.StartMotoT(t)
	createBucket(t, moto.Endpoint, "lake")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Minute)
	clock := kinesistest.NewManualClock(t0.Add(5 * time.Second))
	env := environment{serverOptions: []kinesistest.Option{kinesistest.WithClock(clock)}, seed: twoMinuteSeed(clock)}
	cfg := parse(t, "--staging_dir=s3://lake/kinesis_staging/iot-events/", "--s3_endpoint="+moto.Endpoint, "--aws_credentials_from_env")
	j, err := prepare(context.Background(), cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.stop()
	p, s := beam.NewPipelineWithRoot()
	events, dead := j.build(s)
	prefix := "s3://lake/kinesis_staging/iot-events/"
	passert.Equals(s, beam.WindowInto(s, window.NewGlobalWindows(), events),
		prefix+"events/"+windowName(t0, embeddedShard, ".parquet"), prefix+"events/"+windowName(t0.Add(time.Minute), embeddedShard, ".parquet"))
	passert.Count(s, beam.WindowInto(s, window.NewGlobalWindows(), dead), "dead-letter files", 2)
	ptest.RunAndValidate(t, p)

	local := t.TempDir()
	keys := components.DownloadS3T(t, moto.Endpoint, "lake", "", local)
	staged := filepath.Join(local, "kinesis_staging", "iot-events")
	want := map[string]string{}
	for name, lines := range expectedDeadLetters(t, j.srv) {
		want["dead-letters/"+name] = lines
	}
	wantKeys := []string{
		"kinesis_staging/iot-events/events/" + windowName(t0, embeddedShard, ".parquet"),
		"kinesis_staging/iot-events/events/" + windowName(t0.Add(time.Minute), embeddedShard, ".parquet"),
	}
	for name := range want {
		wantKeys = append(wantKeys, "kinesis_staging/iot-events/"+name)
	}
	slices.Sort(wantKeys)
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("bucket holds %q, want %q", keys, wantKeys)
	}
	assertParquetEvents(t, filepath.Join(staged, "events"), map[string][]string{
		windowName(t0, embeddedShard, ".parquet"):                  wantEventRows[0],
		windowName(t0.Add(time.Minute), embeddedShard, ".parquet"): wantEventRows[1],
	})
	// pyarrow reads the same events straight from S3 with its own client.
	tab := components.PyArrowS3T(t, moto.Endpoint, "lake/kinesis_staging/iot-events/events")
	if want := []string{"string not null", "int64 not null", "string"}; !slices.Equal(tab.Types, want) {
		t.Errorf("pyarrow types of %v = %v, want %v", tab.Columns, tab.Types, want)
	}
	var arrowRows []string
	for _, r := range tab.Rows {
		v := "<nil>"
		if r[2] != nil {
			v = fmt.Sprintf("%q", r[2])
		}
		arrowRows = append(arrowRows, fmt.Sprintf("%s %s %s", r[0], r[1], v))
	}
	slices.Sort(arrowRows)
	if want := slices.Sorted(slices.Values(append(slices.Clone(wantEventRows[0]), wantEventRows[1]...))); !slices.Equal(arrowRows, want) {
		t.Errorf("pyarrow reads %q from S3, want %q", arrowRows, want)
	}
	got := readTree(t, filepath.Join(staged, "dead-letters"))
	for name, lines := range want {
		if g := got[strings.TrimPrefix(name, "dead-letters/")]; g != lines {
			t.Errorf("%s holds\n%s\nwant\n%s", name, g, lines)
		}
	}
}

// createBucket creates bucket on the S3 server at endpoint.
func createBucket(t *testing.T, endpoint, bucket string) {
	t.Helper()
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("creating bucket %s: %v", bucket, err)
	}
}

// TestStreamingAcrossAShardSplitStagesEveryEventOnce puts events with many partition keys,
// doubles the shards (each parent splits into two children), puts more a minute later and
// stages the stream as Parquet with a streaming read: DuckDB must read every event exactly
// once, in the window of its arrival minute, and both parents and children must have held
// events.
func TestStreamingAcrossAShardSplitStagesEveryEventOnce(t *testing.T) {
	components.PythonT(t)
	t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Minute)
	clock := kinesistest.NewManualClock(t0.Add(5 * time.Second))
	const perMinute = 40
	put := func(ctx context.Context, srv *kinesistest.Server, minute int) error {
		var entries []embedded.Entry
		for i := range perMinute {
			id := fmt.Sprintf("m%d-%02d", minute, i)
			entries = append(entries, embedded.Entry{PartitionKey: id, Data: fmt.Appendf(nil, `{"id":%q,"ts":%d,"v":"%d"}`, id, i, minute)})
		}
		return embedded.Put(ctx, srv.Client(), embeddedStream, entries)
	}
	env := environment{
		serverOptions: []kinesistest.Option{kinesistest.WithClock(clock)},
		seed: func(ctx context.Context, srv *kinesistest.Server) error {
			if err := put(ctx, srv, 0); err != nil {
				return err
			}
			if _, err := srv.Client().UpdateShardCount(ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String(embeddedStream),
				TargetShardCount: aws.Int32(4), ScalingType: kinesistypes.ScalingTypeUniformScaling}); err != nil {
				return fmt.Errorf("splitting the shards: %w", err)
			}
			clock.Advance(time.Minute)
			return put(ctx, srv, 1)
		},
	}
	dir := t.TempDir()
	j, err := prepare(context.Background(), parse(t, "--staging_dir="+dir, "--bounded=false", "--max_read_time=1s"), env)
	if err != nil {
		t.Fatal(err)
	}
	defer j.stop()
	p, s := beam.NewPipelineWithRoot()
	j.build(s)
	ptest.RunAndValidate(t, p)

	stored, err := j.srv.StreamRecords(embeddedStream)
	if err != nil {
		t.Fatal(err)
	}
	shards := map[string]bool{}
	shardOf := map[string]string{} // by partition key, the event's id
	for _, r := range stored {
		shards[r.ShardID] = true
		shardOf[r.PartitionKey] = r.ShardID
	}
	if len(shards) < 4 || !shards["shardId-000000000000"] || !shards["shardId-000000000001"] {
		t.Fatalf("events landed in shards %v; the test needs both parents and children to hold some", slices.Sorted(maps.Keys(shards)))
	}
	// Each window's events are in one file per shard they were read from.
	want := map[string][]string{}
	for minute := range 2 {
		for i := range perMinute {
			id := fmt.Sprintf("m%d-%02d", minute, i)
			name := windowName(t0.Add(time.Duration(minute)*time.Minute), shardOf[id], ".parquet")
			want[name] = append(want[name], fmt.Sprintf("%s %d %q", id, i, fmt.Sprint(minute)))
		}
	}
	for _, rows := range want {
		slices.Sort(rows)
	}
	assertParquetEvents(t, filepath.Join(dir, "events"), want)
}

// TestEventsAndDeadLettersSurviveAJavaRunner sends Events with a null, an empty and a set v,
// and a dead letter of a record with empty data, through Beam Java's coders (as Flink or
// Dataflow transcode values between stages): each must come back with the bytes Go wrote
// and decode to the value sent, a nil v still nil and an empty v still "".
func TestEventsAndDeadLettersSurviveAJavaRunner(t *testing.T) {
	empty, x := "", "x"
	values := []any{
		Event{ID: "a", TS: 1},
		Event{ID: "b", TS: 2, V: &empty},
		Event{ID: "c", TS: -3, V: &x},
		decode.DeadLetter{Record: kinesisio.Record{StreamName: "s", ShardID: "shardId-000000000000", SequenceNumber: "1",
			ApproximateArrivalTimestamp: time.UnixMilli(1764600000123).UTC(), Data: []byte{}}, Stage: decode.StageJSON, Error: "why"},
	}
	for _, c := range javacoder.Cross(t, values...) {
		c.Check(t)
		if c.Back != nil && !reflect.DeepEqual(c.Back, c.Value) {
			t.Errorf("after Java, Go decodes %#v, want %#v", c.Back, c.Value)
		}
	}
}
