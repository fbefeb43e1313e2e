package kinesisio

import (
	"context"
	"io"
	"log"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.DoFn1x0[QueueRecord](&collectQueueFn{})
}

// collectQueue sends the QueueRecords recs to a new sink named key.
func collectQueue(s beam.Scope, key string, recs beam.PCollection) *sink {
	sk := &sink{}
	sinksMu.Lock()
	sinks[key] = sk
	sinksMu.Unlock()
	beam.ParDo0(s, &collectQueueFn{Key: key}, recs)
	return sk
}

// collectQueueFn appends each record's data and receive count to the sink named Key.
type collectQueueFn struct{ Key string }

func (fn *collectQueueFn) ProcessElement(r QueueRecord) {
	sinksMu.Lock()
	s := sinks[fn.Key]
	sinksMu.Unlock()
	s.mu.Lock()
	s.strs = append(s.strs, string(r.Data))
	s.mu.Unlock()
}

// queueServer starts a server with an ON_DEMAND stream "s", a queue "q" on it and n
// records "r0".. put, and returns it with the queue's ARN and the records' data, sorted.
func queueServer(t *testing.T, n int, cfg kinesistest.QueueConfig) (*kinesistest.Server, string, []string) {
	t.Helper()
	srv := kinesistest.StartT(t, kinesistest.WithOnDemandStream("s", 2, ""))
	arn, err := srv.CreateQueue("q", "s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc := srv.Client()
	var want []string
	for start := 0; start < n; start += 500 {
		in := &kinesis.PutRecordsInput{StreamName: aws.String("s")}
		for i := start; i < min(n, start+500); i++ {
			d := "r" + strconv.Itoa(i)
			want = append(want, d)
			in.Records = append(in.Records, types.PutRecordsRequestEntry{PartitionKey: aws.String("k" + strconv.Itoa(i)), Data: []byte(d)})
		}
		out, err := kc.PutRecords(context.Background(), in)
		if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("PutRecords: %v %+v", err, out)
		}
	}
	slices.Sort(want)
	return srv, arn, want
}

func queueConnect(srv *kinesistest.Server, opts ...QueueOption) []QueueOption {
	return queueConnectURL(srv.URL(), opts...)
}

// queueConnectURL is queueConnect for the server at url, as a child job knows it.
func queueConnectURL(url string, opts ...QueueOption) []QueueOption {
	return append([]QueueOption{
		WithEndpoint(url), WithStaticCredentials("test", "test"),
		WithRetries(20, 5*time.Millisecond, 50*time.Millisecond),
		WithQueueWait(time.Second), WithQueueStopWhenIdle(3 * time.Second),
	}, opts...)
}

func TestReadQueueReadsAndAcknowledgesEveryRecord(t *testing.T) {
	srv, arn, want := queueServer(t, 700, kinesistest.QueueConfig{})
	p, s := beam.NewPipelineWithRoot()
	recs := ReadQueue(s, arn, queueConnect(srv, WithQueueSlots(3), WithQueueReceivers(3))...)
	sk := collectQueue(s, t.Name(), recs)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	got := sortedCopy(sk.get())
	if !slices.Equal(got, want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	st, err := srv.QueueStats(arn)
	if err != nil {
		t.Fatal(err)
	}
	if st.Acked != int64(len(want)) || st.InFlight != 0 || st.Visible != 0 || st.Redelivered != 0 {
		t.Fatalf("queue after the read: %+v", st)
	}
	// Every acknowledgement is counted once, by the acknowledge step alone, in both metrics.
	lag := res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == queueNamespace && r.Name() == "ack_lag_ms"
	}).Distributions()
	if len(lag) != 1 {
		t.Fatalf("ack_lag_ms reported by %d steps, want 1 (the acknowledge step)", len(lag))
	}
	d := lag[0].Result()
	acks := queueCounter(res, "acks")
	t.Logf("ack lag: %d records, mean %d ms, min %d ms, max %d ms; acks %d", d.Count, d.Sum/max(d.Count, 1), d.Min, d.Max, acks)
	if d.Count != acks {
		t.Fatalf("ack lag of %d records, acks metric %d: each acknowledgement must be in both", d.Count, acks)
	}
	// Prism v2.77 loses the values of a metric whose short id it has not seen yet when two
	// bundles' final responses carry it at once (jobservices/metrics.go keeps one unprocessed
	// payload per short id until the id's metadata arrives, and the second overwrites the
	// first). The acknowledge step's first bundles can race so, and a run then reports one
	// bundle's acknowledgements fewer (640 of 700 in one run) in every ack metric alike. So
	// the metrics are exact when Prism kept every bundle; the server's count above is exact.
	if acks != int64(len(want)) {
		t.Logf("Prism dropped the metrics of %d acknowledgements (the server acknowledged %d)", int64(len(want))-acks, len(want))
	}
	for name, n := range map[string]int64{"failed_acks": 0, "stale_handles": 0} {
		if got := queueCounter(res, name); got != n {
			t.Errorf("metric %s = %d, want %d", name, got, n)
		}
	}
}

// queueCounter returns the committed value of a queue read counter, summed over steps.
func queueCounter(res beam.PipelineResult, name string) int64 {
	var total int64
	for _, c := range res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == queueNamespace && r.Name() == name
	}).Counters() {
		total += c.Committed
	}
	return total
}

func TestReadQueueDeadLettersDiscardsWhatItRead(t *testing.T) {
	srv, arn, want := queueServer(t, 30, kinesistest.QueueConfig{MaxReceiveCount: 1})
	kc := srv.Client()
	for got := 0; got < len(want); {
		out, err := kc.ReceiveQueueRecords(context.Background(), &kinesis.ReceiveQueueRecordsInput{QueueARN: aws.String(arn), Limit: aws.Int32(10)})
		if err != nil {
			t.Fatal(err)
		}
		got += len(out.QueueRecords)
	}
	if _, err := srv.ExpireQueueInFlight(arn); err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	recs := ReadQueueDeadLetters(s, arn, queueConnect(srv)...)
	sk := collectQueue(s, t.Name(), recs)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	if got := sortedCopy(sk.get()); !slices.Equal(got, want) {
		t.Fatalf("dead letters read: %v, want %v", got, want)
	}
	st, err := srv.QueueStats(arn)
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadAcked != int64(len(want)) || st.DeadVisible != 0 || st.DeadInFlight != 0 {
		t.Fatalf("queue after the dead-letter read: %+v", st)
	}
}

// captureLog copies what the standard logger writes, where the queue read logs, from now
// until t ends, and returns a function that reads the copy.
func captureLog(t *testing.T) func() string {
	t.Helper()
	var mu sync.Mutex
	var buf strings.Builder
	old := log.Writer()
	log.SetOutput(io.MultiWriter(old, writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})))
	t.Cleanup(func() { log.SetOutput(old) })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
