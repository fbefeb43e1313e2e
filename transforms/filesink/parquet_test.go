package filesink

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/beamkinesis/beamkinesis/testing/components"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*timedEvent)(nil)).Elem())
	register.Function2x0(emitTimedEvent)
	register.Emitter2[beam.EventTime, event]()
}

// timedEvent is a test input: an event at an event time in milliseconds.
type timedEvent struct {
	AtMillis int64
	Event    event
}

func emitTimedEvent(in timedEvent, emit func(beam.EventTime, event)) {
	emit(beam.EventTime(in.AtMillis), in.Event)
}

// parquetInput is two minutes of events: null, empty and set values, and a duplicate.
var parquetInput = []timedEvent{
	{base + 1_000, event{ID: "a", TS: 1, V: str("x")}},
	{base + 2_000, event{ID: "b", TS: 2}},
	{base + 3_000, event{ID: "c", TS: 3, V: str("")}},
	{base + 59_999, event{ID: "d", TS: 59, V: str("é\n\"q\"")}},
	{base + 60_000, event{ID: "e", TS: 60}},
	{base + 60_000, event{ID: "e", TS: 60}},
	{base + 61_000, event{ID: "f", TS: -1 << 62, V: str("z")}},
}

// duckRow is a row as DuckDB returns it: file name, id, ts and v (nil for NULL).
type duckRow struct {
	File string
	ID   string
	TS   string
	V    any
}

func (r duckRow) String() string { return fmt.Sprintf("%s %s %s %#v", r.File, r.ID, r.TS, r.V) }

// readParquetWithDuckDB reads every Parquet file under dir with DuckDB and returns the
// column types and the rows sorted.
func readParquetWithDuckDB(t *testing.T, glob string) (types []string, rows []string) {
	t.Helper()
	tab := components.DuckDBT(t, fmt.Sprintf(
		"SELECT parse_filename(filename) AS file, id, ts, v FROM read_parquet('%s', filename=true)", glob))
	for _, r := range tab.Rows {
		rows = append(rows, duckRow{File: r[0].(string), ID: r[1].(string), TS: string(r[2].(json.Number)), V: r[3]}.String())
	}
	slices.Sort(rows)
	return tab.Types[1:], rows
}

// wantParquetRows is what DuckDB must read from the files of parquetInput with one shard.
func wantParquetRows() []string {
	w0 := "part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001.parquet"
	w1 := "part-20261130T140100.000Z-20261130T140200.000Z-00000-of-00001.parquet"
	rows := []string{
		duckRow{w0, "a", "1", "x"}.String(),
		duckRow{w0, "b", "2", nil}.String(),
		duckRow{w0, "c", "3", ""}.String(),
		duckRow{w0, "d", "59", "é\n\"q\""}.String(),
		duckRow{w1, "e", "60", nil}.String(),
		duckRow{w1, "e", "60", nil}.String(),
		duckRow{w1, "f", fmt.Sprint(int64(-1 << 62)), "z"}.String(),
	}
	slices.Sort(rows)
	return rows
}

var wantParquetTypes = []string{"VARCHAR", "BIGINT", "VARCHAR"}

// buildParquetPipeline stages parquetInput with WriteParquet under cfg and asserts the
// paths it returns.
func buildParquetPipeline(t *testing.T, cfg ParquetConfig, dir string) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	events := beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, emitTimedEvent, beam.CreateList(s, parquetInput)))
	paths := WriteParquet(s, events, cfg)
	passert.Equals(s, global(s, paths),
		dir+"/part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001.parquet",
		dir+"/part-20261130T140100.000Z-20261130T140200.000Z-00000-of-00001.parquet")
	return p
}

func TestWriteParquetLocalFilesReadByDuckDBExactlyWithNulls(t *testing.T) {
	components.PythonT(t)
	for _, codec := range []string{"", "zstd"} {
		t.Run("compression="+codec, func(t *testing.T) {
			dir := t.TempDir()
			p := buildParquetPipeline(t, ParquetConfig{Config: Config{Dir: dir}, Compression: codec}, dir)
			ptest.RunAndValidate(t, p)

			types, rows := readParquetWithDuckDB(t, dir+"/*.parquet")
			if !slices.Equal(types, wantParquetTypes) {
				t.Errorf("DuckDB column types = %v, want %v", types, wantParquetTypes)
			}
			if want := wantParquetRows(); !slices.Equal(rows, want) {
				t.Errorf("DuckDB reads\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
			}
			if names := slices.Sorted(maps.Keys(dirContents(t, dir))); len(names) != 2 {
				t.Errorf("staging directory holds %q, want the two Parquet files only", names)
			}
		})
	}
}

// createBucket creates bucket on the S3 server at endpoint with the AWS SDK.
func createBucket(t *testing.T, endpoint, bucket string) {
	t.Helper()
	if _, err := testS3Client(endpoint).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("creating bucket %s: %v", bucket, err)
	}
}

// testS3Client is an S3 client of the server at endpoint, for test set-up and checks.
func testS3Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

// motoS3 is the S3 configuration of the moto server m, with static test keys.
func motoS3(m *components.Moto) S3 {
	return S3{Endpoint: m.Endpoint, AccessKeyID: "test", SecretAccessKey: "test"}
}

