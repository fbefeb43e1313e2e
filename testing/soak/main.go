// Command soak runs a streaming kinesis-to-kinesis job for a while against the project's
// Kinesis server under a chaos schedule — resharding, throttling, 5xx, dropped connections,
// expired iterators and, with enhanced fan-out, subscription resets — while a producer
// writes numbered messages at a steady rate. At the end it reads both streams and prints a
// ledger: produced, stored in the input, delivered, lost, duplicated, per-key order, latency,
// the connector's throttles and retries, and the process's memory over time. It exits 1 when
// any message was lost, and 2 on a harness error.
//
// Lost means stored in the input stream and never delivered: the ledger owes the output only
// what the read promised. On Prism the read's window (WithMaxReadTime) is --duration plus
// --read_tail from the read's start, which follows the producer's; the producer stops
// starting batches at --duration and stops resending half the tail later (its hard stop), so
// every record it stored arrived inside the window. Entries it gave up at the hard stop are
// counted as "not stored"; an input record that arrived after the window's earliest end is a
// harness error.
//
//	go run ./testing/soak                          # 10 minutes on Prism, polling
//	go run ./testing/soak --duration=90s --efo     # what CI runs, with enhanced fan-out too
//
// Beam's flags choose the runner. --runner=flink runs the job on the standalone Flink
// cluster of testing/flink (the lines `testing/flink/flink.sh start` prints, exported, name
// its job server, REST API and state directory) with its workers in this process
// (LOOPBACK, where they reach the in-process server), --parallelism=2 and a checkpoint a
// second; the producer starts once the job runs. The chaos then also kills TaskManager 1
// with kill -9 and starts a new one (--tm_kill_at), and stops the job with a savepoint and
// submits it again from it (--savepoint_at). After the producer's end the soak waits until
// the output holds every message (--drain_timeout) and cancels the job. The ledger names
// the cause of each duplicate: the restart (kill, savepoint, or an unplanned one from
// Flink's exception history) between the message's first copy and the duplicate, if any.
//
//	eval "$(testing/flink/flink.sh start | sed 's/^/export /')"
//	go run ./testing/soak --runner=flink --duration=10m
//	testing/flink/flink.sh stop
//
// --server=process runs the server as testing/cmd/kinesis-server in a child process, so
// that the memory report (live heap after GC, goroutines, sockets every --memory_every) is
// the job's alone, and the server's is reported apart. --outage takes the service away for
// --outage_for in the middle of the run (outage.go); --checkpoint_table reads with a
// checkpoint table on a dynalite of the soak's own (dynamo.go).
//
//	go run ./testing/soak --server=process --duration=30m --memory_csv=mem.csv --heap_profiles=prof
//
// --queue reads the input through a Kinesis queue instead, the job in a child process
// killed and started again every --queue_kill_every, under faults of the queue operations
// (queue.go):
//
//	go run ./testing/soak --queue --duration=60s --queue_kill_every=20s
//	go run ./testing/soak --server=process --duration=4m --outage=refuse --outage_at=1m --outage_for=2m --write_retries=200
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// dyn is the checkpoint table's DynamoDB with --checkpoint_table, else nil.
var dyn *dynamo

func init() {
	register.Function1x1(toMessage)
	register.Function2x0(countFailed)
	beam.RegisterType(reflect.TypeOf((*kinesisio.FailedMessage)(nil)).Elem())
}

