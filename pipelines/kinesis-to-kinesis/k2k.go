package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/report"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/transforms/count"
	"github.com/beamkinesis/beamkinesis/transforms/decode"
)

func init() {
	register.Function1x2(countMessage)
	register.Function1x1(recordData)
	register.Function2x0(reportDeadLetter)
}

// Transforms between the streams, the values of --transform.
const (
	transformCount       = "count"
	transformPassthrough = "passthrough"
)

// The streams of the embedded mode.
const (
	embeddedInput  = "input"
	embeddedOutput = "output"
)

// embeddedRecords are put into the embedded input stream: the seed's words and a few
// repeats, so that counts differ.
var embeddedRecords = append(append([]string(nil), embedded.SeedWords...), "Kinesis", "Apache", "Kinesis")

// metricsNamespace is the namespace of the pipeline's own metrics.
const metricsNamespace = "pipelines.kinesis-to-kinesis"

var deadLetters = beam.NewCounter(metricsNamespace, "dead_letters")

// config is the command line of kinesis-to-kinesis.
type config struct {
	Input, Output string
	Transform     string
	Aggregation   bool
	Reshuffle     bool
	Kinesis       pipeflags.Kinesis
	Source        pipeflags.Source
}

func (c *config) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Input, "input_stream", "", "Kinesis stream to read (default: the embedded server's \"input\")")
	fs.StringVar(&c.Output, "output_stream", "", "Kinesis stream to write (default: the embedded server's \"output\")")
	fs.StringVar(&c.Transform, "transform", transformCount, "count: one record per distinct data value and window with its count; passthrough: every record, re-keyed at random")
	fs.BoolVar(&c.Aggregation, "aggregation", true, "pack output records into KPL aggregates (the Spark connectors' aggregationEnabled)")
	fs.BoolVar(&c.Reshuffle, "reshuffle", false, "with --transform=passthrough, redistribute the records over the workers before writing them (a Reshuffle of kinesisio.Record), so that the writes do not follow the shards' assignment to workers")
	c.Kinesis.Register(fs)
	c.Source.Register(fs, time.Minute)
}

// environment is what the embedded mode starts with; tests change it.
type environment struct {
	serverOptions []kinesistest.Option
	// seed puts the records of the embedded input stream; nil puts embeddedRecords.
	seed func(ctx context.Context, srv *kinesistest.Server) error
	// extra options, appended to the read and the write (e.g. faster retries).
	extra []kinesisio.ClientOption
}

// job is a resolved configuration.
type job struct {
	in        pipeflags.Input
	output    string
	transform string
	reshuffle bool
	writeOpts []kinesisio.WriteOption
	window    time.Duration
	// srv is the embedded server, nil with real streams.
	srv *kinesistest.Server
}

// stop closes the embedded server, if any.
func (j job) stop() {
	if j.srv != nil {
		j.srv.Close()
	}
}

// prepare resolves cfg into a job. In the embedded mode it starts the server, creates both
// streams and seeds the input.
func prepare(ctx context.Context, cfg config, env environment) (job, error) {
	if cfg.Transform != transformCount && cfg.Transform != transformPassthrough {
		return job{}, fmt.Errorf("--transform=%q: want %s or %s", cfg.Transform, transformCount, transformPassthrough)
	}
	if cfg.Reshuffle && cfg.Transform != transformPassthrough {
		return job{}, fmt.Errorf("--reshuffle applies to --transform=%s only (the %s transform groups the records already)", transformPassthrough, transformCount)
	}
	j := job{output: cfg.Output, transform: cfg.Transform, reshuffle: cfg.Reshuffle, window: cfg.Source.Window}
	var client []kinesisio.ClientOption
	// Flags are checked before the embedded server starts.
	in, err := cfg.Source.Input("--input_stream", cfg.Input)
	if err != nil {
		return job{}, err
	}
	switch {
	case in.Embedded() && cfg.Output == "" && cfg.Kinesis.Endpoint != "":
		return job{}, errors.New("--kinesis_endpoint needs --input_stream (or --queue) and --output_stream")
	case in.Embedded() && cfg.Output == "":
		seed := env.seed
		if seed == nil {
			seed = func(ctx context.Context, srv *kinesistest.Server) error {
				return embedded.PutStrings(ctx, srv.Client(), embeddedInput, "1", embeddedRecords...)
			}
		}
		setup := embedded.Setup{Streams: []string{embeddedInput, embeddedOutput}, Shards: 2, Seed: seed, ServerOptions: env.serverOptions}
		if in.Queue != "" {
			setup.Queue = embedded.DemoQueue
		}
		srv, err := embedded.Launch(ctx, setup)
		if err != nil {
			return job{}, err
		}
		j.srv, j.output = srv, embeddedOutput
		if in, err = embedded.Input(srv, in, embeddedInput); err != nil {
			srv.Close()
			return job{}, err
		}
		client = embedded.Options(srv)
	case in.Embedded() || cfg.Output == "":
		return job{}, errors.New("give --output_stream and --input_stream (or --queue), or none of them for the embedded demo")
	default:
		opts, err := cfg.Kinesis.Options()
		if err != nil {
			return job{}, err
		}
		client = opts
		in = in.Connect(client)
	}
	j.in = in.Connect(env.extra)
	client = append(client, env.extra...)
	agg := kinesisio.WithAggregation()
	if !cfg.Aggregation {
		agg = kinesisio.WithoutAggregation()
	}
	j.writeOpts = pipeflags.WriteOptions(client, agg)
	return j, nil
}

