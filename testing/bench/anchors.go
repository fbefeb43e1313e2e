package main

// The --anchors mode: the same work done by this connector and by Beam Java's KinesisIO
// (testing/anchors/java-kinesisio, on Beam's Java DirectRunner), against one kinesistest
// server in a child process, with throughput, CPU seconds, peak RSS and exactness side by
// side.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// anchorsConfig sizes the --anchors pass.
type anchorsConfig struct {
	Records        int           // records per read stream and messages per write
	Shards         int           // shards of the read and write streams
	ReshardRecords int           // records in each of the split and merge streams
	Timeout        time.Duration // per JVM run; a run past it is stopped and reported incomplete
	ReshardTimeout time.Duration // the same for the reads after a split and a merge
	// JavaRead is the Beam Java read's configuration: arguments for ReadAnchor.java
	// (--experiments, KinesisIO knobs). The default, javaReadArgs, is the fastest of the set-ups
	// tried (see testing/REPORTS.md, "Side by side with Beam Java KinesisIO").
	JavaRead []string
	// ProbeMaxRecords adds Beam Java reads bounded by withMaxNumRecords: with the stream's
	// record count, which never completes (each split is given an equal share, and a shard
	// holding fewer records than its share never finishes; see ReadAnchor.java), and with the
	// largest bound every shard can meet. The first runs until ReshardTimeout.
	ProbeMaxRecords bool
	// Alternatives adds Beam Java reads on the DirectRunner's default unbounded read (the
	// primitive read, which restarts KinesisIO's reader every ~200 records): the plain stream
	// and the split stream.
	Alternatives bool
	// ProjectDir is testing/anchors/java-kinesisio; empty means found from the working
	// directory upwards.
	ProjectDir string
	Log        io.Writer
}

// anchorsQuickConfig is --anchors --quick, for CI.
func anchorsQuickConfig() anchorsConfig {
	return anchorsConfig{Records: 5_000, Shards: 4, ReshardRecords: 3_000, Timeout: 90 * time.Second, ReshardTimeout: 40 * time.Second,
		JavaRead: javaReadArgs()}
}

// anchorsFullConfig is --anchors.
func anchorsFullConfig() anchorsConfig {
	return anchorsConfig{Records: 50_000, Shards: 4, ReshardRecords: 10_000, Timeout: 5 * time.Minute, ReshardTimeout: 2 * time.Minute,
		JavaRead: javaReadArgs(), ProbeMaxRecords: true, Alternatives: true}
}

// javaReadArgs is the Beam Java read's set-up in the table: KinesisIO's defaults, read
// through the splittable-DoFn wrapper of Read.Unbounded (experiment use_sdf_read), which
// keeps each split's reader across the DirectRunner's checkpoints. The DirectRunner's default
// for Read.Unbounded is the primitive read, whose evaluator emits at most 10 records per
// bundle and closes the reader after a bundle with probability 0.05 (Beam's
// UnboundedReadEvaluatorFactory, to exercise checkpoint and resume), so KinesisIO restarts
// its reader about every 200 records: 7–11× slower here, and after a reshard each restart
// can block for 30 s (ShardReadersPool.stop waiting on a reader thread that sleeps in
// waitUntilAllShardRecordsRead).
func javaReadArgs() []string { return []string{"--experiments=use_sdf_read"} }

func (c anchorsConfig) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "anchors: "+format+"\n", args...)
	}
}

// shardSpan is when a shard's first and last records reached the pipeline's counting step,
// in seconds from the run's start.
type shardSpan struct {
	Records int64   `json:"records"`
	First   float64 `json:"first_seconds"`
	Last    float64 `json:"last_seconds"`
}

// anchorRun is one pipeline's figures, from either side.
type anchorRun struct {
	Got      multiset
	Complete bool          // the pipeline finished (the JVM was not stopped at the timeout)
	Wall     time.Duration // the job, submission to completion
	CPU      time.Duration // the whole process's user + system CPU
	PeakRSS  uint64        // the whole process's peak resident set, bytes
	Shards   map[string]shardSpan
	Java     javaStats // Beam Java runs only
}

