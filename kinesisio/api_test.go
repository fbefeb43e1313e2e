package kinesisio_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

// compatibility is the program shape that must compile unchanged from release to release
// (DESIGN.md's compatibility line): it passes by compiling.
func compatibility(s beam.Scope, msgs beam.PCollection) {
	kinesisio.Read(s, "orders", kinesisio.WithRegion("eu-west-1"), kinesisio.WithStartingPosition(kinesisio.TrimHorizon()))
	kinesisio.Write(s, "out", msgs, kinesisio.WithRegion("eu-west-1"))
}

// The option types say which transforms take them.
var (
	_ kinesisio.ReadOption  = kinesisio.ClientOption{}
	_ kinesisio.WriteOption = kinesisio.ClientOption{}
	_ kinesisio.QueueOption = kinesisio.ClientOption{}
	_ kinesisio.ReadOption  = kinesisio.SourceOption{}
	_ kinesisio.QueueOption = kinesisio.SourceOption{}
)

func TestTheCompatibilityLineBuilds(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	compatibility(s, beam.Create(s, kinesisio.Message{PartitionKey: "k", Data: []byte("d")}))
}

// exports maps the import paths a misuse snippet needs to their compiled export data.
var exports = sync.OnceValues(func() (map[string]string, error) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}",
		"github.com/beamkinesis/beamkinesis/kinesisio", "github.com/apache/beam/sdks/v2/go/pkg/beam").Output()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok && file != "" {
			m[path] = file
		}
	}
	return m, sc.Err()
})

// typeCheck type-checks body as the body of a function of s and msgs (a PCollection of
// Message) against the compiled kinesisio, as the compiler would, and returns its errors.
func typeCheck(t *testing.T, body string) []string {
	t.Helper()
	files, err := exports()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	src := "package p\n\nimport (\n\t\"time\"\n\n\t\"github.com/apache/beam/sdks/v2/go/pkg/beam\"\n\n\t\"github.com/beamkinesis/beamkinesis/kinesisio\"\n)\n\n" +
		"var _ = time.Second\n\nfunc f(s beam.Scope, msgs beam.PCollection) {\n" + body + "\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "misuse.go", src, 0)
	if err != nil {
		t.Fatalf("parsing %q: %v", body, err)
	}
	var errs []string
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(files[path]) }),
		Error:    func(err error) { errs = append(errs, err.(types.Error).Msg) },
	}
	conf.Check("p", fset, []*ast.File{f}, nil)
	return errs
}

func TestAnOptionForAnotherTransformDoesNotCompile(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to compile with")
	}
	for _, c := range []struct {
		body string
		want string
	}{
		{`kinesisio.Read(s, "orders", kinesisio.WithAggregation())`, "kinesisio.WriteOption does not implement kinesisio.ReadOption"},
		{`kinesisio.ReadBounded(s, "orders", kinesisio.WithMaxConnections(4))`, "kinesisio.WriteOption does not implement kinesisio.ReadOption"},
		{`kinesisio.Write(s, "out", msgs, kinesisio.WithStartingPosition(kinesisio.TrimHorizon()))`, "kinesisio.ReadOption does not implement kinesisio.WriteOption"},
		{`kinesisio.Write(s, "out", msgs, kinesisio.WithoutDeaggregation())`, "kinesisio.SourceOption does not implement kinesisio.WriteOption"},
		{`var _ kinesisio.QueueOption = kinesisio.WithCheckpointTable("t")`, "kinesisio.ReadOption does not implement kinesisio.QueueOption"},
		{`kinesisio.Read(s, "orders", kinesisio.WithMaxRecords(int64(5)))`, "cannot use int64(5)"},
		{`opts := []kinesisio.ReadOption{kinesisio.WithRegion("eu-west-1")}; kinesisio.Write(s, "out", msgs, opts...)`, "cannot use opts"},
	} {
		errs := typeCheck(t, c.body)
		if len(errs) == 0 {
			t.Errorf("%s compiles; want %q", c.body, c.want)
			continue
		}
		if !strings.Contains(strings.Join(errs, "\n"), c.want) {
			t.Errorf("%s: errors %q do not say %q", c.body, errs, c.want)
		}
	}
	// The right uses compile, which shows the snippets above fail for their option alone.
	for _, body := range []string{
		`kinesisio.Read(s, "orders", kinesisio.WithRegion("eu-west-1"), kinesisio.WithoutDeaggregation(), kinesisio.WithMaxRecords(5))`,
		`kinesisio.Write(s, "out", msgs, kinesisio.WithRegion("eu-west-1"), kinesisio.WithMaxConnections(4))`,
		`var _ kinesisio.QueueOption = kinesisio.WithRetries(1, time.Second, time.Second)`,
	} {
		if errs := typeCheck(t, body); len(errs) > 0 {
			t.Errorf("%s does not compile: %q", body, errs)
		}
	}
}

