package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/transforms/decode"
	"github.com/beamkinesis/beamkinesis/transforms/filesink"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Event)(nil)).Elem())
	register.Function1x0(printStaged)
	register.Function1x3(deadLetterLine)
}

// Event is the schema of the staged records, the seed's
// StructType{id string, ts long, v string nullable}. id and ts are required; v may be
// absent or null, and is then nil: null in Parquet and in JSON lines, never "" (an empty
// string stays an empty string).
type Event struct {
	ID string  `json:"id" parquet:"id"`
	TS int64   `json:"ts" parquet:"ts"`
	V  *string `json:"v" parquet:"v,optional"`
}

// Formats of the event files.
const (
	formatParquet = "parquet"
	formatJSONL   = "jsonl"
)

// requiredKeys are the keys a record must have, not null, to be an Event.
var requiredKeys = []string{"id", "ts"}

// embeddedStream is the stream of the embedded mode.
const embeddedStream = "iot-events"

// embeddedRecords are put into the embedded stream: events and the usual ways records go
// wrong.
var embeddedRecords = []string{
	`{"id":"a","ts":1,"v":"x"}`,
	`{"id":"b","ts":2`,                       // truncated
	`{"id":"c","ts":3,"v":"z","extra":true}`, // unknown keys are ignored unless --strict
	`{"ts":4,"v":"w"}`,                       // no id
	`{"id":"e","ts":"yesterday"}`,            // ts is not a number
	"\xff\xfe not text",                      // not UTF-8
	`{"id":"f","ts":6}`,                      // no v: null
	`{"id":"g","ts":7,"v":""}`,               // an empty v stays empty
	`{"id":"h","ts":8,"v":null}`,             // null v: null
}

// config is the command line of kinesis-to-files.
type config struct {
	Stream     string
	StagingDir string
	Format     string
	Shards     int
	Strict     bool
	Kinesis    pipeflags.Kinesis
	S3         pipeflags.S3
	Source     pipeflags.Source
}

func (c *config) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Stream, "stream", "", "Kinesis stream to read (default: an embedded in-process server with sample records)")
	fs.StringVar(&c.StagingDir, "staging_dir", "", "local directory or s3://bucket/prefix for the files: events/ and dead-letters/ are created in it (default kinesis_staging/<stream>)")
	fs.StringVar(&c.Format, "format", formatParquet, "format of the event files: parquet (snappy) or jsonl; dead letters are always JSON lines")
	fs.IntVar(&c.Shards, "shards", 1, "files per window for events (dead letters get one)")
	fs.BoolVar(&c.Strict, "strict", false, "send records with keys that are not in the schema to the dead letters")
	c.Kinesis.Register(fs)
	c.S3.Register(fs)
	c.Source.Register(fs, time.Minute)
}

// environment is what the embedded mode starts with; tests change it.
type environment struct {
	serverOptions []kinesistest.Option
	// seed puts the records of the embedded stream; nil puts embeddedRecords.
	seed func(ctx context.Context, srv *kinesistest.Server) error
	// queueOpts are appended to a queue read's options (e.g. to end it when idle).
	queueOpts []kinesisio.QueueOption
}

// job is a resolved configuration.
type job struct {
	in         pipeflags.Input
	window     time.Duration
	format     string
	eventsDir  string
	deadDir    string
	s3         filesink.S3
	shards     int
	jsonOption decode.JSONOptions
	srv        *kinesistest.Server
}

// stop closes the embedded server, if any.
func (j job) stop() {
	if j.srv != nil {
		j.srv.Close()
	}
}

