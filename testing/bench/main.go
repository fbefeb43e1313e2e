package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
)

func main() {
	if os.Getenv(ServeEnv) == "1" {
		if err := Serve(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	quick := flag.Bool("quick", false, "scale sizes down (50,000 records) for CI")
	rows := flag.String("rows", "", "comma-separated rows to run, 1..8 and 16 and, with --flink, 10, 12..15 and 17 (default all)")
	records := flag.Int("records", 0, "records per read and write (overrides the mode's size)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of each connector pipeline to this path plus \".<pipeline>\"")
	memprofile := flag.String("memprofile", "", "write an allocation profile to this file at the end")
	heapprofile := flag.String("heapprofile", "", "write a heap profile taken at each pipeline's live heap peak to this path plus \".<pipeline>\"")
	verbose := flag.Bool("v", true, "log progress to stderr")
	onFlink := flag.Bool("flink", false, "also run rows 10, 12..15 and 17 on the Flink job server at $BEAMKINESIS_FLINK_ENDPOINT or --endpoint and its cluster at $BEAMKINESIS_FLINK_REST (testing/flink/flink.sh start)")
	queueLatency := flag.Duration("queue_latency", 0, "rows 16 and 17: add this to every queue call the server answers (e.g. 20ms, a network's and the service's time), so that receives wait instead of taking CPU")
	readAhead := flag.Bool("readahead", true, "read with the connector's read-ahead (WithMaxReadAheadBytes' default); false reads WithoutReadAhead, for before and after in one sitting")
	anchors := flag.Bool("anchors", false, "compare with Beam Java KinesisIO instead (testing/anchors; needs java and mvn)")
	flag.Parse()
	readAheadOff = !*readAhead
	beam.Init()
	if *anchors {
		var log io.Writer
		if *verbose {
			log = os.Stderr
		}
		if err := reportAnchors(*quick, log); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}

	cfg := FullConfig()
	mode := "full"
	if *quick {
		cfg, mode = QuickConfig(), "quick"
	}
	if *records > 0 {
		cfg.Records = *records
	}
	cfg.QueueLatency = *queueLatency
	sel, err := parseRows(*rows)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.Rows = sel
	if *onFlink {
		cfg.FlinkEndpoint = *jobopts.Endpoint
		if cfg.FlinkEndpoint == "" {
			cfg.FlinkEndpoint = os.Getenv("BEAMKINESIS_FLINK_ENDPOINT")
		}
		if cfg.FlinkEndpoint == "" {
			fmt.Fprintln(os.Stderr, "bench: --flink needs the job server's endpoint: $BEAMKINESIS_FLINK_ENDPOINT or --endpoint")
			os.Exit(2)
		}
		cfg.FlinkREST = os.Getenv("BEAMKINESIS_FLINK_REST")
	}
	if *verbose {
		cfg.Log = os.Stderr
	}
	peakProfilePrefix = *heapprofile
	if err := report(cfg, mode, *cpuprofile, *memprofile); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseRows reads "1,3,5" into a set.
func parseRows(s string) (map[int]bool, error) {
	if s == "" {
		return nil, nil
	}
	out := map[int]bool{}
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (n > 8 && n != queueRow && !flinkRows[n]) {
			return nil, fmt.Errorf("--rows: %q is not a row number 1..8 or 16 or, with --flink, 10, 12..15 or 17", f)
		}
		out[n] = true
	}
	return out, nil
}

func report(cfg Config, mode, cpuprofile, memprofile string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m := DescribeMachine()
	cpuProfilePrefix = cpuprofile
	if memprofile != "" || peakProfilePrefix != "" {
		runtime.MemProfileRate = 64 << 10
	}
	b := NewBench(cfg)
	rows, err := b.Run(ctx)
	if werr := WriteTable(os.Stdout, m, mode, rows); werr != nil && err == nil {
		err = fmt.Errorf("writing the table: %w", werr)
	}
	if memprofile != "" {
		f, ferr := os.Create(memprofile)
		if ferr != nil {
			return fmt.Errorf("creating the memory profile: %w", ferr)
		}
		defer f.Close()
		if perr := pprof.Lookup("allocs").WriteTo(f, 0); perr != nil && err == nil {
			err = fmt.Errorf("writing the memory profile: %w", perr)
		}
	}
	return err
}
