package kinesisio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// startDynalite starts dynalite for t and returns its endpoint.
func startDynalite(t *testing.T) string {
	t.Helper()
	return emulatorsT(t)
}

func emulatorsT(t testing.TB) string {
	t.Helper()
	return emulators.StartT(t, emulators.Dynalite).URL()
}

// leaseOf reads a shard's item from the checkpoint table.
func leaseOf(t *testing.T, endpoint, table, shard string) leasetable.Lease {
	t.Helper()
	db := emulatorsDynamoDB(endpoint)
	l, ok, err := leasetable.New(db, table).Get(context.Background(), shard)
	if err != nil || !ok {
		t.Fatalf("lease of %s: %v (found %v)", shard, err, ok)
	}
	return l
}

// emulatorsDynamoDB is a DynamoDB client for the local endpoint.
func emulatorsDynamoDB(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       emulators.Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// countsOf is the multiset of strs.
func countsOf(strs []string) map[string]int {
	m := map[string]int{}
	for _, s := range strs {
		m[s]++
	}
	return m
}

// The restart test: a streaming job stops (its read ends) while records are still being
// written; a new job on the same table resumes where the first one committed. Together they
// read every record at least once, each job reads none twice, and the second job does not
// start again from the beginning. Small fetches make commits fall inside aggregates.
func TestReadResumesAcrossJobsFromTheCheckpointTable(t *testing.T) {
	const stream, table = "resume", "positions"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	dyn := startDynalite(t)
	client := srv.Client()
	aggs := map[string][]kpl.UserRecord{}
	write := func(prefix string) {
		w := newWorkload(t, prefix, 60, 6, 5)
		for k, v := range w.aggregates {
			aggs[k] = v
		}
		putAll(t, client, stream, w.entries)
	}
	write("before")
	opts := func() []ReadOption {
		return connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(3*time.Second),
			WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn), WithCheckpointLeaseDuration(time.Second),
			WithDescribeShardInterval(100*time.Millisecond), WithPollInterval(50*time.Millisecond),
			WithMaxFetchTime(200*time.Millisecond), WithMaxRecordsPerFetch(7))
	}

	p1, s1 := beam.NewPipelineWithRoot()
	first := collect(s1, t.Name()+"/1", Read(s1, stream, opts()...))
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 20; i++ {
			write(fmt.Sprintf("during%d", i))
			time.Sleep(100 * time.Millisecond)
		}
	}()
	if err := ptest.Run(p1); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	write("after")

	p2, s2 := beam.NewPipelineWithRoot()
	second := collect(s2, t.Name()+"/2", Read(s2, stream, opts()...))
	if err := ptest.Run(p2); err != nil {
		t.Fatal(err)
	}

	all := expected(t, srv, stream, aggs, nil)
	got1, got2 := first.get(), second.get()
	for i, got := range [][]string{got1, got2} {
		for r, n := range countsOf(got) {
			if n > 1 {
				t.Errorf("job %d read %d× %s; a job reads each record once", i+1, n, r)
			}
		}
	}
	union := countsOf(got1)
	for r := range countsOf(got2) {
		union[r]++
	}
	var missing int
	for _, r := range all {
		if union[r] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("no job read %s", r)
			}
		}
	}
	dups := len(got1) + len(got2) - len(all)
	if missing > 0 || len(countsOf(append(append([]string{}, got1...), got2...))) != len(countsOf(all)) {
		t.Fatalf("%d of %d records read by neither job, or records read that are not in the stream (job 1 %d, job 2 %d)", missing, len(all), len(got1), len(got2))
	}
	if len(got2) >= len(all) {
		t.Fatalf("job 2 read %d of %d records: it started again from the beginning", len(got2), len(all))
	}
	t.Logf("stream %d records; job 1 read %d, job 2 read %d; %d read by both (duplicates across the restart)", len(all), len(got1), len(got2), dups)

	// The table ends at each shard's last record.
	stored, _ := srv.StreamRecords(stream)
	lastSeq := map[string]string{}
	for _, r := range stored {
		lastSeq[r.ShardID] = r.SequenceNumber
	}
	for shard, seq := range lastSeq {
		if l := leaseOf(t, dyn, table, shard); l.Checkpoint != seq {
			t.Errorf("%s: checkpoint %s/%d, want the last record %s", shard, l.Checkpoint, l.Sub, seq)
		}
	}
}

