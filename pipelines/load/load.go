package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/report"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.DoFn2x0[int64, func(kinesisio.Message)](&generateFn{})
	register.DoFn1x1[int64, int64](&tickStartFn{})
	register.Emitter1[kinesisio.Message]()
}

// Record formats, the values of --format.
const (
	formatText = "text"
	formatJSON = "json"
)

// embeddedStream is the stream of the embedded mode.
const embeddedStream = "load"

// metricsNamespace is the namespace of the pipeline's metrics.
const metricsNamespace = "pipelines.load"

// chunkSize is how many records one element of a bounded load generates.
const chunkSize = 1000

// tickInterval is how often a rate-limited load emits a batch of records; slower rates
// emit one record per tick.
const tickInterval = 100 * time.Millisecond

// config is the command line of load.
type config struct {
	Stream      string
	Rate        float64
	Size        int
	Count       int64
	Keys        int
	Format      string
	Aggregation bool
	Shards      int
	Kinesis     pipeflags.Kinesis
	// WarmMiBps, when positive, warms the stream to that many MiB/s of write throughput
	// before the load (warm.go), waiting at most WarmTimeout.
	WarmMiBps   int
	WarmTimeout time.Duration
}

func (c *config) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Stream, "stream", "", "Kinesis stream to write (default: a stream \"load\" on an embedded in-process server)")
	fs.Float64Var(&c.Rate, "rate", 0, "records per second (0: as fast as the stream accepts them)")
	fs.IntVar(&c.Size, "size", 100, "bytes of data per record")
	fs.Int64Var(&c.Count, "count", 10000, "records to write (0 with --rate: write until stopped)")
	fs.IntVar(&c.Keys, "keys", 100, "distinct partition keys, used round-robin (0: a random key per record)")
	fs.StringVar(&c.Format, "format", formatText, "text: \"record <n> \" padded with letters; json: {\"id\":\"<n>\",\"ts\":<ms>,\"v\":<padding>}")
	fs.BoolVar(&c.Aggregation, "aggregation", true, "pack records into KPL aggregates")
	fs.IntVar(&c.Shards, "shards", 2, "shards of the embedded stream")
	fs.IntVar(&c.WarmMiBps, "warm_throughput_mibps", 0, "before writing, set the stream's warm throughput to this many MiB/s of writes (UpdateStreamWarmThroughput) and wait until the stream is ACTIVE and that warm, for a backfill at full speed; "+
		"only for ON_DEMAND streams of an account with the On-demand Advantage minimum throughput billing commitment (UpdateAccountSettings). COSTS MONEY: warm throughput is billed, "+
		"and so is the commitment, for at least 24 hours once on; the setting stays after the load (0: leave the stream as it is)")
	fs.DurationVar(&c.WarmTimeout, "warm_throughput_timeout", 15*time.Minute, "how long --warm_throughput_mibps waits for the stream to be warm before failing without writing")
	c.Kinesis.Register(fs)
}

// environment is what tests change: the options of the embedded server and of the client
// of --warm_throughput_mibps.
type environment struct {
	serverOptions     []kinesistest.Option
	warmClientOptions []func(*kinesis.Options)
}

// embeddedWarmDelay is how long the embedded stream stays UPDATING after a warm-throughput
// update, so that the demo waits as a run against the service does (for minutes there).
const embeddedWarmDelay = 500 * time.Millisecond

// job is a resolved configuration.
type job struct {
	stream string
	opts   []kinesisio.WriteOption
	warm   *warmup // nil: none
	gen    generateFn
	count  int64
	rate   float64
	srv    *kinesistest.Server
}

// stop closes the embedded server, if any.
func (j job) stop() {
	if j.srv != nil {
		j.srv.Close()
	}
}