func (r anchorRun) rate() float64 { return float64(r.Got.Count) / r.Wall.Seconds() }

// anchorRow is one line of the anchors table.
type anchorRow struct {
	Case       string
	Ours, Java anchorRun
	Want       multiset
	Read       bool // a read (exactness of what the pipeline emitted) or a write (of what the stream holds)
	OursNote   string
	JavaNote   string
}

// anchorsResult holds the pass's rows and its set-up facts.
type anchorsResult struct {
	Rows        []anchorRow
	BeamJava    string
	JavaRead    []string // the Beam Java read's arguments in the main rows
	Build       time.Duration
	Built       string
	Records     int
	Shards      int
	Aggregates  int64
	JavaWritten storedStats // what Beam Java's write stored
	OursWritten storedStats
}

// runAnchors runs the --anchors pass.
func runAnchors(ctx context.Context, cfg anchorsConfig) (*anchorsResult, error) {
	j, err := buildJavaAnchor(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a := &anchorsResult{BeamJava: j.version, JavaRead: cfg.JavaRead, Build: j.Build, Built: j.Built, Records: cfg.Records, Shards: cfg.Shards}
	cs, err := startChildServer()
	if err != nil {
		return a, err
	}
	defer cs.Close()
	client := cs.client()
	n := cfg.Records
	want := expected(0, n)
	for _, st := range []string{"plain", "agg"} {
		if err := createStream(ctx, client, st, cfg.Shards); err != nil {
			return a, err
		}
	}
	if err := putPlain(ctx, client, "plain", n); err != nil {
		return a, err
	}
	if err := putAggregated(ctx, client, "agg", n); err != nil {
		return a, err
	}
	var aggStored storedStats
	if _, aggStored, err = streamContents(ctx, client, "agg", 0); err != nil {
		return a, err
	}
	a.Aggregates = aggStored.Records
	javaRead := func(stream string, want multiset, grace, timeout time.Duration, extra ...string) (anchorRun, error) {
		args := append([]string{"--endpoint=" + cs.url, "--stream=" + stream,
			"--records=" + strconv.FormatInt(want.Count, 10), "--grace-ms=" + strconv.FormatInt(grace.Milliseconds(), 10)}, extra...)
		r, err := j.run(ctx, timeout, "ReadAnchor", args...)
		if err == nil {
			cfg.logf("Beam Java read %s %s: %d records in %v, complete %v, %d reader starts, %d blocked closes",
				stream, strings.Join(extra, " "), r.Got.Count, r.Wall.Round(time.Millisecond), r.Complete, r.Java.ReaderStarts, r.Java.StuckCloses)
		}
		return r, err
	}
	readBoth := func(name, stream string, want multiset, grace, timeout time.Duration) (anchorRow, error) {
		row := anchorRow{Case: name, Want: want, Read: true}
		var err error
		if row.Java, err = javaRead(stream, want, grace, timeout, cfg.JavaRead...); err != nil {
			return row, err
		}
		row.JavaNote = readerNote(row.Java)
		row.Ours, err = oursRead(ctx, cs.url, stream)
		if err != nil {
			return row, err
		}
		cfg.logf("ReadBounded %s: %d records in %v", stream, row.Ours.Got.Count, row.Ours.Wall.Round(time.Millisecond))
		return row, nil
	}
	plainCase := fmt.Sprintf("Read, %d shards, %s × 100 B plain records", cfg.Shards, group(int64(n)))
	for _, c := range []struct{ name, stream string }{
		{plainCase, "plain"},
		{fmt.Sprintf("Read, %d shards, %s user records in KPL aggregates", cfg.Shards, group(int64(n))), "agg"},
	} {
		row, err := readBoth(c.name, c.stream, want, 0, cfg.Timeout)
		if err != nil {
			return a, err
		}
		a.Rows = append(a.Rows, row)
	}
	// Enhanced fan-out: Beam Java's withConsumerArn (SubscribeToShard over HTTP/2, h2c on the
	// server's plain port) beside WithEnhancedFanOut.
	efo, err := client.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(fmt.Sprintf("arn:aws:kinesis:us-east-1:%s:stream/plain", kinesistest.AccountID)), ConsumerName: aws.String("beam-java-efo")})
	if err != nil {
		return a, fmt.Errorf("registering Beam Java's consumer: %w", err)
	}
	efoRow := anchorRow{Case: "Read with enhanced fan-out (Beam Java `withConsumerArn`, beamkinesis `WithEnhancedFanOut`), plain stream as above", Want: want, Read: true}
	if efoRow.Java, err = javaRead("plain", want, 0, cfg.Timeout, append(slices.Clone(cfg.JavaRead), "--consumer-arn="+aws.ToString(efo.Consumer.ConsumerARN))...); err != nil {
		return a, err
	}
	// KinesisIO's enhanced fan-out reader does not log the reader starts readerNote counts.
	efoRow.JavaNote = fmt.Sprintf("first record after %.1fs; SubscribeToShard over HTTP/2 (h2c), CBOR", efoRow.Java.Java.First.Seconds())
	if efoRow.Ours, err = oursRead(ctx, cs.url, "plain", kinesisio.WithEnhancedFanOut("beamkinesis-efo")); err != nil {
		return a, err
	}
	cfg.logf("ReadBounded plain with enhanced fan-out: %d records in %v", efoRow.Ours.Got.Count, efoRow.Ours.Wall.Round(time.Millisecond))
	a.Rows = append(a.Rows, efoRow)
	if cfg.Alternatives {
		row := anchorRow{Case: "Alternative: " + plainCase + ", on the DirectRunner's default (primitive) unbounded read", Want: want, Read: true,
			OursNote: "as above"}
		if row.Java, err = javaRead("plain", want, 0, cfg.Timeout); err != nil {
			return a, err
		}
		row.JavaNote = readerNote(row.Java)
		a.Rows = append(a.Rows, row)
	}
	if cfg.ProbeMaxRecords {
		row := anchorRow{Case: fmt.Sprintf("Read bounded by withMaxNumRecords(%s), plain stream as above", group(int64(n))), Want: want, Read: true,
			OursNote: "ReadBounded needs no bound: it stops at the end of every shard"}
		if row.Java, err = javaRead("plain", want, 0, cfg.ReshardTimeout, append([]string{"--bound=max-records"}, cfg.JavaRead...)...); err != nil {
			return a, err
		}
		row.JavaNote = fmt.Sprintf("each of the %d splits (one per shard) must read %s; shards holding fewer never finish; %s", cfg.Shards, group(int64(n/cfg.Shards)), readerNote(row.Java))
		a.Rows = append(a.Rows, row)

		// The largest bound every split can meet: shards × the smallest shard's count; each split
		// then delivers the first share of its shard.
		_, st, err := streamContents(ctx, client, "plain", 0)
		if err != nil {
			return a, err
		}
		least := int64(n)
		for _, c := range st.PerShard {
			least = min(least, c)
		}
		bound := least * int64(len(st.PerShard))
		prefix, _, err := streamContents(ctx, client, "plain", least)
		if err != nil {
			return a, err
		}
		row = anchorRow{Case: fmt.Sprintf("Read bounded by withMaxNumRecords(%s) (%d × the smallest shard's %s records), plain stream as above",
			group(bound), len(st.PerShard), group(least)), Want: prefix, Read: true, OursNote: "as above"}
		if row.Java, err = javaRead("plain", prefix, 0, cfg.ReshardTimeout, append([]string{"--bound=max-records"}, cfg.JavaRead...)...); err != nil {
			return a, err
		}
		row.JavaNote = "the first " + group(least) + " records of each shard; " + readerNote(row.Java)
		a.Rows = append(a.Rows, row)
	}

	// Writes: the same messages, aggregation on, to fresh streams; what each stream holds.
	w := anchorRow{Case: fmt.Sprintf("Write with KPL aggregation, %d shards, %s × 100 B messages, no server limits", cfg.Shards, group(int64(n))), Want: want}
	for _, st := range []string{"jout", "gout"} {
		if err := createStream(ctx, client, st, cfg.Shards); err != nil {
			return a, err
		}
	}
	if w.Java, err = j.run(ctx, cfg.Timeout, "WriteAnchor", "--endpoint="+cs.url, "--stream=jout", "--records="+strconv.Itoa(n)); err != nil {
		return a, err
	}
	if w.Java.Got, a.JavaWritten, err = streamContents(ctx, client, "jout", 0); err != nil {
		return a, err
	}
	cfg.logf("Beam Java write: %v, %d Kinesis records (%d single), %d bundles (largest %d)", w.Java.Wall.Round(time.Millisecond),
		a.JavaWritten.Records, a.JavaWritten.Singles, w.Java.Java.Bundles, w.Java.Java.MaxBundle)
	if w.Ours, err = oursWrite(ctx, cs.url, "gout", n); err != nil {
		return a, err
	}
	if w.Ours.Got, a.OursWritten, err = streamContents(ctx, client, "gout", 0); err != nil {
		return a, err
	}
	cfg.logf("Write: %v, %d Kinesis records", w.Ours.Wall.Round(time.Millisecond), a.OursWritten.Records)
	w.JavaNote = writtenNote(a.JavaWritten, int64(n)) + fmt.Sprintf("; %d input bundles, the largest %s messages", w.Java.Java.Bundles, group(w.Java.Java.MaxBundle))
	w.OursNote = writtenNote(a.OursWritten, int64(n))
	a.Rows = append(a.Rows, w)

	// Resharding: what each read delivers, and in which order, after a split and a merge.
	for _, fill := range []func(context.Context, *kinesis.Client, int) (reshardCase, error){fillSplit, fillMerge} {
		c, err := fill(ctx, client, cfg.ReshardRecords)
		if err != nil {
			return a, fmt.Errorf("filling a reshard stream: %w", err)
		}
		row, err := readBoth("Read after a "+c.name+": "+c.desc, c.name, c.want, 2*time.Second, cfg.ReshardTimeout)
		if err != nil {
			return a, err
		}
		row.OursNote = orderNote(c, row.Ours.Shards)
		row.JavaNote = orderNote(c, row.Java.Shards) + "; " + row.JavaNote
		a.Rows = append(a.Rows, row)
		if cfg.Alternatives && c.name == "split" {
			alt := anchorRow{Case: "Alternative: the read after a split, on the DirectRunner's default (primitive) unbounded read", Want: c.want, Read: true,
				OursNote: "as above"}
			if alt.Java, err = javaRead(c.name, c.want, 2*time.Second, cfg.ReshardTimeout); err != nil {
				return a, err
			}
			alt.JavaNote = orderNote(c, alt.Java.Shards) + "; " + readerNote(alt.Java)
			a.Rows = append(a.Rows, alt)
		}
	}
	return a, nil
}

// reportAnchors runs the --anchors pass and prints its table.
func reportAnchors(quick bool, log io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg, mode := anchorsFullConfig(), "anchors"
	if quick {
		cfg, mode = anchorsQuickConfig(), "anchors, quick"
	}
	cfg.Log = log
	m := DescribeMachine()
	a, err := runAnchors(ctx, cfg)
	if a != nil && len(a.Rows) > 0 {
		if werr := writeAnchorsTable(os.Stdout, m, mode, a); werr != nil && err == nil {
			err = fmt.Errorf("writing the table: %w", werr)
		}
	}
	return err
}
