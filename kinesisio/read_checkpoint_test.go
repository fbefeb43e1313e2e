package kinesisio

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestReadCheckpointsOftenInsideAggregatesWithoutLossOrDuplicates reads with at most 7 user
// records per ProcessElement call over aggregates of 5, so most checkpoints fall inside an
// aggregate and the resumed reader must re-read it and skip what it already emitted. Prism's
// runner-initiated splits stay on (its default): the tracker must refuse them safely.
func TestReadCheckpointsOftenInsideAggregatesWithoutLossOrDuplicates(t *testing.T) {
	// Without read-ahead a call that stops inside an aggregate leaves no iterator, and the
	// resumed call reopens the shard there; with it, the rest of the answer waits for the
	// resumed call, which reads the aggregate's unread part from it.
	for _, tc := range []struct {
		name string
		opt  ReadOption
	}{{"without read-ahead", WithoutReadAhead()}, {"with read-ahead", WithMaxReadAheadBytes(defaultReadAheadBytes)}} {
		t.Run(tc.name, func(t *testing.T) {
			stream := "checkpoints-" + fmt.Sprint(len(tc.name))
			srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
			w := newWorkload(t, "c", 300, 60, 5)
			putAll(t, srv.Client(), stream, w.entries)
			want := expected(t, srv, stream, w.aggregates, nil)
			if len(want) != 600 {
				t.Fatalf("workload has %d user records, want 600", len(want))
			}
			iteratorsBefore := srv.CallCount("GetShardIterator")

			p, s := beam.NewPipelineWithRoot()
			recs := Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxRecordsPerFetch(7),
				WithMaxRecordsPerRead(20), WithMaxReadTime(1500*time.Millisecond), WithPollInterval(20*time.Millisecond),
				WithDescribeShardInterval(100*time.Millisecond), tc.opt)...)
			passert.Equals(s, canonical(s, recs), anys(want)...)
			res, err := ptest.RunWithMetrics(p)
			if err != nil {
				t.Fatal(err)
			}
			// 300 of the 600 records are in aggregates of 5, so many of the 7-record cuts
			// fall inside one.
			inside := counter(res, "checkpoints_inside_aggregates")
			t.Logf("%d checkpoints inside aggregates", inside)
			if n := inside; n < 10 {
				t.Errorf("%d checkpoints fell inside an aggregate, want at least 10", n)
			}
			n := srv.CallCount("GetShardIterator") - iteratorsBefore
			if tc.name == "without read-ahead" && int64(n) < inside {
				// Every checkpoint inside an aggregate reopens an iterator.
				t.Errorf("the read opened %d iterators for %d checkpoints inside aggregates", n, inside)
			}
			if tc.name == "with read-ahead" && n != 2 {
				t.Errorf("the read opened %d iterators; want 2, one a shard: the resumed calls read on from what the read-ahead holds", n)
			}
		})
	}
}

// TestReadBoundedSurvivesThrottlingExpiredIteratorsAndServerErrors reads through 20%
// throttled GetRecords, 10% expired iterators and 5% 5xx responses on every read-side
// operation, and must still return exactly the stored records.
func TestReadBoundedSurvivesThrottlingExpiredIteratorsAndServerErrors(t *testing.T) {
	const stream = "faults"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 3))
	w := newWorkload(t, "f", 1500, 100, 5)
	putAll(t, srv.Client(), stream, w.entries)
	want := expected(t, srv, stream, w.aggregates, nil)
	srv.SetFaults(kinesistest.Faults{
		Seed: 7, GetRecordsThrottleRate: 0.2, ExpiredIteratorRate: 0.1, ServerErrorRate: 0.05,
		Operations: []string{"GetRecords", "GetShardIterator", "ListShards"},
	})

	p, s := beam.NewPipelineWithRoot()
	recs := ReadBounded(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxRecordsPerRead(50))...)
	passert.Equals(s, canonical(s, recs), anys(want)...)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := counter(res, "throttles"); n == 0 {
		t.Errorf("no throttled GetRecords were counted")
	}
	if n := counter(res, "expired_iterators"); n == 0 {
		t.Errorf("no expired iterators were counted")
	}
	if n := counter(res, "retries"); n == 0 {
		t.Errorf("no retries were counted")
	}
	if n := counter(res, "records"); n != int64(len(want)) {
		t.Errorf("records counter = %d, want %d", n, len(want))
	}
}

