package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// TestMain lets the test binary serve as row 5's child server, as the bench binary does.
func TestMain(m *testing.M) {
	if os.Getenv(ServeEnv) == "1" {
		if err := Serve(os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	flag.Parse()
	beam.Init()
	os.Exit(m.Run())
}

// TestQuickReport runs rows 1 to 5 at small sizes and checks that the table is printed with
// every row, exact record counts and non-zero rates. It asserts nothing about speed: the
// machines are shared.
func TestQuickReport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines for several seconds")
	}
	cfg := QuickConfig()
	cfg.Records, cfg.CodecRecords = 20_000, 50_000
	cfg.Rows = map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true}
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rows, err := NewBench(cfg).Run(ctx)
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, log.String())
	}
	byID := map[string]Row{}
	for _, r := range rows {
		byID[r.ID] = r
		if r.Rate <= 0 {
			t.Errorf("row %s: rate %v, want > 0", r.ID, r.Rate)
		}
		if r.ID != "4a" && r.ID != "4b" && r.Ratio <= 0 {
			t.Errorf("row %s: ratio %v, want > 0", r.ID, r.Ratio)
		}
	}
	want := map[string]map[string]int64{
		"1":  {"readbounded_records": 20_000, "loop_records": 20_000},
		"2":  {"user_records": 20_000, "plain_records": 20_000},
		"3":  {"agg_messages": 3 * 2 * 10_000, "plain_messages": 3 * 2 * 1000},
		"4a": {"records": 50_000},
		"5":  {"read_records": 20_000, "written_records": 20_000},
	}
	for id, counts := range want {
		r, ok := byID[id]
		if !ok {
			t.Errorf("row %s missing", id)
			continue
		}
		for k, v := range counts {
			if got := r.Counts[k]; got != v {
				t.Errorf("row %s: %s = %d, want %d", id, k, got, v)
			}
		}
	}
	// Deaggregation splits whole aggregates, so it may pass the count by one aggregate.
	if n := byID["4b"].Counts["records"]; n < 50_000 || n > 51_000 {
		t.Errorf("row 4b: %d records deaggregated, want 50,000 and less than an aggregate more", n)
	}
	if n := byID["2"].Counts["kinesis_records"]; n <= 0 || n >= 20_000 {
		t.Errorf("row 2 read %d Kinesis records for 20,000 user records: not aggregated", n)
	}
	// The quick row meets the wait after an answer over 2 MiB, as the full run does.
	if n := byID["2"].Counts["largest_answer_bytes"]; n <= 2<<20 {
		t.Errorf("row 2's largest answer is %d bytes, want over 2 MiB", n)
	}
	if byID["3"].Counts["share_permille"] <= 0 {
		t.Errorf("row 3: share of the byte limit %d‰, want > 0", byID["3"].Counts["share_permille"])
	}

	var out strings.Builder
	if err := WriteTable(&out, DescribeMachine(), "test", rows); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, s := range []string{"Machine: ", "GOMAXPROCS", "| 1 |", "| 2 |", "| 3 |", "| 4a |", "| 4b |", "| 5 |"} {
		if !strings.Contains(table, s) {
			t.Errorf("table lacks %q:\n%s", s, table)
		}
	}
	if got := strings.Count(table, "\n| "); got != len(rows)+1 {
		t.Errorf("table has %d lines starting with |, want %d (header + rows):\n%s", got, len(rows)+1, table)
	}
}

func TestParseRows(t *testing.T) {
	got, err := parseRows("1, 3,6")
	if err != nil || len(got) != 3 || !got[1] || !got[3] || !got[6] {
		t.Errorf("parseRows = %v, %v", got, err)
	}
	if _, err := parseRows("9"); err == nil {
		t.Error("parseRows(9) accepted")
	}
	if got, err := parseRows("10"); err != nil || len(got) != 1 || !got[flinkRow] {
		t.Errorf("parseRows(10) = %v, %v, want row 10 (the Flink row)", got, err)
	}
	if got, err := parseRows("12,13,14"); err != nil || len(got) != 3 || !got[flinkKinesisRow] || !got[flinkScalingRow] || !got[flinkLatencyRow] {
		t.Errorf("parseRows(12,13,14) = %v, %v, want the rows beside Flink's consumer", got, err)
	}
	if got, err := parseRows("16"); err != nil || len(got) != 1 || !got[queueRow] {
		t.Errorf("parseRows(16) = %v, %v, want the queue row", got, err)
	}
	if got, err := parseRows("17"); err != nil || len(got) != 1 || !got[queueFlinkRow] {
		t.Errorf("parseRows(17) = %v, %v, want the queue row on Flink", got, err)
	}
	for _, bad := range []string{"11", "18"} { // 11 is a testing/REPORTS.md row from go test -bench
		if _, err := parseRows(bad); err == nil {
			t.Errorf("parseRows(%s) accepted", bad)
		}
	}
	if got, err := parseRows(""); err != nil || got != nil {
		t.Errorf("parseRows(\"\") = %v, %v, want all rows", got, err)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if p := percentile(d, 50); p != 50 {
		t.Errorf("p50 = %v, want 50", p)
	}
	if p := percentile(d, 99); p != 99 {
		t.Errorf("p99 = %v, want 99", p)
	}
	if p := percentile(nil, 50); p != 0 {
		t.Errorf("p50 of nothing = %v", p)
	}
}

func TestGroup(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
}