// refused builds f, which must panic with a message holding every want.
func refused(t *testing.T, f func(), want ...string) {
	t.Helper()
	var msg string
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg, _ = r.(string)
			}
		}()
		f()
	}()
	if msg == "" {
		t.Errorf("no panic; want one saying %q", want)
		return
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("panic %q does not say %q", msg, w)
		}
	}
}

func TestOptionsThatDoNothingWhereGivenAreRefused(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	efo := kinesisio.WithEnhancedFanOut("c")
	table := kinesisio.WithCheckpointTable("positions")
	for _, c := range []struct {
		name string
		read func(beam.Scope, string, ...kinesisio.ReadOption) beam.PCollection
		opts []kinesisio.ReadOption
		want []string
	}{
		{"ReadBounded/WithMaxFetchTime", kinesisio.ReadBounded, []kinesisio.ReadOption{kinesisio.WithMaxFetchTime(time.Second)},
			[]string{"kinesisio.ReadBounded: option WithMaxFetchTime does nothing here", "to its end in one call", "read with Read"}},
		{"ReadBounded/WithMaxRecordsPerFetch", kinesisio.ReadBounded, []kinesisio.ReadOption{kinesisio.WithMaxRecordsPerFetch(10)},
			[]string{"kinesisio.ReadBounded: option WithMaxRecordsPerFetch does nothing here", "read with Read"}},
		{"ReadBounded/WithDescribeShardInterval", kinesisio.ReadBounded, []kinesisio.ReadOption{kinesisio.WithDescribeShardInterval(time.Second)},
			[]string{"kinesisio.ReadBounded: option WithDescribeShardInterval does nothing here", "lists the stream's shards once"}},
		{"ReadBounded/WithIdleThreshold", kinesisio.ReadBounded, []kinesisio.ReadOption{kinesisio.WithIdleThreshold(time.Second)},
			[]string{"kinesisio.ReadBounded: option WithIdleThreshold does nothing here", "bounded"}},
		{"processing time/WithIdleThreshold", kinesisio.Read, []kinesisio.ReadOption{kinesisio.WithProcessingTimeWatermarkPolicy(), kinesisio.WithIdleThreshold(time.Second)},
			[]string{"kinesisio.Read: option WithIdleThreshold does nothing here", "WithProcessingTimeWatermarkPolicy", "remove one"}},
		{"efo/WithMaxRecordsPerRead", kinesisio.Read, []kinesisio.ReadOption{efo, kinesisio.WithMaxRecordsPerRead(100)},
			[]string{"option WithMaxRecordsPerRead does nothing here", "enhanced fan-out makes none", "read by polling"}},
		{"readahead/both", kinesisio.Read, []kinesisio.ReadOption{kinesisio.WithoutReadAhead(), kinesisio.WithMaxReadAheadBytes(1 << 24)},
			[]string{"WithMaxReadAheadBytes", "WithoutReadAhead"}},
		{"efo/WithIdleTimeBetweenReads", kinesisio.ReadBounded, []kinesisio.ReadOption{kinesisio.WithIdleTimeBetweenReads(time.Second), efo},
			[]string{"option WithIdleTimeBetweenReads does nothing here", "enhanced fan-out makes none"}},
		{"efo/WithPollInterval", kinesisio.Read, []kinesisio.ReadOption{efo, kinesisio.WithPollInterval(time.Second)},
			[]string{"option WithPollInterval does nothing here", "checks a child shard's parents"}},
		{"efo/ReadBounded/table/WithPollInterval", kinesisio.ReadBounded, []kinesisio.ReadOption{efo, table, kinesisio.WithPollInterval(time.Second)},
			[]string{"option WithPollInterval does nothing here"}},
		{"two watermark policies", kinesisio.Read, []kinesisio.ReadOption{kinesisio.WithArrivalTimeWatermarkPolicy(), kinesisio.WithProcessingTimeWatermarkPolicy()},
			[]string{"options WithArrivalTimeWatermarkPolicy and WithProcessingTimeWatermarkPolicy each set the watermark policy; keep one"}},
		{"two consumers", kinesisio.Read, []kinesisio.ReadOption{efo, kinesisio.WithEnhancedFanOutConsumerARN("arn:aws:kinesis:us-east-1:123456789012:stream/s/consumer/c:1700000000")},
			[]string{"options WithEnhancedFanOut and WithEnhancedFanOutConsumerARN each set the enhanced fan-out consumer; keep one"}},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, func() { c.read(s, "orders", c.opts...) }, c.want...) })
	}
	// What the rules leave alone: Read's parent check with a table under enhanced fan-out,
	// and one option given twice (the last one counts).
	kinesisio.Read(s, "orders", efo, table, kinesisio.WithPollInterval(time.Second))
	kinesisio.Read(s, "orders", efo, efo, kinesisio.WithMaxRecords(1), kinesisio.WithMaxRecords(2))
}