// TestReadStreamingSurvivesFaultsWithCheckpoints is the same under the unbounded Read, where
// throttling that outlasts the retries turns into a delayed resume.
func TestReadStreamingSurvivesFaultsWithCheckpoints(t *testing.T) {
	const stream = "faults-streaming"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	w := newWorkload(t, "fs", 400, 40, 5)
	putAll(t, srv.Client(), stream, w.entries)
	want := expected(t, srv, stream, w.aggregates, nil)
	srv.SetFaults(kinesistest.Faults{
		Seed: 11, GetRecordsThrottleRate: 0.2, ExpiredIteratorRate: 0.1, ServerErrorRate: 0.05,
		Operations: []string{"GetRecords", "GetShardIterator", "ListShards"},
	})
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxRecordsPerFetch(23),
		WithMaxRecordsPerRead(30), WithMaxReadTime(1500*time.Millisecond), WithPollInterval(20*time.Millisecond),
		WithDescribeShardInterval(100*time.Millisecond))...)
	passert.Equals(s, canonical(s, recs), anys(want)...)
	withExperiments("prism_disable_rtc", func() {
		if err := ptest.Run(p); err != nil {
			t.Fatal(err)
		}
	})
}

// trimmedStream writes 5 records, lets the server's clock pass the 24-hour retention, and
// writes 5 more, returning the server and the sequence number of a trimmed record.
func trimmedStream(t *testing.T, stream string) (*kinesistest.Server, string) {
	clock := kinesistest.NewManualClock(time.Now().Add(-48 * time.Hour))
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1), kinesistest.WithClock(clock))
	client := srv.Client()
	var trimmed string
	put := func(prefix string) {
		for i := range 5 {
			out, err := client.PutRecord(context.Background(), &kinesis.PutRecordInput{
				StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte(prefix + string(rune('0'+i))),
			})
			if err != nil {
				t.Fatal(err)
			}
			if prefix == "old" && i == 2 {
				trimmed = aws.ToString(out.SequenceNumber)
			}
		}
	}
	put("old")
	clock.Advance(25 * time.Hour)
	put("new")
	return srv, trimmed
}

func TestReadFailsOnATrimmedPositionByDefault(t *testing.T) {
	const stream = "trimmed-fail"
	srv, trimmed := trimmedStream(t, stream)
	p, s := beam.NewPipelineWithRoot()
	ReadBounded(s, stream, connect(srv, WithStartingPosition(ShardPositions(AfterSequenceNumber("shardId-000000000000", trimmed))))...)
	err := ptest.Run(p)
	if err == nil {
		t.Fatalf("the read of a trimmed position succeeded")
	}
	for _, w := range []string{"shardId-000000000000", "AFTER_SEQUENCE_NUMBER " + trimmed, "lost to the stream's retention", "WithSkipOnDataLoss()"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %q: %v", w, err)
		}
	}
}

func TestReadSkipsATrimmedPositionWhenToldTo(t *testing.T) {
	const stream = "trimmed-skip"
	srv, trimmed := trimmedStream(t, stream)
	want := expected(t, srv, stream, nil, nil)
	if len(want) != 5 {
		t.Fatalf("the server retains %d records, want the 5 new ones", len(want))
	}
	p, s := beam.NewPipelineWithRoot()
	recs := ReadBounded(s, stream, connect(srv, WithSkipOnDataLoss(),
		WithStartingPosition(ShardPositions(AfterSequenceNumber("shardId-000000000000", trimmed))))...)
	passert.Equals(s, canonical(s, recs), anys(want)...)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := counter(res, "data_loss_skips"); n != 1 {
		t.Errorf("data_loss_skips = %d, want 1", n)
	}
}

// TestReadRefusesRunnerSplitsWhileSlow makes each ProcessElement call wait 150ms between
// GetRecords calls, so Prism sees no progress and asks the reader to split at a fraction;
// the tracker refuses, and the output is still exact.
func TestReadRefusesRunnerSplitsWhileSlow(t *testing.T) {
	const stream = "slow"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	w := newWorkload(t, "s", 20, 2, 5)
	putAll(t, srv.Client(), stream, w.entries)
	want := expected(t, srv, stream, w.aggregates, nil)
	before := refusedSplits.Load()

	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxRecordsPerRead(2),
		WithMaxRecordsPerFetch(8), WithIdleTimeBetweenReads(150*time.Millisecond), WithMaxReadTime(time.Second),
		WithPollInterval(20*time.Millisecond), WithDescribeShardInterval(100*time.Millisecond))...)
	passert.Equals(s, canonical(s, recs), anys(want)...)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	if refusedSplits.Load() == before {
		t.Errorf("Prism asked for no fractional split; the test did not exercise split refusal")
	}
}
