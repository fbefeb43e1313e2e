package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/transforms/count"
	"github.com/beamkinesis/beamkinesis/transforms/decode"
)

func init() {
	register.Function2x0(splitWords)
	register.Function1x1(printTable)
	register.Function2x0(reportDeadLetter)
	register.Emitter1[string]()
}

// embeddedStream is the stream the embedded mode creates and reads.
const embeddedStream = "words"

// sampleText is put line by line after the seed's words (embedded.SeedWords), to give the count some depth.
var sampleText = []string{
	"Kinesis keeps the records of a shard in order",
	"Beam reads every shard of the stream and counts every word",
	"A word read twice is a word counted twice",
}

// config is the command line of wordcount.
type config struct {
	// Stream is the stream to read; empty means the embedded server's.
	Stream  string
	Kinesis pipeflags.Kinesis
	Source  pipeflags.Source
}

func (c *config) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Stream, "stream", "", "Kinesis stream to read (default: an embedded in-process server with sample records)")
	c.Kinesis.Register(fs)
	c.Source.Register(fs, time.Minute)
}

// environment is what the embedded mode starts with; tests change it.
type environment struct {
	// serverOptions configure the embedded server (e.g. a manual clock).
	serverOptions []kinesistest.Option
	// seed puts the records of the embedded stream; nil puts embedded.SeedWords and
	// sampleText.
	seed func(ctx context.Context, srv *kinesistest.Server) error
	// queueOpts are appended to a queue read's options (e.g. to end it when idle).
	queueOpts []kinesisio.QueueOption
}

// job is a resolved configuration: what to read and how to window it.
type job struct {
	in     pipeflags.Input
	window time.Duration
	// srv is the embedded server, nil with a real stream or queue.
	srv *kinesistest.Server
}

// stop closes the embedded server, if any.
func (j job) stop() {
	if j.srv != nil {
		j.srv.Close()
	}
}

// prepare resolves cfg into a job. In the embedded mode it starts the server and puts the
// records.
func prepare(ctx context.Context, cfg config, env environment) (job, error) {
	j := job{window: cfg.Source.Window}
	// Flags are checked before the embedded server starts.
	in, err := cfg.Source.Input("--stream", cfg.Stream)
	if err != nil {
		return job{}, err
	}
	switch {
	case in.Embedded() && cfg.Kinesis.Endpoint != "":
		return job{}, errors.New("--kinesis_endpoint needs --stream or --queue, the stream or queue to read there")
	case in.Embedded():
		seed := env.seed
		if seed == nil {
			seed = seedSample
		}
		setup := embedded.Setup{Streams: []string{embeddedStream}, Shards: 2, Seed: seed, ServerOptions: env.serverOptions}
		if in.Queue != "" {
			setup.Queue = embedded.DemoQueue
		}
		srv, err := embedded.Launch(ctx, setup)
		if err != nil {
			return job{}, err
		}
		j.srv = srv
		if j.in, err = embedded.Input(srv, in, embeddedStream); err != nil {
			srv.Close()
			return job{}, err
		}
	default:
		client, err := cfg.Kinesis.Options()
		if err != nil {
			return job{}, err
		}
		j.in = in.Connect(client)
	}
	j.in.QueueOpts = append(j.in.QueueOpts, env.queueOpts...)
	return j, nil
}

// seedSample puts the seed's words, then the sample text a line per record.
func seedSample(ctx context.Context, srv *kinesistest.Server) error {
	client := srv.Client()
	if err := embedded.PutStrings(ctx, client, embeddedStream, "1", embedded.SeedWords...); err != nil {
		return err
	}
	entries := make([]embedded.Entry, len(sampleText))
	for i, line := range sampleText {
		entries[i] = embedded.Entry{PartitionKey: fmt.Sprintf("line-%d", i+1), Data: []byte(line)}
	}
	return embedded.Put(ctx, client, embeddedStream, entries)
}

// build adds the word count to s and returns its tables, a PCollection<string> with one
// table per window: the global window when bounded, fixed windows of j.window otherwise.
func (j job) build(s beam.Scope) beam.PCollection {
	tables, commit := j.tables(s)
	commit.After(s, tables)
	return tables
}

// buildPrinted adds the word count to s and prints its tables; with --checkpoint_table a
// position is committed once the tables of its records were printed.
func (j job) buildPrinted(s beam.Scope) {
	tables, commit := j.tables(s)
	commit.After(s, beam.ParDo(s, printTable, tables))
}

// tables adds the word count to s and returns its tables and the read's commit.
func (j job) tables(s beam.Scope) (beam.PCollection, *pipeflags.Commit) {
	recs, commit := j.in.Read(s)
	if !j.in.Bounded {
		recs = beam.WindowInto(s, window.NewFixedWindows(j.window), recs)
	}
	texts, dead := decode.String(s, recs)
	beam.ParDo0(s, reportDeadLetter, dead)
	words := beam.ParDo(s, splitWords, texts)
	return count.Tables(s, count.PerWindow(s, words), "word"), commit
}

// splitWords emits the words of text: maximal runs of letters, digits and inner
// apostrophes, case kept (the seed counts "Kinesis", not "kinesis").
func splitWords(text string, emit func(string)) {
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	}) {
		if w = strings.Trim(w, "'"); w != "" {
			emit(w)
		}
	}
}

// printTable prints one window's table to standard output, as Spark's console sink does,
// and outputs it: printed.
func printTable(table string) string {
	fmt.Print(table)
	return table
}

var deadLetters = beam.NewCounter("pipelines.wordcount", "dead_letters")

// reportDeadLetter logs and counts a record whose data is not text.
func reportDeadLetter(ctx context.Context, d decode.DeadLetter) {
	deadLetters.Inc(ctx, 1)
	log.Warnf(ctx, "wordcount: skipping record %s/%s/%d of %s: %s", d.Record.ShardID, d.Record.SequenceNumber, d.Record.SubSequenceNumber, d.Record.StreamName, d.Error)
}
