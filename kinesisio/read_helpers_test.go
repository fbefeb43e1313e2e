package kinesisio

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x1(canonicalRecord)
}

// canonicalRecord renders every field of a Record, so comparing the multisets of these
// strings compares the records exactly.
func canonicalRecord(r Record) string {
	return fmt.Sprintf("%s|%s|%s/%d|pk=%s|ehk=%s|agg=%t|t=%d|%q",
		r.StreamName, r.ShardID, r.SequenceNumber, r.SubSequenceNumber, r.PartitionKey, r.ExplicitHashKey,
		r.Aggregated, r.ApproximateArrivalTimestamp.UnixMilli(), r.Data)
}

// onDataLoss is the read option of the data-loss rule fail: none for the default, which
// fails the read, and WithSkipOnDataLoss otherwise.
func onDataLoss(fail bool) []ReadOption {
	if fail {
		return nil
	}
	return []ReadOption{WithSkipOnDataLoss()}
}

// connect returns the options that point a read at srv, with fast retries.
func connect(srv *kinesistest.Server, opts ...ReadOption) []ReadOption {
	return append([]ReadOption{
		WithEndpoint(srv.URL()), WithRegion("us-east-1"), WithStaticCredentials("test", "test"),
		WithRetries(20, 5*time.Millisecond, 50*time.Millisecond),
	}, opts...)
}

// putAll writes entries with PutRecords, resending failed entries until all are stored.
func putAll(t testing.TB, client *kinesis.Client, stream string, entries []types.PutRecordsRequestEntry) {
	t.Helper()
	ctx := context.Background()
	for len(entries) > 0 {
		n := min(len(entries), 500)
		batch := entries[:n]
		for attempt := 0; len(batch) > 0; attempt++ {
			if attempt > 100 {
				t.Fatalf("PutRecords kept failing")
			}
			out, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: batch})
			if err != nil {
				continue
			}
			var failed []types.PutRecordsRequestEntry
			for i, r := range out.Records {
				if r.ErrorCode != nil {
					failed = append(failed, batch[i])
				}
			}
			batch = failed
		}
		entries = entries[n:]
	}
}

// workload is a set of records to write: plain records and KPL aggregates, remembering
// which user records each aggregate holds.
type workload struct {
	entries    []types.PutRecordsRequestEntry
	aggregates map[string][]kpl.UserRecord // by aggregate data
	userCount  int
}

// newWorkload makes plain plain records and aggs aggregates of perAgg user records each. Each
// aggregate's user records share a partition key, so the aggregate stays in one shard.
func newWorkload(t testing.TB, prefix string, plain, aggs, perAgg int) *workload {
	t.Helper()
	w := &workload{aggregates: map[string][]kpl.UserRecord{}}
	for i := range plain {
		w.entries = append(w.entries, types.PutRecordsRequestEntry{
			PartitionKey: aws.String(prefix + "-pk-" + strconv.Itoa(i)),
			Data:         []byte(fmt.Sprintf("%s plain %d", prefix, i)),
		})
		w.userCount++
	}
	for i := range aggs {
		a := kpl.NewAggregator(1<<20, perAgg)
		var users []kpl.UserRecord
		pk := prefix + "-agg-" + strconv.Itoa(i)
		for j := range perAgg {
			u := kpl.UserRecord{PartitionKey: pk, Data: []byte(fmt.Sprintf("%s agg %d/%d", prefix, i, j))}
			if err := a.Add(u); err != nil {
				t.Fatal(err)
			}
			users = append(users, u)
		}
		kr, err := a.Build()
		if err != nil {
			t.Fatal(err)
		}
		w.aggregates[string(kr.Data)] = users
		w.entries = append(w.entries, types.PutRecordsRequestEntry{
			PartitionKey: aws.String(kr.PartitionKey), ExplicitHashKey: aws.String(kr.ExplicitHashKey), Data: kr.Data,
		})
		w.userCount += perAgg
	}
	// Interleave aggregates with plain records.
	rng := uint64(len(w.entries))
	for i := len(w.entries) - 1; i > 0; i-- {
		rng = rng*6364136223846793005 + 1442695040888963407
		j := int(rng>>33) % (i + 1)
		w.entries[i], w.entries[j] = w.entries[j], w.entries[i]
	}
	return w
}