// A bounded read that stops inside an aggregate commits the user record's sub-sequence
// number; the next read on the table goes on with the next user record of that aggregate,
// and one more finds nothing left.
func TestReadBoundedResumesInsideAnAggregateFromTheCheckpointTable(t *testing.T) {
	const stream, table = "subseq", "positions"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	dyn := startDynalite(t)
	w := newWorkload(t, "x", 0, 4, 5)
	putAll(t, srv.Client(), stream, w.entries)
	all := expected(t, srv, stream, w.aggregates, nil)
	stored, _ := srv.StreamRecords(stream)

	var res beam.PipelineResult
	run := func(name string, extra ...ReadOption) []string {
		p, s := beam.NewPipelineWithRoot()
		opts := append(connect(srv, WithStartingPosition(TrimHorizon()), WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn), WithCheckpointLeaseDuration(300*time.Millisecond)), extra...)
		sk := collect(s, t.Name()+"/"+name, ReadBounded(s, stream, opts...))
		var err error
		if res, err = ptest.RunWithMetrics(p); err != nil {
			t.Fatal(err)
		}
		return sk.get()
	}
	first := run("1", WithMaxRecords(7))
	if c, n := counter(res, "checkpoint_commits"), counter(res, committedRecordsMetric("shardId-000000000000")); c != 1 || n != 7 {
		t.Errorf("metrics: %d commits covering %d records of the shard; want 1 covering 7", c, n)
	}
	l := leaseOf(t, dyn, table, "shardId-000000000000")
	if l.Checkpoint != stored[1].SequenceNumber || l.Sub != 1 {
		t.Fatalf("checkpoint after 7 user records %s/%d; want the second aggregate %s at sub-sequence 1", l.Checkpoint, l.Sub, stored[1].SequenceNumber)
	}
	second := run("2")
	third := run("3")
	if len(first) != 7 || len(third) != 0 {
		t.Fatalf("jobs read %d, %d, %d records; want 7, 13, 0", len(first), len(second), len(third))
	}
	assertSameRecords(t, append(first, second...), all)
}

// With a table, a child shard is read only after its parents are at SHARD_END, so the
// records of each partition key come out in the order they were written across a split and
// a merge made while the read runs.
func TestReadWithTableKeepsPerKeyOrderAcrossSplitAndMerge(t *testing.T) {
	const stream, table = "order", "positions"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 3))
	dyn := startDynalite(t)
	client := srv.Client()
	const keys = 12
	next := make([]int, keys)
	write := func(prefix string) {
		var entries []types.PutRecordsRequestEntry
		for i := range 240 {
			k := i % keys
			entries = append(entries, types.PutRecordsRequestEntry{
				PartitionKey: aws.String(fmt.Sprintf("key%02d", k)),
				Data:         []byte(fmt.Sprintf("%06d %s", next[k], prefix)),
			})
			next[k]++
		}
		putAll(t, client, stream, entries)
	}
	// A backlog in the parents, read slowly, so that without the parents-first rule the
	// children's records (written right after the split) would be read first.
	for range 5 {
		write("before")
	}
	const readTime = 6 * time.Second
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(readTime),
		WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn),
		WithDescribeShardInterval(100*time.Millisecond), WithPollInterval(50*time.Millisecond),
		WithMaxFetchTime(200*time.Millisecond), WithMaxRecordsPerRead(25), WithIdleTimeBetweenReads(40*time.Millisecond))...)
	sink := collect(s, t.Name(), recs)
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
	got := sink.get()
	assertReshardedReadExact(t, srv, stream, map[string][]kpl.UserRecord{}, t0.Add(readTime), got)

	// got is in the order the records reached the sink; per key it must be written order.
	last := map[string]string{}
	var checked int
	for _, c := range got {
		pk := between(c, "|pk=", "|")
		data := between(c, "|\"", " ")
		if prev, ok := last[pk]; ok && data <= prev {
			t.Errorf("key %s: record %s came after %s", pk, data, prev)
		}
		last[pk] = data
		checked++
	}
	if checked != 8*240 || len(last) != keys {
		t.Fatalf("checked %d records of %d keys; want %d of %d", checked, len(last), 8*240, keys)
	}
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002"} {
		if l := leaseOf(t, dyn, table, id); l.Checkpoint != leasetable.ShardEnd {
			t.Errorf("parent %s: checkpoint %s, want SHARD_END", id, l.Checkpoint)
		}
	}
	if l := leaseOf(t, dyn, table, "shardId-000000000005"); len(l.Parents) != 2 {
		t.Errorf("merged child's parents %q; want both", l.Parents)
	}
}

// between returns the part of s after the first from and before the next to.
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i+len(from):]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}