func TestWriteOptionsThatDoNothingWhereGivenAreRefused(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	msgs := beam.Create(s, kinesisio.Message{PartitionKey: "k", Data: []byte("d")})
	for _, c := range []struct {
		opts []kinesisio.WriteOption
		want []string
	}{
		{[]kinesisio.WriteOption{kinesisio.WithAggregation(), kinesisio.WithoutAggregation()},
			[]string{"kinesisio.Write: options WithAggregation and WithoutAggregation each set whether to aggregate; keep one"}},
		{[]kinesisio.WriteOption{kinesisio.WithoutAggregation(), kinesisio.WithMaxAggregateBytes(1000)},
			[]string{"kinesisio.Write: option WithMaxAggregateBytes does nothing here", "WithoutAggregation makes none"}},
		{[]kinesisio.WriteOption{kinesisio.WithMaxAggregateRecords(10), kinesisio.WithoutAggregation()},
			[]string{"kinesisio.Write: option WithMaxAggregateRecords does nothing here"}},
	} {
		refused(t, func() { kinesisio.Write(s, "out", msgs, c.opts...) }, c.want...)
	}
	kinesisio.Write(s, "out", msgs, kinesisio.WithMaxAggregateBytes(1000), kinesisio.WithMaxAggregateRecords(10))
}

func TestCommitAfterSinksMisusesAreRefused(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	refused(t, func() { kinesisio.Read(s, "orders", kinesisio.WithCommitAfterSinks(nil)) },
		"kinesisio.Read: option WithCommitAfterSinks: the *Commit is nil")

	var commit kinesisio.Commit
	kinesisio.Read(s, "orders", kinesisio.WithCommitAfterSinks(&commit))
	refused(t, func() { kinesisio.ReadBounded(s, "orders", kinesisio.WithCommitAfterSinks(&commit)) },
		"kinesisio.ReadBounded: option WithCommitAfterSinks: the Commit already belongs to another kinesisio.Read; give each read a Commit of its own")

	var unfilled kinesisio.Commit
	refused(t, func() { unfilled.After(s, beam.Create(s, "written")) },
		"kinesisio.Commit.After: no read filled this Commit", "WithCommitAfterSinks(&commit)")
	refused(t, func() { commit.After(s) }, "kinesisio.Commit.After: no written PCollection")
	refused(t, func() { commit.After(s, beam.Create(s, "again")) }, "kinesisio.Commit.After: called twice")

	var sessions kinesisio.Commit
	kinesisio.Read(s, "orders", kinesisio.WithCommitAfterSinks(&sessions))
	refused(t, func() {
		sessions.After(s, beam.WindowInto(s, window.NewSessions(time.Minute), beam.Create(s, "written")))
	}, "kinesisio.Commit.After: written[0]", "merge")
}

// A pipeline whose read was given WithCommitAfterSinks but whose Commit.After was never
// called would commit nothing: it does not start, and the error, which Beam prints with the
// DoFn, shows no credentials. With After, the same pipeline is handed
// to the runner (here it fails later, reaching no Kinesis at the closed port, which shows it
// got past the handover).
func TestAReadWhoseCommitAfterIsNeverCalledDoesNotRun(t *testing.T) {
	opts := []kinesisio.ReadOption{kinesisio.WithEndpoint("http://127.0.0.1:1"), kinesisio.WithRegion("us-east-1"),
		kinesisio.WithStaticCredentials("AKIDAPITEST", "wJalrXUtnFEMIapitest"), kinesisio.WithRetries(0, time.Millisecond, time.Millisecond)}
	for _, bounded := range []bool{false, true} {
		p, s := beam.NewPipelineWithRoot()
		var commit kinesisio.Commit
		read, name := kinesisio.Read, "kinesisio.Read"
		if bounded {
			read, name = kinesisio.ReadBounded, "kinesisio.ReadBounded"
		}
		read(s, "orders", append(opts, kinesisio.WithCommitAfterSinks(&commit))...)
		err := ptest.Run(p)
		if err == nil || !strings.Contains(err.Error(), name+": WithCommitAfterSinks was given but Commit.After was never called") {
			t.Errorf("%s: running without After: %v; want the error naming WithCommitAfterSinks and Commit.After", name, err)
		}
		if err != nil && (strings.Contains(err.Error(), "AKIDAPITEST") || strings.Contains(err.Error(), "wJalrXUtnFEMIapitest")) {
			t.Errorf("%s: the error shows the static credentials: %v", name, err)
		}
	}

	p, s := beam.NewPipelineWithRoot()
	var commit kinesisio.Commit
	recs := kinesisio.ReadBounded(s, "orders", append(opts, kinesisio.WithCommitAfterSinks(&commit))...)
	commit.After(s, recs)
	err := ptest.Run(p)
	if err == nil || strings.Contains(err.Error(), "Commit.After was never called") {
		t.Errorf("running with After: %v; want the error of an unreachable endpoint", err)
	}
}
