package main

import (
	"archive/zip"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func TestParseStatusReadsCountAndTimes(t *testing.T) {
	got, err := parseStatus("1000 1700000000000000001 1700000000500000002\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := (subtaskStatus{Records: 1000, First: 1700000000000000001, Last: 1700000000500000002}); got != want {
		t.Errorf("parseStatus = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "1 2", "1 2 3 4", "1 x 3"} {
		if _, err := parseStatus(bad); err == nil {
			t.Errorf("parseStatus(%q) accepted", bad)
		}
	}
}

func TestSumStatusesSpansTheSubtasksThatCounted(t *testing.T) {
	got := sumStatuses([]subtaskStatus{
		{Records: 10, First: 200, Last: 900},
		{}, // a subtask with no shard
		{Records: 5, First: 100, Last: 400},
	})
	if want := (subtaskStatus{Records: 15, First: 100, Last: 900}); got != want {
		t.Errorf("sumStatuses = %+v, want %+v", got, want)
	}
	if got := sumStatuses(nil); got != (subtaskStatus{}) {
		t.Errorf("sumStatuses(nil) = %+v, want zero", got)
	}
}

// writeJar writes a jar at dir/name whose manifest is manifest.
func writeJar(t *testing.T, dir, name, manifest string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	w, err := z.Create("META-INF/MANIFEST.MF")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(manifest)); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAnchorVersionsReadsTheJarsManifest(t *testing.T) {
	dir := t.TempDir()
	jar := writeJar(t, dir, "anchor.jar", "Manifest-Version: 1.0\r\nMain-Class: dev.beamkinesis.anchors.flink.KinesisCount\r\n"+
		"Flink-Kinesis-Version: 4.3.0-1.19\r\nFlink-Version: 1.19.3\r\n\r\n")
	flink, connector, err := anchorVersions(jar)
	if err != nil {
		t.Fatal(err)
	}
	if flink != "1.19.3" || connector != "4.3.0-1.19" {
		t.Errorf("anchorVersions = %q, %q; want 1.19.3, 4.3.0-1.19", flink, connector)
	}
	old := writeJar(t, dir, "old.jar", "Manifest-Version: 1.0\r\nMain-Class: dev.beamkinesis.anchors.flink.KinesisCount\r\n\r\n")
	if _, _, err := anchorVersions(old); err == nil {
		t.Error("anchorVersions accepted a jar whose manifest names no versions")
	}
	for release, want := range map[string]string{"1.19.3": "1.19", "1.16.3": "1.16", "1.19": "1.19", "2": "2"} {
		if got := minorRelease(release); got != want {
			t.Errorf("minorRelease(%q) = %q, want %q", release, got, want)
		}
	}
}

func TestParseArrivalsSkipsTheLineBeingWritten(t *testing.T) {
	got := map[uint64]int64{}
	if err := parseArrivals([]byte("0 100\n7 250\n3 1"), got); err != nil {
		t.Fatal(err)
	}
	if want := map[uint64]int64{0: 100, 7: 250}; !maps.Equal(got, want) {
		t.Errorf("parseArrivals = %v, want %v", got, want)
	}
	for _, bad := range []string{"5\n", "x 1\n", "1 y\n"} {
		if err := parseArrivals([]byte(bad), map[uint64]int64{}); err == nil {
			t.Errorf("parseArrivals(%q) accepted", bad)
		}
	}
}

// TestFlinkKinesisAnchorReadsEveryRecord runs the Flink Kinesis anchor job (rows 12 to 14)
// on the cluster at $BEAMKINESIS_FLINK_REST when BEAMKINESIS_FLINK_KINESIS=1: 2,000
// timestamped records over 2 shards at parallelism 2, from TRIM_HORIZON, with arrivals on;
// it asserts the job counted exactly them, each index once. Needs testing/flink/flink.sh
// start (or cluster.sh start) and testing/deps/deps.sh flinkkinesis.
func TestFlinkKinesisAnchorReadsEveryRecord(t *testing.T) {
	if os.Getenv("BEAMKINESIS_FLINK_KINESIS") != "1" {
		t.Skip("set BEAMKINESIS_FLINK_KINESIS=1 and $BEAMKINESIS_FLINK_REST to run Flink's FlinkKinesisConsumer anchor (testing/deps/deps.sh flinkkinesis builds it)")
	}
	rest := os.Getenv("BEAMKINESIS_FLINK_REST")
	if rest == "" {
		t.Fatal("BEAMKINESIS_FLINK_KINESIS=1 needs $BEAMKINESIS_FLINK_REST (testing/flink/cluster.sh start prints it)")
	}
	ctx := context.Background()
	srv, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("anchor", 2); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	put := time.Now()
	var entries []types.PutRecordsRequestEntry
	for i := range n {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("p", i)), Data: latencyData(put, uint64(i))})
		if len(entries) == 500 {
			out, err := srv.Client().PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("anchor"), Records: entries})
			if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
				t.Fatalf("PutRecords: %v (%d failed)", err, aws.ToInt32(out.FailedRecordCount))
			}
			entries = nil
		}
	}
	job, err := newFlinkKinesisJob(ctx, rest, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := job.close(); err != nil {
			t.Errorf("deleting the uploaded jar: %v", err)
		}
	}()
	r, err := job.run(ctx, srv.URL(), "anchor", 2, 2*time.Minute, func(s subtaskStatus) bool { return s.Records >= n }, "--latency=true")
	if err != nil {
		t.Fatal(err)
	}
	if r.Counted.Records != n {
		t.Errorf("the job counted %d records, want %d", r.Counted.Records, n)
	}
	idx := slices.Sorted(maps.Keys(r.Arrivals))
	if len(idx) != n || idx[0] != 0 || idx[n-1] != n-1 {
		t.Errorf("arrivals hold %d distinct indexes (%v…), want 0..%d", len(idx), idx[:min(len(idx), 5)], n-1)
	}
	for i, at := range r.Arrivals {
		if at < put.UnixNano() {
			t.Errorf("record %d arrived at %d, before it was put (%d)", i, at, put.UnixNano())
			break
		}
	}
}

func TestCommonLatenciesKeepsRecordsBothSawAfterTheWarmUp(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	puts := []time.Time{t0, t0.Add(500 * time.Millisecond), t0.Add(1500 * time.Millisecond), t0.Add(2 * time.Second), t0.Add(3 * time.Second)}
	ours := map[uint64]time.Duration{1: 10, 2: 20, 3: 30, 4: 40}
	theirs := map[uint64]time.Duration{0: 5, 1: 11, 3: 33, 4: 44, 9: 99} // 9 was never put
	o, th, n := commonLatencies(ours, theirs, puts, time.Second)
	// Both saw 1, 3 and 4; the first of them was put at 0.5 s, so 1 is in the warm-up.
	if n != 2 || !slices.Equal(o, []time.Duration{30, 40}) || !slices.Equal(th, []time.Duration{33, 44}) {
		t.Errorf("commonLatencies = %v, %v, %d; want [30 40], [33 44], 2", o, th, n)
	}
}