var (
	duration    = flag.Duration("duration", 10*time.Minute, "how long the producer writes; the job reads what arrived within this time")
	rate        = flag.Int("rate", 200, "messages per second")
	keys        = flag.Int("keys", 20, "partition keys; each key's messages carry increasing sequence numbers")
	shards      = flag.Int("shards", 4, "shards of the input stream at the start")
	efo         = flag.Bool("efo", false, "read with enhanced fan-out (SubscribeToShard) instead of polling")
	pollEvery   = flag.Duration("poll_interval", 0, "the read's WithPollInterval (0: the connector's default)")
	reshardEach = flag.Duration("reshard_every", 15*time.Second, "split, merge or UpdateShardCount the input stream this often (0: never)")
	faultRate   = flag.Float64("fault_rate", 0.02, "share of requests answered with 5xx, and of requests whose connection is dropped")
	throttle    = flag.Float64("throttle_rate", 0.05, "share of GetRecords calls and PutRecords entries throttled")
	expireRate  = flag.Float64("expire_rate", 0.01, "share of GetRecords calls answered with ExpiredIteratorException")
	dropEvents  = flag.Float64("subscription_drop_rate", 0.02, "share of SubscribeToShard events before which the connection is reset (with --efo)")
	seed        = flag.Int64("seed", 1, "seed of the fault injection")
	readTail    = flag.Duration("read_tail", 5*time.Second, "on Prism, how much longer than --duration the read's window is; the producer stops resending half of it after its end, so every record it stored arrived inside the window")
	endDelay    = flag.Duration("producer_end_delay", 0, "hold back the producer's last batch this long, as a producer slowed at its end (the harness's own test)")
	serverKind  = flag.String("server", "inprocess", "where the Kinesis server runs: inprocess, or process (testing/cmd/kinesis-server as a child process, so that this process's memory is the job's alone and the server's is reported apart)")
	writeRetry  = flag.Int("write_retries", 20, "the write's WithRetries count (50 ms to 1 s apart, about 1 s each once backed off); with --outage, enough to cover it, or the write puts its messages on the failed output, which the ledger counts as lost")
	serverBin   = flag.String("server_bin", "", "with --server=process: a kinesis-server binary to run (default: go build it)")
)

func main() {
	flag.Parse()
	beam.Init()
	// An interrupt ends the run through its context, so that the server's child process and
	// the Flink job are stopped on the way out instead of left running.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *queueJob {
		if err := runQueueJob(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "soak: queue job:", err)
			os.Exit(2)
		}
		return
	}
	run := run
	if *queueMode {
		run = runQueueSoak
	}
	l, err := run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		if l != nil && l.lost > 0 {
			os.Exit(1)
		}
		os.Exit(2)
	}
	if l.late > 0 {
		fmt.Fprintf(os.Stderr, "soak: %d input records arrived after the read's earliest end: the producer overran its hard stop, so the ledger cannot tell what the read owed\n", l.late)
		os.Exit(2)
	}
	if l.lost > 0 {
		os.Exit(1)
	}
}

// run starts the server, the producer, the chaos and the job, prints the ledger and
// returns it.
func run(ctx context.Context) (*ledger, error) {
	srv, err := startService(ctx, *serverKind)
	if err != nil {
		return nil, err
	}
	defer srv.Close() //nolint:errcheck // the ledger has read what it needs
	if err := srv.CreateStream("soak-in", *shards); err != nil {
		return nil, err
	}
	if err := srv.CreateStream("soak-out", 2); err != nil {
		return nil, err
	}
	if *checkpointTable {
		if dyn, err = startDynamo(); err != nil {
			return nil, err
		}
		defer dyn.close() //nolint:errcheck // the ledger has read what it needs
	}
	mem, err := startMemorySampler(srv, *memEvery)
	if err != nil {
		return nil, err
	}
	var (
		started  time.Time
		prod     *producer
		chaos    *chaos
		counters map[string]int64
		events   []event
		onFlink  *flinkReport
		down     *outage
	)
	// load starts the producer, the chaos and the outage.
	load := func() (*producer, time.Time, error) {
		started = time.Now()
		end := started.Add(*duration)
		prod = startProducer(ctx, srv, "soak-in", *rate, *keys, producerTimes{end: end, hardStop: end.Add(*readTail / 2), lastDelay: *endDelay})
		go func() { prod.wait(); mem.freeze() }() // the memory of the job under load, not of the drain and the ledger
		var err error
		if chaos, err = startChaos(srv, "soak-in", *reshardEach, *duration); err != nil {
			return prod, started, err
		}
		down, err = startOutage(srv, started, chaosFaults())
		return prod, started, err
	}
	if flinkrunner.IsFlink(*runners.Runner) {
		// The load starts once the job runs: a submission to Flink takes a while, and the
		// kill and the savepoint are to hit a job that is busy.
		onFlink, err = runOnFlink(ctx, srv, func() *beam.Pipeline { return soakPipeline(srv, false) }, load)
		if onFlink != nil {
			counters, events = onFlink.counters, onFlink.events
		}
		if prod == nil || chaos == nil {
			return nil, fmt.Errorf("running the job on Flink: %w", err)
		}
	} else {
		if _, _, err := load(); err != nil {
			return nil, err
		}
		var res beam.PipelineResult
		res, err = flinkrunner.Run(ctx, soakPipeline(srv, true))
		if res != nil {
			counters = jobCounters(res)
		}
	}
	downReport := down.wait()
	if cerr := chaos.stop(); cerr != nil && err == nil {
		err = cerr
	}
	produced := prod.wait()
	if err != nil {
		// The ledger still says what the failed job left undelivered.
		fmt.Fprintf(os.Stderr, "soak: the job failed: %v\n", err)
		err = fmt.Errorf("running the job: %w", err)
	}
	streams := ledgerStreams{in: "soak-in", out: "soak-out"}
	if onFlink == nil {
		// The read started after the producer, so it cannot have ended before this.
		streams.owedBefore = started.Add(*duration + *readTail)
	}
	l, lerr := newLedger(srv, streams, produced, events)
	if lerr != nil {
		return nil, errors.Join(err, lerr)
	}
	l.elapsed, l.chaos, l.memory, l.counters, l.flink = time.Since(started), chaos.summary(), mem.stop(), counters, onFlink
	l.outage = downReport.recovery(srv)
	l.print(os.Stdout, *efo)
	return l, err
}

