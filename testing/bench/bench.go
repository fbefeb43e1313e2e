// Package main is the beamkinesis performance report: it measures the connector against
// baselines measured in the same run, on the in-process Kinesis server
// (testing/kinesistest) and the in-process Prism runner, and prints one markdown table.
//
//	go run ./testing/bench            # full sizes (1,000,000 records per read)
//	go run ./testing/bench --quick    # CI sizes (50,000 records), under a minute
//	go run ./testing/bench --rows 1,3 --cpuprofile cpu.out
//
// Flags: --quick (CI sizes), --rows (a comma-separated subset of 1..8 and 16, and 10, 12..15 and 17 with --flink), --records (override
// the read and write size), --cpuprofile PREFIX (one CPU profile per connector pipeline, in
// PREFIX.<pipeline>, without the data set-up and baselines; read with go tool pprof -top),
// --memprofile FILE (allocation profile at the end), --heapprofile PREFIX (a heap profile
// taken at each read's and write's live heap peak, in PREFIX.<pipeline>; read with go tool
// pprof -sample_index=inuse_space), -v=false (no progress on stderr),
// --anchors (instead of the rows: the same work done by Beam Java's KinesisIO, built from
// testing/anchors/java-kinesisio with Maven, side by side with this connector; see anchors.go),
// --flink (also rows 10, 12 to 15 and 17, on the Flink job server at $BEAMKINESIS_FLINK_ENDPOINT and the
// cluster behind it at $BEAMKINESIS_FLINK_REST).
// The table goes to stdout; progress and Prism's logs to stderr.
//
// Every figure is a ratio against a baseline taken in the same process at the same time,
// because the machines this runs on are shared and noisy: absolute rates are printed for
// context, the ratios are what to compare between runs.
//
// Rows:
//  1. Read: ReadBounded on Prism against a plain aws-sdk-go-v2 GetRecords loop (one
//     goroutine per shard) reading the same stream from the same server.
//  2. Deaggregating read: user records/s reading KPL aggregates against reading the same
//     user records stored plain, both with the server's per-shard read limits on (paced.go),
//     each also against the service's 2 MiB/s per shard.
//  3. Write with the server's per-shard limits on: share of the 1 MiB/s shard byte limit
//     reached with aggregation, and the speed-up over aggregation off; throttled entries.
//  4. KPL codec: aggregate and deaggregate user records/s per CPU-second and allocations per
//     record, against awslabs' aws-kinesis-agg on node on the same vectors when installed.
//  5. Memory: peak heap above the idle process while reading and while writing, against the
//     records' raw size.
//  6. Latency: put → emitted p50 and p99 of a streaming Read with default options, against
//     a plain GetRecords loop polling at the same interval.
//  7. Idle shards: API calls and CPU per idle shard-second against a plain loop.
//  8. ReadBounded over many shards: wall time, memory and calls per shard.
//  10. With --flink only: ReadBounded on the standalone Flink cluster with --parallelism
//     equal to the shard count, against the GetRecords loop of row 1 (flink.go).
//  12. With --flink only: the same read beside Flink's own FlinkKinesisConsumer
//     (flink-connector-kinesis 4.3.0-1.19 on Flink 1.19, 1.16.3 on Flink 1.16, in the job of
//     testing/anchors/flink-kinesis, built by testing/deps/deps.sh flinkkinesis) on the same
//     cluster and server: 12a with the
//     consumer's defaults, 12b without its 200 ms between GetRecords calls (flinkrows.go).
//     (Rows 9 and 11 of testing/REPORTS.md come from go test -bench, not from this program.)
//  13. With --flink only: 8 shards at parallelism 1 and 2, both connectors: the speed-up.
//  14. With --flink only: latency put → seen, our streaming Read and FlinkKinesisConsumer
//     reading one producer's records at the same time (flinklatency.go).
//  17. With --flink only: ReadQueue on the standalone Flink cluster at parallelism 1 (17a)
//     and 2 (17b) against row 16's SDK loop on the same server, and the speed-up from 1 to
//     2 (queueflink.go).
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Config says what to measure and how big.
type Config struct {
	// Rows to run, by number (1..8); empty means all.
	Rows map[int]bool
	// Records is the number of 100-byte records read in rows 1, 2 and 5 and written in row 5.
	Records int
	// Shards is the number of shards of the read streams.
	Shards int
	// DeaggShards is the number of shards of row 2's streams: so few that each holds more
	// than 2 MiB of aggregates, for the row to meet the service's wait after a large answer.
	// DeaggRecords, when positive, caps row 2's user records below Records: its reads are
	// paced at 2 MiB/s per shard, so their time grows with the size.
	DeaggShards, DeaggRecords int
	// WriteShards and WriteSeconds size row 3: steady-state seconds per case after the
	// one-second burst the token buckets allow.
	WriteShards, WriteSeconds int
	// CodecRecords is the number of user records aggregated and deaggregated per codec run.
	CodecRecords int
	// LatencyTime and LatencyRate size row 6: how long the producer runs and at how many
	// records per second.
	LatencyTime time.Duration
	LatencyRate int
	// IdleTime is how long row 7 reads its idle shards.
	IdleTime time.Duration
	// ManyShards are the shard counts of row 8's ReadBounded runs.
	ManyShards []int
	// FlinkEndpoint is the job endpoint of the Flink job server row 10 runs on; row 10
	// runs only when it is set.
	FlinkEndpoint string
	// FlinkREST is the REST API of the cluster behind the job server, where rows 12 to 14
	// run Flink's own Kinesis consumer.
	FlinkREST string
	// QueueLatency is added to every queue call the server of rows 16 and 17 answers, as
	// a network and the service add it: the receives then take time, not CPU.
	QueueLatency time.Duration
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

// FullConfig is the configuration of the full report.
func FullConfig() Config {
	return Config{
		Records: 1_000_000, Shards: 4, DeaggShards: 4,
		WriteShards: 2, WriteSeconds: 5,
		CodecRecords: 2_000_000,
		LatencyTime:  20 * time.Second, LatencyRate: 200,
		IdleTime:   30 * time.Second,
		ManyShards: []int{1000, 10000},
	}
}

// QuickConfig is the scaled-down configuration of --quick, for CI.
func QuickConfig() Config {
	return Config{
		Records: 50_000, Shards: 4, DeaggShards: 1, DeaggRecords: 25_000,
		WriteShards: 2, WriteSeconds: 2,
		CodecRecords: 200_000,
		LatencyTime:  5 * time.Second, LatencyRate: 100,
		IdleTime:   5 * time.Second,
		ManyShards: []int{1000},
	}
}

func (c Config) row(n int) bool { return len(c.Rows) == 0 || c.Rows[n] }

func (c Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "bench: "+format+"\n", args...)
	}
}