func TestWriteParquetToS3ReadByDuckDBExactly(t *testing.T) {
	moto := components.StartMotoT(t)
	createBucket(t, moto.Endpoint, "lake")
	dir := "s3://lake/kinesis_staging/iot-events"
	p := buildParquetPipeline(t, ParquetConfig{Config: Config{Dir: dir + "/", S3: motoS3(moto)}}, dir)
	ptest.RunAndValidate(t, p)

	local := t.TempDir()
	keys := components.DownloadS3T(t, moto.Endpoint, "lake", "", local)
	want := []string{
		"kinesis_staging/iot-events/part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001.parquet",
		"kinesis_staging/iot-events/part-20261130T140100.000Z-20261130T140200.000Z-00000-of-00001.parquet",
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("bucket holds %q, want %q", keys, want)
	}
	types, rows := readParquetWithDuckDB(t, local+"/kinesis_staging/iot-events/*.parquet")
	if !slices.Equal(types, wantParquetTypes) {
		t.Errorf("DuckDB column types = %v, want %v", types, wantParquetTypes)
	}
	if want := wantParquetRows(); !slices.Equal(rows, want) {
		t.Errorf("DuckDB reads\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

// eventLines returns the JSON lines of events, as WriteParquet sends them to its writer.
func eventLines(t testing.TB, events ...event) []string {
	var lines []string
	for _, e := range events {
		l, err := encodeJSON(e)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	return lines
}

func TestParquetFnRetryInAnotherOrderRewritesIdenticalBytes(t *testing.T) {
	moto := components.StartMotoT(t)
	createBucket(t, moto.Endpoint, "retry")
	events := []event{{ID: "a", TS: 1, V: str("x")}, {ID: "b", TS: 2}, {ID: "c", TS: 3, V: str("")}}
	orders := [][]string{
		eventLines(t, events[0], events[1], events[2]),
		eventLines(t, events[2], events[0], events[1]),
	}
	name := "part-20261130T140000.000Z-20261130T140100.000Z-00001-of-00002.parquet"
	for _, dir := range []string{t.TempDir(), "s3://retry/staging"} {
		fn, err := newParquetFn(reflect.TypeOf(event{}), ParquetConfig{Config: Config{Dir: dir, Shards: 2, S3: motoS3(moto)}})
		if err != nil {
			t.Fatal(err)
		}
		var contents []string
		for attempt, lines := range orders {
			path, err := fn.ProcessElement(context.Background(), beam.PaneInfo{}, interval(base), 1, iterOver(lines...))
			if err != nil {
				t.Fatalf("%s attempt %d: %v", dir, attempt, err)
			}
			if want := dir + "/" + name; path != want && path != filepath.Join(dir, name) {
				t.Errorf("attempt %d returned %q, want %q", attempt, path, want)
			}
			contents = append(contents, readStaged(t, moto, dir, name))
		}
		if contents[0] != contents[1] {
			t.Errorf("%s: a retry in another order wrote other bytes (%d then %d bytes)", dir, len(contents[0]), len(contents[1]))
		}
		if !strings.HasPrefix(contents[0], "PAR1") || !strings.HasSuffix(contents[0], "PAR1") {
			t.Errorf("%s: %s is not a Parquet file", dir, name)
		}
	}
}

// readStaged returns the content of the file name in dir, local or on moto's S3 (read
// with the AWS SDK's GetObject).
func readStaged(t *testing.T, moto *components.Moto, dir, name string) string {
	t.Helper()
	if rest, ok := strings.CutPrefix(dir, "s3://"); ok {
		bucket, prefix, _ := strings.Cut(rest, "/")
		out, err := testS3Client(moto.Endpoint).GetObject(context.Background(), &s3.GetObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(prefix + "/" + name)})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// unregistered is a struct type no init function registers.
type unregistered struct{ A int }

func TestWriteParquetPanicsAtConstructionOnBadConfig(t *testing.T) {
	tests := []struct {
		name  string
		cfg   ParquetConfig
		value any
		want  string
	}{
		{"no dir", ParquetConfig{}, event{}, "Config.Dir is empty"},
		{"bucketless S3 URL", ParquetConfig{Config: Config{Dir: "s3:///prefix"}}, event{}, `"s3:///prefix" names no bucket`},
		{"half static keys", ParquetConfig{Config: Config{Dir: "s3://b", S3: S3{AccessKeyID: "k"}}}, event{}, "must be set together"},
		{"codec", ParquetConfig{Config: Config{Dir: "d"}, Compression: "lzo"}, event{}, `Compression "lzo" is not one of`},
		{"row groups", ParquetConfig{Config: Config{Dir: "d"}, RowGroupRows: -1}, event{}, "RowGroupRows is -1"},
		{"not a struct", ParquetConfig{Config: Config{Dir: "d"}}, "x", "is a string, want a struct type"},
		{"unregistered", ParquetConfig{Config: Config{Dir: "d"}}, unregistered{}, "is not registered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "filesink.WriteParquet: ") || !strings.Contains(msg, tc.want) {
					t.Errorf("panic = %q, want a filesink.WriteParquet panic containing %q", msg, tc.want)
				}
			}()
			_, s := beam.NewPipelineWithRoot()
			WriteParquet(s, beam.Create(s, tc.value), tc.cfg)
		})
	}
}

func TestS3ConfigRedactsCredentials(t *testing.T) {
	c := S3{Region: "eu-west-1", AccessKeyID: "AKIDSECRET", SecretAccessKey: "hush", SessionToken: "tok"}
	for _, got := range []string{c.String(), fmt.Sprintf("%v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%+v", c)} {
		if strings.Contains(got, "AKIDSECRET") || strings.Contains(got, "hush") || strings.Contains(got, "tok\"") {
			t.Errorf("formatted S3 config leaks a credential: %s", got)
		}
	}
}