// expected renders the records the server stored as a reader with deaggregation should
// return them, using what the workload put into each aggregate (not the reader's codec).
// Records for which keep returns false are left out.
func expected(t testing.TB, srv *kinesistest.Server, stream string, aggregates map[string][]kpl.UserRecord, keep func(kinesistest.StoredRecord) bool) []string {
	t.Helper()
	stored, err := srv.StreamRecords(stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range stored {
		if keep != nil && !keep(s) {
			continue
		}
		r := Record{StreamName: stream, ShardID: s.ShardID, SequenceNumber: s.SequenceNumber, ApproximateArrivalTimestamp: s.ArrivalTime}
		if users, ok := aggregates[string(s.Data)]; ok {
			for i, u := range users {
				r.PartitionKey, r.ExplicitHashKey, r.Data, r.SubSequenceNumber, r.Aggregated = u.PartitionKey, u.ExplicitHashKey, u.Data, int64(i), true
				out = append(out, canonicalRecord(r))
			}
			continue
		}
		r.PartitionKey, r.Data = s.PartitionKey, s.Data
		out = append(out, canonicalRecord(r))
	}
	return out
}

// anys turns strings into passert values.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// canonical maps a PCollection of Record to canonical strings.
func canonical(s beam.Scope, recs beam.PCollection) beam.PCollection {
	return beam.ParDo(s, canonicalRecord, recs)
}

// sortedCopy returns ss sorted.
func sortedCopy(ss []string) []string {
	c := slices.Clone(ss)
	slices.Sort(c)
	return c
}

func init() {
	register.DoFn1x0[Record](&collectFn{})
}

// sinks hold what collectFn saw, per test. The pipelines run in this process (Prism with
// loopback workers), so a DoFn can hand its input to the test this way.
var (
	sinksMu sync.Mutex
	sinks   = map[string]*sink{}
)

type sink struct {
	mu   sync.Mutex
	strs []string
}

func (s *sink) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.strs)
}

// collectFn appends the canonical form of each record to the sink named Key.
type collectFn struct{ Key string }

func (fn *collectFn) ProcessElement(r Record) {
	sinksMu.Lock()
	s := sinks[fn.Key]
	sinksMu.Unlock()
	s.mu.Lock()
	s.strs = append(s.strs, canonicalRecord(r))
	s.mu.Unlock()
}

// collect sends recs to a new sink named key.
func collect(s beam.Scope, key string, recs beam.PCollection) *sink {
	sk := &sink{}
	sinksMu.Lock()
	sinks[key] = sk
	sinksMu.Unlock()
	beam.ParDo0(s, &collectFn{Key: key}, recs)
	return sk
}

// assertSameRecords compares two multisets of canonical records exactly, reporting
// duplicates, missing and unexpected records.
func assertSameRecords(t *testing.T, got, want []string) {
	t.Helper()
	count := map[string]int{}
	for _, w := range want {
		count[w]++
	}
	for _, g := range got {
		count[g]--
	}
	var missing, extra int
	for k, c := range count {
		switch {
		case c > 0:
			if missing < 5 {
				t.Errorf("missing %d× %s", c, k)
			}
			missing += c
		case c < 0:
			if extra < 5 {
				t.Errorf("unexpected or duplicated %d× %s", -c, k)
			}
			extra -= c
		}
	}
	if missing > 0 || extra > 0 || len(got) != len(want) {
		t.Fatalf("read %d records, want %d: %d missing, %d unexpected or duplicated", len(got), len(want), missing, extra)
	}
}

// assertReshardedReadExact checks the outcome of the split-and-merge workload (shard 0 split
// into 3 and 4, shards 1 and 2 merged into 5): every write arrived before the read's end, each
// child shard got records, and got holds exactly the stored records.
func assertReshardedReadExact(t *testing.T, srv *kinesistest.Server, stream string, aggs map[string][]kpl.UserRecord, readEnd time.Time, got []string) {
	t.Helper()
	want := expected(t, srv, stream, aggs, nil)
	stored, _ := srv.StreamRecords(stream)
	var last time.Time
	shardsWithData := map[string]bool{}
	for _, r := range stored {
		if r.ArrivalTime.After(last) {
			last = r.ArrivalTime
		}
		shardsWithData[r.ShardID] = true
	}
	if !last.Before(readEnd) {
		t.Fatalf("the writes ended at %v, after the read's earliest end %v; the test cannot tell what the read must return", last, readEnd)
	}
	for _, id := range []string{"shardId-000000000003", "shardId-000000000004", "shardId-000000000005"} {
		if !shardsWithData[id] {
			t.Fatalf("child shard %s got no records; the workload does not exercise it", id)
		}
	}
	assertSameRecords(t, got, want)
}

// writeWhileResharding is the split-and-merge workload: it writes a batch, splits shard 0 at
// the middle of its hash range (children 3 and 4), writes again, merges shards 1 and 2
// (child 5) and writes a last batch. Failures are reported with t.Errorf, so it may run in
// a goroutine.
func writeWhileResharding(t *testing.T, client *kinesis.Client, stream string, write func(prefix string)) {
	write("during1")
	parent := "shardId-000000000000"
	sh := listShards(t, client, stream)[parent]
	lo, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.EndingHashKey), 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if _, err := client.SplitShard(context.Background(), &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: aws.String(parent), NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		t.Errorf("SplitShard: %v", err)
		return
	}
	write("during2")
	if _, err := client.MergeShards(context.Background(), &kinesis.MergeShardsInput{
		StreamName: aws.String(stream), ShardToMerge: aws.String("shardId-000000000001"), AdjacentShardToMerge: aws.String("shardId-000000000002"),
	}); err != nil {
		t.Errorf("MergeShards: %v", err)
		return
	}
	write("during3")
}
