package kinesisio

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// putQueueRecords puts n records prefix0.. to the stream "s" of queueServer and returns
// their data.
func putQueueRecords(t *testing.T, srv *kinesistest.Server, prefix string, n int) []string {
	t.Helper()
	out, err := putQueueData(srv, prefix, n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// putQueueData is putQueueRecords for a goroutine beside the test: it returns the error.
func putQueueData(srv *kinesistest.Server, prefix string, n int) ([]string, error) {
	in := &kinesis.PutRecordsInput{StreamName: aws.String("s")}
	var out []string
	for i := range n {
		d := prefix + strconv.Itoa(i)
		out = append(out, d)
		in.Records = append(in.Records, types.PutRecordsRequestEntry{PartitionKey: aws.String(d), Data: []byte(d)})
	}
	res, err := srv.Client().PutRecords(context.Background(), in)
	if err != nil || aws.ToInt32(res.FailedRecordCount) != 0 {
		return nil, fmt.Errorf("PutRecords: %v %+v", err, res)
	}
	return out, nil
}

// inBackground runs f beside the pipeline and returns a channel with its error.
func inBackground(f func(ctx context.Context) error) <-chan error {
	ch := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	go func() {
		defer cancel()
		ch <- f(ctx)
	}()
	return ch
}

// A worker that dies holding records: they come back a visibility timeout later, when the
// job's windows have moved past their arrival time. Their event time is their receive time,
// so a fixed-window job counts them; by their arrival time they would be late, dropped by
// the window, and acknowledged all the same (lost).
func TestReadQueueCountsRecordsThatComeBackAfterAWorkerDied(t *testing.T) {
	srv, arn, early := queueServer(t, 50, kinesistest.QueueConfig{})
	// The worker that dies: it received every record and will never acknowledge them.
	kc := srv.Client()
	for got := 0; got < len(early); {
		out, err := kc.ReceiveQueueRecords(context.Background(), &kinesis.ReceiveQueueRecordsInput{QueueARN: aws.String(arn), Limit: aws.Int32(10), VisibilityTimeoutSeconds: aws.Int32(3600)})
		if err != nil {
			t.Fatal(err)
		}
		got += len(out.QueueRecords)
	}
	later := putQueueRecords(t, srv, "later", 50)
	// Once the job acknowledged the later records, its sink wrote their windows: the
	// watermark is past every early record's arrival. Then the dead worker's records
	// come back, as their visibility timeout would have run out.
	bg := inBackground(func(ctx context.Context) error {
		if err := srv.WaitQueue(ctx, arn, func(st kinesistest.QueueStats) bool { return st.Acked >= int64(len(later)) }); err != nil {
			return err
		}
		n, err := srv.ExpireQueueInFlight(arn)
		if err == nil && n != len(early) {
			err = fmt.Errorf("%d records in flight came back, want the dead worker's %d", n, len(early))
		}
		return err
	})
	got, acked, _ := runHeldQueueCount(t, srv, arn, time.Second, WithQueueStopWhenIdle(8*time.Second))
	if err := <-bg; err != nil {
		t.Fatal(err)
	}
	want := sortedCopy(append(slices.Clone(early), later...))
	if !slices.Equal(got, want) {
		t.Fatalf("the windows counted %d records, want %d", len(got), len(want))
	}
	if len(acked) > 0 {
		t.Fatalf("%d records were acknowledged before the sink wrote them", len(acked))
	}
	checkAckedOnce(t, srv, arn, len(want))
	if st, err := srv.QueueStats(arn); err != nil || st.Redelivered != int64(len(early)) {
		t.Fatalf("queue after the read: %+v %v; want the %d early records delivered twice", st, err, len(early))
	}
}

// Records come back while the job that holds them lives (their visibility ran out, as if
// the job's worker had stalled): the job's handles go stale and its later acknowledgements
// of them fail, counted and logged once (by the worker's one Settler), not fatal; the new
// deliveries are acknowledged. With deduplication the sink sees every record once; without
// it, twice.
func TestReadQueueStaleHandlesAndDeduplication(t *testing.T) {
	for _, dedup := range []bool{true, false} {
		t.Run(fmt.Sprintf("dedup=%v", dedup), func(t *testing.T) {
			srv, arn, want := queueServer(t, 100, kinesistest.QueueConfig{})
			logged := captureLog(t)
			bg := inBackground(func(ctx context.Context) error {
				if err := srv.WaitQueue(ctx, arn, func(st kinesistest.QueueStats) bool { return st.InFlight == len(want) }); err != nil {
					return err
				}
				_, err := srv.ExpireQueueInFlight(arn)
				return err
			})
			opts := []QueueOption{WithQueueStopWhenIdle(6 * time.Second)}
			if dedup {
				opts = append(opts, WithQueueDeduplication(10*time.Minute))
			}
			got, _, res := runHeldQueueCount(t, srv, arn, time.Hour, opts...)
			if err := <-bg; err != nil {
				t.Fatal(err)
			}
			wantSeen := want
			if !dedup {
				wantSeen = sortedCopy(append(slices.Clone(want), want...))
			}
			if !slices.Equal(got, wantSeen) {
				t.Fatalf("the sink wrote %d records, want %d", len(got), len(wantSeen))
			}
			checkAckedOnce(t, srv, arn, len(want))
			st, err := srv.QueueStats(arn)
			if err != nil {
				t.Fatal(err)
			}
			if st.Redelivered != int64(len(want)) || st.StaleHandles < int64(len(want)) || st.InFlight != 0 {
				t.Fatalf("queue after the read: %+v; want every record delivered twice, the first handles stale", st)
			}
			// Metrics can only fall short of the truth, by a bundle Prism dropped
			// (queue_read_test.go); the server's counts above are exact.
			checks := map[string]int64{"stale_handles": int64(len(want)), "failed_acks": int64(len(want))}
			if dedup {
				checks["duplicates"] = int64(len(want))
			}
			for name, n := range checks {
				if got := queueCounter(res, name); got == 0 || got > n {
					t.Errorf("metric %s = %d, want %d", name, got, n)
				}
			}
			if !dedup {
				if got := queueCounter(res, "duplicates"); got != 0 {
					t.Errorf("metric duplicates = %d without deduplication", got)
				}
			}
			// Prism runs the job in this process: one worker, one Settler, one line for
			// the read's stale handles however many there were.
			staleLine := "kinesisio: queue " + arn + ": a acknowledgement failed with "
			if n := strings.Count(logged(), staleLine); n != 1 {
				t.Errorf("the stale handles were logged %d times (%q), want once for %d stale handles", n, staleLine, st.StaleHandles)
			}
		})
	}
}

func TestQueueDeduplicationOption(t *testing.T) {
	if cfg := buildConfig(targetQueue, []QueueOption{WithQueueDeduplication(time.Minute)}); cfg.queue.dedup != time.Minute {
		t.Fatalf("dedup span %v, want 1m", cfg.queue.dedup)
	}
	if cfg := buildConfig(targetQueue, []QueueOption{}); cfg.queue.dedup != 0 {
		t.Fatalf("dedup on by default: %v", cfg.queue.dedup)
	}
	msg := mustPanic(t, func() { buildConfig(targetQueue, []QueueOption{WithQueueDeduplication(0)}) })
	for _, w := range []string{"kinesisio.ReadQueue", "WithQueueDeduplication", "span"} {
		if !strings.Contains(msg, w) {
			t.Errorf("panic %q does not mention %q", msg, w)
		}
	}
}

// The service's rare redelivery of an acknowledged record (the server's fault): the
// acknowledgement is reported successful, and the record comes back after its visibility
// timeout. With deduplication the pipeline sees each record once.
func TestReadQueueDeduplicatesRedeliveriesAfterAcknowledgement(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithOnDemandStream("s", 2, ""), kinesistest.WithFaults(kinesistest.Faults{
		QueueRedeliverAfterAckRate: 0.3, Operations: []string{"AcknowledgeQueueRecords"},
	}))
	arn, err := srv.CreateQueue("q", "s", kinesistest.QueueConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := sortedCopy(putQueueRecords(t, srv, "r", 200))
	p, s := beam.NewPipelineWithRoot()
	recs := ReadQueue(s, arn, queueConnect(srv, WithQueueVisibility(time.Second),
		WithQueueDeduplication(10*time.Minute), WithQueueStopWhenIdle(5*time.Second))...)
	sk := collectQueue(s, t.Name(), recs)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedCopy(sk.get()); !slices.Equal(got, want) {
		t.Fatalf("the pipeline saw %d records, want each of %d once", len(got), len(want))
	}
	st, err := srv.QueueStats(arn)
	if err != nil {
		t.Fatal(err)
	}
	if st.RedeliveredAfterAck == 0 {
		t.Fatalf("the fault redelivered nothing: %+v", st)
	}
	acked, err := srv.QueueAckedRecordIDs(arn)
	if err != nil {
		t.Fatal(err)
	}
	if len(acked) != len(want) {
		t.Fatalf("%d records acknowledged, want %d", len(acked), len(want))
	}
	t.Logf("redelivered after acknowledgement: %d; duplicates dropped (metric): %d", st.RedeliveredAfterAck, queueCounter(res, "duplicates"))
	// Every redelivery the job received is a duplicate: those of the fault, and any whose
	// acknowledgement came after its visibility ran out.
	if n := queueCounter(res, "duplicates"); n == 0 || n > st.Redelivered {
		t.Fatalf("duplicates metric %d, want 1..%d", n, st.Redelivered)
	}
}

// A queue delivers a KPL aggregate whole, as one record with one RecordId: the read splits it
// into its user records (SubIndex), and deduplication keys on RecordId and SubIndex, so no
// user record of an aggregate is taken for a duplicate of another.
func TestReadQueueSplitsAggregatesAndDeduplicatesTheirUserRecords(t *testing.T) {
	srv, arn, want := queueServer(t, 20, kinesistest.QueueConfig{})
	in := &kinesis.PutRecordsInput{StreamName: aws.String("s")}
	for a := range 5 {
		agg := kpl.NewAggregator(1<<20, 100)
		for u := range 7 {
			d := fmt.Sprintf("agg%d-user%d", a, u)
			want = append(want, d)
			if err := agg.Add(kpl.UserRecord{PartitionKey: d, Data: []byte(d)}); err != nil {
				t.Fatal(err)
			}
		}
		b, err := agg.Build()
		if err != nil {
			t.Fatal(err)
		}
		e := types.PutRecordsRequestEntry{PartitionKey: aws.String(b.PartitionKey), Data: b.Data}
		if b.ExplicitHashKey != "" {
			e.ExplicitHashKey = aws.String(b.ExplicitHashKey)
		}
		in.Records = append(in.Records, e)
	}
	if out, err := srv.Client().PutRecords(context.Background(), in); err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Fatalf("PutRecords: %v %+v", err, out)
	}
	want = sortedCopy(want)
	p, s := beam.NewPipelineWithRoot()
	recs := ReadQueue(s, arn, queueConnect(srv, WithQueueDeduplication(10*time.Minute))...)
	sk := collectQueue(s, t.Name(), recs)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	if got := sortedCopy(sk.get()); !slices.Equal(got, want) {
		t.Fatalf("read %d records, want %d: %v", len(got), len(want), got)
	}
	if st, err := srv.QueueStats(arn); err != nil || st.Acked != 25 {
		t.Fatalf("queue after the read: %+v %v; want its 20 plain records and 5 aggregates acknowledged", st, err)
	}
}