// prepare resolves cfg into a job, starting the embedded server when no stream is given.
func prepare(cfg config, env environment) (job, error) {
	switch {
	case cfg.Rate < 0:
		return job{}, fmt.Errorf("--rate=%v must not be negative", cfg.Rate)
	case cfg.Size < 1 || cfg.Size > 1<<20:
		return job{}, fmt.Errorf("--size=%d is outside 1..1048576 (a record's data limit)", cfg.Size)
	case cfg.Count < 0 || (cfg.Count == 0 && cfg.Rate == 0):
		return job{}, fmt.Errorf("--count=%d: want a positive count (or 0 with a --rate to write until stopped)", cfg.Count)
	case cfg.Keys < 0:
		return job{}, fmt.Errorf("--keys=%d must not be negative", cfg.Keys)
	case cfg.Format != formatText && cfg.Format != formatJSON:
		return job{}, fmt.Errorf("--format=%q: want %s or %s", cfg.Format, formatText, formatJSON)
	case cfg.Stream == "" && cfg.Kinesis.Endpoint != "":
		return job{}, errors.New("--kinesis_endpoint needs --stream, the stream to write there")
	case cfg.WarmMiBps < 0 || cfg.WarmMiBps > math.MaxInt32:
		return job{}, fmt.Errorf("--warm_throughput_mibps=%d: want MiB/s of write throughput, 0 for none", cfg.WarmMiBps)
	case cfg.WarmMiBps > 0 && cfg.WarmTimeout <= 0:
		return job{}, fmt.Errorf("--warm_throughput_timeout=%v must be positive", cfg.WarmTimeout)
	}
	j := job{stream: cfg.Stream, count: cfg.Count, rate: cfg.Rate,
		gen: generateFn{Size: cfg.Size, Count: cfg.Count, Keys: cfg.Keys, JSON: cfg.Format == formatJSON, PerElement: chunkSize}}
	ctx := context.Background()
	var warmClient *kinesis.Client
	if cfg.Stream == "" {
		setup := embedded.Setup{Streams: []string{embeddedStream}, Shards: cfg.Shards, ServerOptions: env.serverOptions}
		if cfg.WarmMiBps > 0 {
			// Warm throughput needs what costs money on AWS: an ON_DEMAND stream and the
			// account's commitment; the embedded server has both for free.
			setup.OnDemand = true
			setup.ServerOptions = append(setup.ServerOptions[:len(setup.ServerOptions):len(setup.ServerOptions)], kinesistest.WithTransitionDelay(embeddedWarmDelay))
		}
		srv, err := embedded.Launch(ctx, setup)
		if err != nil {
			return job{}, err
		}
		j.srv, j.stream, j.opts = srv, embeddedStream, pipeflags.WriteOptions(embedded.Options(srv))
		if cfg.WarmMiBps > 0 {
			if err := enableCommitment(ctx, srv); err != nil {
				srv.Close()
				return job{}, fmt.Errorf("turning on the embedded account's billing commitment: %w", err)
			}
			warmClient = srv.Client(env.warmClientOptions...)
		}
	} else {
		client, err := cfg.Kinesis.Options()
		if err != nil {
			return job{}, err
		}
		j.opts = pipeflags.WriteOptions(client)
		if cfg.WarmMiBps > 0 {
			settings, err := cfg.Kinesis.Settings(os.Getenv)
			if err != nil {
				return job{}, err
			}
			if warmClient, err = newWarmClient(ctx, settings, cfg.Stream, env.warmClientOptions...); err != nil {
				return job{}, err
			}
		}
	}
	if warmClient != nil {
		j.warm = &warmup{client: warmClient, stream: j.stream, mibps: int32(cfg.WarmMiBps), timeout: cfg.WarmTimeout}
	}
	if cfg.Aggregation {
		j.opts = append(j.opts, kinesisio.WithAggregation())
	} else {
		j.opts = append(j.opts, kinesisio.WithoutAggregation())
	}
	return j, nil
}

// enableCommitment turns on the minimum throughput billing commitment of the embedded
// server's account.
func enableCommitment(ctx context.Context, srv *kinesistest.Server) error {
	_, err := srv.Client().UpdateAccountSettings(ctx, &kinesis.UpdateAccountSettingsInput{
		MinimumThroughputBillingCommitment: &types.MinimumThroughputBillingCommitmentInput{Status: types.MinimumThroughputBillingCommitmentInputStatusEnabled},
	})
	return err
}

// warmUp warms the stream's throughput when the job asks for it, before the load starts.
func (j job) warmUp(ctx context.Context, logf func(format string, args ...any)) error {
	if j.warm == nil {
		return nil
	}
	if j.srv != nil {
		logf("warm throughput: the embedded stream %s is ON_DEMAND and the account's billing commitment is on, free here; on AWS both are billed", j.stream)
	}
	if err := j.warm.run(ctx, logf); err != nil {
		return fmt.Errorf("%w; the load did not start", err)
	}
	return nil
}

// submitsNoJob reports whether Beam's flags ask for a run that submits no job, which must
// not warm a stream since warming is billed: --runner=vet, or --runner=dataflow with
// --dry_run.
func submitsNoJob() bool {
	switch strings.ToLower(*runners.Runner) {
	case "vet":
		return true
	case "dataflow", "dataflowrunner":
		f := flag.Lookup("dry_run")
		return f != nil && f.Value.String() == "true"
	}
	return false
}

// build adds the load to s, starting its clock at now for a rate-limited load, and returns
// the failed messages after reporting them.
func (j job) build(s beam.Scope, now time.Time) beam.PCollection {
	var elements beam.PCollection
	gen := j.gen
	if j.rate == 0 {
		// Bounded: one element per chunk of record numbers, spread over workers.
		var starts []int64
		for i := int64(0); i < j.count; i += chunkSize {
			starts = append(starts, i)
		}
		elements = beam.Reshuffle(s, beam.CreateList(s, starts))
	} else {
		interval, perTick := ticks(j.rate)
		gen.PerElement = perTick
		end := now.Add(100 * 365 * 24 * time.Hour) // until stopped
		if j.count > 0 {
			n := (j.count + perTick - 1) / perTick
			end = now.Add(time.Duration(n) * interval)
		}
		seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(now, end, interval)))
		elements = beam.ParDo(s, &tickStartFn{PerTick: perTick}, seq)
	}
	msgs := beam.ParDo(s, &gen, elements)
	failed := kinesisio.Write(s, j.stream, msgs, j.opts...)
	report.Failures(s, metricsNamespace, failed)
	return failed
}

