package kinesisio

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// withExperiments runs f with --experiments set to exps, restoring the flag afterwards.
func withExperiments(exps string, f func()) {
	old := *jobopts.Experiments
	*jobopts.Experiments = exps
	defer func() { *jobopts.Experiments = old }()
	f()
}

// waitFor polls cond (every 5ms, up to 30s): the test waits for an observable effect of
// the pipeline, such as the reader's first GetRecords call.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("timed out waiting for %s", what)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func listShards(t *testing.T, client *kinesis.Client, stream string) map[string]types.Shard {
	t.Helper()
	out, err := client.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]types.Shard{}
	for _, s := range out.Shards {
		m[aws.ToString(s.ShardId)] = s
	}
	return m
}

func TestReadFollowsSplitAndMergeReadingEveryRecordOnce(t *testing.T) {
	const stream = "reshard"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 3))
	client := srv.Client()
	aggs := map[string][]kpl.UserRecord{}
	write := func(prefix string) {
		w := newWorkload(t, prefix, 300, 20, 5)
		for k, v := range w.aggregates {
			aggs[k] = v
		}
		putAll(t, client, stream, w.entries)
	}
	write("before")

	const readTime = 5 * time.Second
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(readTime),
		WithDescribeShardInterval(100*time.Millisecond), WithPollInterval(50*time.Millisecond),
		WithMaxFetchTime(200*time.Millisecond))...)
	sink := collect(s, t.Name(), recs)

	// The records' sequence numbers and arrival times are only known once the writes are
	// done, while the read runs; so the output is collected in-process and compared after.
	t0 := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitFor(t, "the read to start", func() bool { return srv.CallCount("GetRecords") > 0 })
		writeWhileResharding(t, client, stream, write)
	}()
	err := ptest.Run(p)
	<-done
	if err != nil {
		t.Fatal(err)
	}

	assertReshardedReadExact(t, srv, stream, aggs, t0.Add(readTime), sink.get())

}

// TestReadLatestReadsOnlyRecordsWrittenAfterTheStart starts at LATEST with records already in
// the stream, checkpoints many times before the first new record arrives, and must return
// exactly the records written after the read began.
func TestReadLatestReadsOnlyRecordsWrittenAfterTheStart(t *testing.T) {
	const stream = "latest"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	client := srv.Client()
	putAll(t, client, stream, newWorkload(t, "old", 50, 0, 0).entries)
	oldCount := len(expected(t, srv, stream, nil, nil))

	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithMaxReadTime(2*time.Second), WithPollInterval(20*time.Millisecond),
		WithDescribeShardInterval(100*time.Millisecond))...)
	sink := collect(s, t.Name(), recs)
	w := newWorkload(t, "new", 50, 5, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Let every shard checkpoint at least a few times with nothing read.
		waitFor(t, "the readers to poll", func() bool { return srv.CallCount("GetRecords") >= 10 })
		putAll(t, client, stream, w.entries)
	}()
	err := ptest.Run(p)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	all := expected(t, srv, stream, w.aggregates, nil)
	if len(all) != oldCount+70 {
		t.Fatalf("stream holds %d records, want %d", len(all), oldCount+70)
	}
	want := expected(t, srv, stream, w.aggregates, func(r kinesistest.StoredRecord) bool { return string(r.Data[:min(3, len(r.Data))]) != "old" })
	assertSameRecords(t, sink.get(), want)
}
