package flink

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

// largeRecordBytes is the data size of the large record: 9 MiB, which with its partition
// key fits a stream raised to 10 MiB. It is over the 4 MB the Go SDK harness packs into
// one data-channel message (an element that does not fit goes out alone, whole), over
// gRPC's default 4 MiB receive limit that a server or client left at its defaults would
// refuse, and over the 5 MiB above which Flink's network stack spills a record it
// receives to a file.
const largeRecordBytes = 9 << 20

// TestANineMiBRecordCrossesFlinkFromReadToWrite copies a stream holding a 9 MiB record
// and a few small ones to another stream, both raised to 10 MiB records, with a streaming
// kinesis-to-kinesis job on the standalone cluster. The job reshuffles the records
// (--reshuffle), so the large one leaves the Go SDK worker that read it over the Fn API's
// data channel, crosses a Flink network exchange (its downstream vertex must have
// received at least 9 MiB) and enters the worker that writes it over the data channel
// again. The output stream must hold exactly the input records, bytes equal, and the job
// must run without a task failure.
func TestANineMiBRecordCrossesFlinkFromReadToWrite(t *testing.T) {
	needCluster(t)
	started := time.Now()
	srv := kinesistest.StartT(t)
	for _, stream := range []string{"large-in", "large-out"} {
		if err := srv.CreateStream(stream, 2); err != nil {
			t.Fatal(err)
		}
		raiseRecordSize(t, srv, stream, 10240)
	}
	want := []string{largeData(largeRecordBytes), ""}
	for i := range 8 {
		want = append(want, fmt.Sprintf("small-%d", i))
	}
	put(t, srv.Client(), "large-in", entries("large", want...)...)
	sort.Strings(want)

	r := startPipeline(t, "kinesis-to-kinesis", append(append([]string{"--input_stream=large-in", "--output_stream=large-out",
		"--transform=passthrough", "--reshuffle", "--bounded=false", "--starting_position=trim_horizon",
		"--parallelism=2"}, kinesisFlags(srv)...), checkpointFlags...)...)
	var got []string
	await(t, 2*time.Minute, func() string {
		return fmt.Sprintf("the output stream holds %d of the %d records: %v", len(got), len(want), streamcheck.Digests(got))
	}, func() bool {
		if r.exited() {
			t.Fatalf("%s ended before the output held every record: %v", r.name, r.err)
		}
		got, _ = userRecords(t, srv, "large-out")
		return len(got) >= len(want)
	})
	copied := time.Since(r.started)
	if fs := failures(t, r.job); len(fs) > 0 {
		t.Errorf("the job's tasks failed %d times (%v), want no failure", len(fs), fs)
	}
	var exchanged int64
	await(t, time.Minute, func() string {
		return fmt.Sprintf("no vertex of the job received %d bytes over Flink's network (most: %d), want the large record to cross an exchange", largeRecordBytes, exchanged)
	}, func() bool {
		exchanged = maxVertexReadBytes(t, r.job)
		return exchanged >= largeRecordBytes
	})
	r.cancel(t)

	got, aggregates := userRecords(t, srv, "large-out")
	if !slices.Equal(got, want) {
		t.Errorf("the output stream holds %v, want exactly %v", streamcheck.Digests(got), streamcheck.Digests(want))
	}
	t.Logf("measured: %v in all; output complete %v after launch; %d records (%d aggregates), most bytes one vertex received %d",
		time.Since(started).Round(time.Millisecond), copied.Round(time.Millisecond), len(got), aggregates, exchanged)
}

// raiseRecordSize sets stream's record size limit to kib KiB with UpdateMaxRecordSize.
func raiseRecordSize(t *testing.T, srv *kinesistest.Server, stream string, kib int32) {
	t.Helper()
	if _, err := srv.Client().UpdateMaxRecordSize(context.Background(), &kinesis.UpdateMaxRecordSizeInput{
		StreamARN: aws.String(srv.StreamARN(stream)), MaxRecordSizeInKiB: aws.Int32(kib)}); err != nil {
		t.Fatalf("raising %s's record size limit to %d KiB: %v", stream, kib, err)
	}
}

// largeData is n pseudo-random bytes, so that a truncated, shifted or mixed-up copy
// differs from the original.
func largeData(n int) string {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{9}).Read(b)
	return string(b)
}

// maxVertexReadBytes returns the most bytes any vertex of the job has received over
// Flink's network (the REST API's read-bytes, which lags by a few seconds).
func maxVertexReadBytes(t *testing.T, job string) int64 {
	t.Helper()
	var j struct {
		Vertices []struct {
			Metrics struct {
				ReadBytes int64 `json:"read-bytes"`
			} `json:"metrics"`
		} `json:"vertices"`
	}
	restGet(t, "/jobs/"+job, &j)
	var most int64
	for _, v := range j.Vertices {
		most = max(most, v.Metrics.ReadBytes)
	}
	return most
}