// soakPipeline is the job: read the input stream from its start, and write each record
// to the output stream under its own partition key. With ends, the read ends --duration
// plus --read_tail after it starts (on Flink the soak cancels the job instead).
func soakPipeline(srv service, ends bool) *beam.Pipeline {
	conn := []kinesisio.ClientOption{
		kinesisio.WithEndpoint(srv.URL()), kinesisio.WithRegion(kinesistest.Region), kinesisio.WithStaticCredentials("soak", "soak"),
	}
	readOpts := []kinesisio.ReadOption{kinesisio.WithStartingPosition(kinesisio.TrimHorizon()),
		kinesisio.WithRetries(20, 50*time.Millisecond, time.Second)}
	writeOpts := []kinesisio.WriteOption{kinesisio.WithRetries(*writeRetry, 50*time.Millisecond, time.Second)}
	for _, o := range conn {
		readOpts, writeOpts = append(readOpts, o), append(writeOpts, o)
	}
	if ends {
		readOpts = append(readOpts, kinesisio.WithMaxReadTime(*duration+*readTail))
	}
	// Under enhanced fan-out without a table the poll interval does nothing, and the read
	// refuses it.
	if *pollEvery > 0 && (!*efo || dyn != nil) {
		readOpts = append(readOpts, kinesisio.WithPollInterval(*pollEvery))
	}
	if *efo {
		readOpts = append(readOpts, kinesisio.WithEnhancedFanOut("soak"))
	}
	if dyn != nil {
		readOpts = append(readOpts, kinesisio.WithCheckpointTable("soak"), kinesisio.WithCheckpointTableEndpoint(dyn.url()))
	}
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.Read(s, "soak-in", readOpts...)
	failed := kinesisio.Write(s, "soak-out", beam.ParDo(s, toMessage, recs), writeOpts...)
	beam.ParDo0(s, countFailed, failed)
	return p
}

// toMessage writes a record on under its own partition key, so that each key's order can
// be checked in the output.
func toMessage(r kinesisio.Record) kinesisio.Message {
	return kinesisio.Message{PartitionKey: r.PartitionKey, Data: r.Data}
}

var failedMessages = beam.NewCounter("soak", "failed_messages")

// countFailed counts the messages the write gave up on.
func countFailed(ctx context.Context, _ kinesisio.FailedMessage) { failedMessages.Inc(ctx, 1) }

// jobCounters returns the job's counters by name.
func jobCounters(res beam.PipelineResult) map[string]int64 {
	out := map[string]int64{}
	for _, c := range res.Metrics().AllMetrics().Counters() {
		out[c.Namespace()+"/"+c.Name()] += c.Committed
	}
	return out
}