// ticks returns how often a load at rate records a second emits, and how many records
// each time.
func ticks(rate float64) (time.Duration, int64) {
	if per := int64(rate * tickInterval.Seconds()); per >= 1 {
		return tickInterval, per
	}
	return time.Duration(float64(time.Second) / rate).Truncate(time.Millisecond), 1
}

// tickStartFn turns a tick number into the number of the tick's first record.
type tickStartFn struct {
	PerTick int64
}

func (fn *tickStartFn) ProcessElement(tick int64) int64 { return tick * fn.PerTick }

// generateFn generates the records numbered from an element's value: PerElement of them,
// or fewer at the end of Count (no end when Count is 0).
type generateFn struct {
	Size       int
	Count      int64
	Keys       int
	JSON       bool
	PerElement int64
}

func (fn *generateFn) ProcessElement(first int64, emit func(kinesisio.Message)) {
	last := first + fn.PerElement
	if fn.Count > 0 {
		last = min(last, fn.Count)
	}
	for i := first; i < last; i++ {
		emit(kinesisio.Message{PartitionKey: partitionKey(i, fn.Keys), Data: payload(i, fn.Size, fn.JSON)})
	}
}

// partitionKey is record i's key: round-robin over keys keys, or random when keys is 0.
func partitionKey(i int64, keys int) string {
	if keys == 0 {
		return strconv.FormatUint(rand.Uint64(), 10)
	}
	return "key-" + strconv.FormatInt(i%int64(keys), 10)
}

// padding is what records are padded with.
const padding = "abcdefghijklmnopqrstuvwxyz"

// payload is record i's data, size bytes long: "record <i> " then letters (cut to size
// when shorter), or with asJSON a {"id","ts","v"} object whose v pads it to size where
// size allows.
func payload(i int64, size int, asJSON bool) []byte {
	if !asJSON {
		head := "record " + strconv.FormatInt(i, 10) + " "
		return []byte(pad(head, size))
	}
	id := strconv.FormatInt(i, 10)
	ts := time.Now().UnixMilli()
	b, _ := json.Marshal(struct {
		ID string `json:"id"`
		TS int64  `json:"ts"`
		V  string `json:"v"`
	}{id, ts, ""})
	v := pad("", size-len(b))
	b, _ = json.Marshal(struct {
		ID string `json:"id"`
		TS int64  `json:"ts"`
		V  string `json:"v"`
	}{id, ts, v})
	return b
}

// pad extends s with letters to size bytes, or cuts it to size.
func pad(s string, size int) string {
	if size <= len(s) {
		return s[:max(size, 0)]
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(s)
	for b.Len() < size {
		b.WriteString(padding[:min(len(padding), size-b.Len())])
	}
	return b.String()
}

// run writes the load cfg describes on the runner Beam's flags select and prints a summary.
func run(ctx context.Context, cfg config) error {
	j, err := prepare(cfg, environment{})
	if err != nil {
		return err
	}
	defer j.stop()
	logf := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	if j.warm != nil && submitsNoJob() {
		logf("warm throughput: not set, --runner=%s submits no job", *runners.Runner)
	} else if err := j.warmUp(ctx, logf); err != nil {
		return err
	}
	p, s := beam.NewPipelineWithRoot()
	start := time.Now()
	j.build(s, start)
	res, err := flinkrunner.Run(ctx, p)
	if err != nil {
		return fmt.Errorf("running the pipeline: %w", err)
	}
	if res == nil { // --runner=vet checks the graph and runs nothing; so does a Dataflow --dry_run
		return nil
	}
	elapsed := time.Since(start)
	fmt.Printf("wrote %d records of %d bytes to %s in %v (%.0f records/s); %d failed\n",
		cfg.Count, cfg.Size, j.stream, elapsed.Round(time.Millisecond), float64(cfg.Count)/elapsed.Seconds(), report.FailedCount(res, metricsNamespace))
	if j.srv != nil {
		recs, kinesisRecords, err := embedded.UserRecords(j.srv, j.stream)
		if err != nil {
			return err
		}
		perShard := map[string]int{}
		for _, r := range recs {
			perShard[r.ShardID]++
		}
		fmt.Fprintf(os.Stdout, "stream %s holds %d records in %d Kinesis records; per shard: %v\n", j.stream, len(recs), kinesisRecords, perShard)
	}
	return nil
}