// build adds the pipeline to s and returns the messages the write failed, a
// PCollection<kinesisio.FailedMessage>, after logging and counting them.
func (j job) build(s beam.Scope) beam.PCollection {
	recs, commit := j.in.Read(s)
	var msgs beam.PCollection
	switch j.transform {
	case transformPassthrough:
		if j.reshuffle {
			recs = beam.Reshuffle(s, recs)
		}
		msgs = kinesisio.MessagesWithRandomKeys(s, beam.ParDo(s, recordData, recs))
	default:
		if !j.in.Bounded {
			recs = beam.WindowInto(s, window.NewFixedWindows(j.window), recs)
		}
		texts, dead := decode.String(s, recs)
		beam.ParDo0(s, reportDeadLetter, dead)
		msgs = beam.ParDo(s, countMessage, count.PerWindow(s, texts))
	}
	failed := kinesisio.Write(s, j.output, msgs, j.writeOpts...)
	report.Failures(s, metricsNamespace, failed)
	// With --checkpoint_table, a position is committed once the write acknowledged its
	// records: for count, once their window's counts were written.
	commit.After(s, failed)
	return failed
}

// recordData is a record's payload.
func recordData(r kinesisio.Record) []byte { return r.Data }

// windowCount is the JSON record count mode writes for each value and window. The window
// bounds are RFC 3339 times, absent for the global window.
type windowCount struct {
	Key         string `json:"key"`
	Count       int64  `json:"count"`
	WindowStart string `json:"window_start,omitempty"`
	WindowEnd   string `json:"window_end,omitempty"`
}

// countMessage turns one count into the message written for it, keyed by the counted
// value so that the counts of one value stay in order on one shard.
func countMessage(kc count.KeyCount) (kinesisio.Message, error) {
	wc := windowCount{Key: kc.Key, Count: kc.Count}
	if !kc.WindowEnd.IsZero() {
		wc.WindowStart = kc.WindowStart.Format(time.RFC3339Nano)
		wc.WindowEnd = kc.WindowEnd.Format(time.RFC3339Nano)
	}
	data, err := json.Marshal(wc)
	if err != nil {
		return kinesisio.Message{}, fmt.Errorf("encoding the count of %q: %w", kc.Key, err)
	}
	key := kc.Key
	if key == "" { // Kinesis refuses empty partition keys
		key = "(empty)"
	}
	if len(key) > 256 { // and keys over 256 characters
		key = key[:256]
	}
	return kinesisio.Message{PartitionKey: key, Data: data}, nil
}

// reportDeadLetter logs and counts a record count mode cannot read as text.
func reportDeadLetter(ctx context.Context, d decode.DeadLetter) {
	deadLetters.Inc(ctx, 1)
	log.Warnf(ctx, "kinesis-to-kinesis: skipping record %s/%s/%d: %s", d.Record.ShardID, d.Record.SequenceNumber, d.Record.SubSequenceNumber, d.Error)
}

// printStream prints the user records stream holds on srv, one per line.
func printStream(w io.Writer, srv *kinesistest.Server, stream string) error {
	recs, kinesisRecords, err := embedded.UserRecords(srv, stream)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "stream %s holds %d records in %d Kinesis records:\n", stream, len(recs), kinesisRecords)
	for _, r := range recs {
		fmt.Fprintf(w, "%s key=%s %s\n", r.ShardID, r.PartitionKey, r.Data)
	}
	return nil
}