// prepare resolves cfg into a job. In the embedded mode it starts the server and seeds it.
func prepare(ctx context.Context, cfg config, env environment) (job, error) {
	if cfg.Shards < 1 {
		return job{}, fmt.Errorf("--shards=%d: want at least one file per window", cfg.Shards)
	}
	if cfg.Format != formatParquet && cfg.Format != formatJSONL {
		return job{}, fmt.Errorf("--format=%q: want parquet or jsonl", cfg.Format)
	}
	toS3 := strings.HasPrefix(cfg.StagingDir, "s3://")
	if strings.Contains(cfg.StagingDir, "://") && !toS3 {
		return job{}, fmt.Errorf("--staging_dir=%q: want a local directory or s3://bucket/prefix", cfg.StagingDir)
	}
	if bucket, _, _ := strings.Cut(strings.TrimPrefix(cfg.StagingDir, "s3://"), "/"); toS3 && bucket == "" {
		return job{}, fmt.Errorf("--staging_dir=%q names no bucket; want s3://bucket/prefix", cfg.StagingDir)
	}
	if (cfg.S3.Endpoint != "" || cfg.S3.Region != "") && !toS3 {
		return job{}, errors.New("--s3_endpoint and --s3_region need an s3:// --staging_dir")
	}
	var s3cfg filesink.S3 // shipped to the workers only when they write to S3
	if toS3 {
		c, err := cfg.S3.Config(cfg.Kinesis, os.Getenv)
		if err != nil {
			return job{}, err
		}
		s3cfg = c
	}
	j := job{window: cfg.Source.Window, shards: cfg.Shards, format: cfg.Format, s3: s3cfg,
		jsonOption: decode.JSONOptions{DisallowUnknownFields: cfg.Strict, Required: requiredKeys}}
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
			seed = func(ctx context.Context, srv *kinesistest.Server) error {
				return embedded.PutStrings(ctx, srv.Client(), embeddedStream, "1", embeddedRecords...)
			}
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
	dir := cfg.StagingDir
	if dir == "" {
		dir = filepath.Join("kinesis_staging", stagingName(j.in))
	}
	if toS3 {
		dir = strings.TrimSuffix(dir, "/")
		j.eventsDir, j.deadDir = dir+"/events", dir+"/dead-letters"
	} else {
		j.eventsDir, j.deadDir = filepath.Join(dir, "events"), filepath.Join(dir, "dead-letters")
	}
	return j, nil
}

// build adds the pipeline to s and returns the paths of the event files and of the
// dead-letter files it writes, two PCollection<string>.
func (j job) build(s beam.Scope) (eventFiles, deadLetterFiles beam.PCollection) {
	recs, commit := j.in.Read(s)
	recs = beam.WindowInto(s, window.NewFixedWindows(j.window), recs)
	// Files are per window and Kinesis shard: a restart from the table resumes each shard on
	// its own at the first record of a window not written, and then rewrites that shard's
	// files of the window with the same records, so each event is staged exactly once. A
	// queue's records are in one "shard" (pipeflags.QueueShardID) and their windows are of
	// their receive time: the records a queue delivers again after a restart are received
	// after every window the killed job wrote, so they never overwrite its files.
	events, dead := decode.JSONByShard(s, recs, reflect.TypeOf(Event{}), j.jsonOption)
	eventsCfg := filesink.Config{Dir: j.eventsDir, Shards: j.shards, S3: j.s3}
	if j.format == formatParquet {
		eventFiles = filesink.WriteParquetPerKey(s.Scope("Events"), events, filesink.ParquetConfig{Config: eventsCfg})
	} else {
		eventFiles = filesink.WritePerKey(s.Scope("Events"), beam.ParDo(s, filesink.EncodeJSONValue, events), eventsCfg)
	}
	deadLetterFiles = filesink.WritePerKey(s.Scope("DeadLetters"), beam.ParDo(s, deadLetterLine, dead), filesink.Config{Dir: j.deadDir, S3: j.s3})
	// With --checkpoint_table, a position is committed once both sinks wrote its window.
	commit.After(s, eventFiles, deadLetterFiles)
	return eventFiles, deadLetterFiles
}

// stagingName is the directory under kinesis_staging of in's default staging dir: the
// stream's name, or the queue's id.
func stagingName(in pipeflags.Input) string {
	if in.Queue != "" {
		return "queue-" + in.Queue[strings.LastIndex(in.Queue, "/")+1:]
	}
	return in.Stream
}

// deadLetterLine is a dead letter's JSON line keyed by the shard of its record.
func deadLetterLine(d decode.DeadLetter) (string, string, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return "", "", fmt.Errorf("encoding the dead letter of %s/%s: %w", d.Record.ShardID, d.Record.SequenceNumber, err)
	}
	return d.Record.ShardID, string(b), nil
}

// printStaged reports a file written.
func printStaged(path string) {
	fmt.Println("staged", path)
}