// Row is one line of the report. Measured and Baseline are human-readable figures; Ratio is
// Measured over Baseline (or the share/speed-up the row defines); Counts holds exact counts
// the row moved, for tests.
type Row struct {
	ID       string
	Name     string
	Measured string
	Baseline string
	Ratio    float64
	Target   string
	Notes    string
	// Rate is the row's main absolute rate (records/s or similar), for sanity checks.
	Rate float64
	// Counts are exact counts (records read, written, ...), for sanity checks.
	Counts map[string]int64
}

// Machine describes where the report ran.
type Machine struct {
	CPU        string
	Cores      int
	GoVersion  string
	GOMAXPROCS int
	LoadAvg    string
	Start      time.Time
}

// DescribeMachine reads the CPU model and load average from /proc where available.
func DescribeMachine() Machine {
	m := Machine{
		CPU: "unknown", Cores: runtime.NumCPU(), GoVersion: runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), LoadAvg: "unknown", Start: time.Now().UTC(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}

// WriteTable prints the machine and the rows as markdown.
func WriteTable(w io.Writer, m Machine, mode string, rows []Row) error {
	var b strings.Builder
	fmt.Fprintf(&b, "beamkinesis performance report (%s), %s\n\n", mode, m.Start.Format(time.RFC3339))
	fmt.Fprintf(&b, "Machine: %s, %d cores, %s, GOMAXPROCS %d, load average at start %s\n\n",
		m.CPU, m.Cores, m.GoVersion, m.GOMAXPROCS, m.LoadAvg)
	b.WriteString("| # | Measure | Connector | Baseline (same run) | Ratio | Target | Notes |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n",
			r.ID, cell(r.Name), cell(r.Measured), cell(r.Baseline), ratio(r.Ratio), cell(r.Target), cell(r.Notes))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cell(s string) string {
	if s == "" {
		return "–"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}

func ratio(r float64) string {
	if r == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", r)
}

// rate formats a per-second figure with thousands grouping.
func rate(v float64, unit string) string { return group(int64(v+0.5)) + " " + unit }

// group formats n with comma thousands separators.
func group(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// mib formats a byte count in MiB.
func mib(n float64) string { return fmt.Sprintf("%.1f MiB", n/(1<<20)) }
