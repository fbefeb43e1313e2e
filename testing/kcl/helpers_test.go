package kcl

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.DoFn1x0[kinesisio.Record](&collectFn{})
}

// rec is one user record as a reader reports it.
type rec struct {
	Shard, PK, Seq string
	Sub            int64
	Data           []byte
}

func (r rec) String() string {
	return fmt.Sprintf("%s|%s|%s|%d|%s", r.Shard, r.PK, r.Seq, r.Sub, base64.StdEncoding.EncodeToString(r.Data))
}

// after says whether r comes after the checkpoint (seq, sub) of its shard; a symbolic
// checkpoint (TRIM_HORIZON, ...) is before every record, SHARD_END after every one.
func (r rec) after(cp lease) bool {
	switch cp.Checkpoint {
	case "SHARD_END":
		return false
	case "TRIM_HORIZON", "LATEST", "AT_TIMESTAMP", "":
		return true
	}
	if c := compareSeq(r.Seq, cp.Checkpoint); c != 0 {
		return c > 0
	}
	return r.Sub > cp.Sub
}

// compareSeq orders decimal sequence numbers.
func compareSeq(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

func strs(rs []rec) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// put writes plain records and KPL aggregates of perAgg user records, interleaved, and
// returns the aggregates' user records by the aggregate's bytes.
func put(t *testing.T, client *kinesis.Client, stream, prefix string, plain, aggs, perAgg int, into map[string][]kpl.UserRecord) {
	t.Helper()
	var entries []types.PutRecordsRequestEntry
	for i := range plain {
		entries = append(entries, types.PutRecordsRequestEntry{
			PartitionKey: aws.String(fmt.Sprintf("%s-pk-%d", prefix, i)),
			Data:         []byte(fmt.Sprintf("%s plain %d", prefix, i)),
		})
	}
	for i := range aggs {
		a := kpl.NewAggregator(1<<20, perAgg)
		var users []kpl.UserRecord
		for j := range perAgg {
			u := kpl.UserRecord{PartitionKey: fmt.Sprintf("%s-agg-%d", prefix, i), Data: []byte(fmt.Sprintf("%s agg %d/%d", prefix, i, j))}
			if err := a.Add(u); err != nil {
				t.Fatal(err)
			}
			users = append(users, u)
		}
		kr, err := a.Build()
		if err != nil {
			t.Fatal(err)
		}
		into[string(kr.Data)] = users
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(kr.PartitionKey), ExplicitHashKey: aws.String(kr.ExplicitHashKey), Data: kr.Data})
	}
	// Interleave aggregates with plain records, deterministically.
	x := uint64(len(entries))
	for i := len(entries) - 1; i > 0; i-- {
		x = x*6364136223846793005 + 1442695040888963407
		j := int(x>>33) % (i + 1)
		entries[i], entries[j] = entries[j], entries[i]
	}
	for len(entries) > 0 {
		n := min(len(entries), 500)
		out, err := client.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries[:n]})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("PutRecords: %d entries failed", aws.ToInt32(out.FailedRecordCount))
		}
		entries = entries[n:]
	}
}

// stored is every user record the stream holds, aggregates split into their user records.
func stored(t *testing.T, srv *kinesistest.Server, stream string, aggs map[string][]kpl.UserRecord) []rec {
	t.Helper()
	all, err := srv.StreamRecords(stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []rec
	for _, s := range all {
		if users, ok := aggs[string(s.Data)]; ok {
			for i, u := range users {
				out = append(out, rec{Shard: s.ShardID, PK: u.PartitionKey, Seq: s.SequenceNumber, Sub: int64(i), Data: u.Data})
			}
			continue
		}
		out = append(out, rec{Shard: s.ShardID, PK: s.PartitionKey, Seq: s.SequenceNumber, Data: s.Data})
	}
	return out
}

type sink struct {
	mu   sync.Mutex
	recs []rec
}

func (s *sink) get() []rec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rec(nil), s.recs...)
}

// collectFn appends each record to the sink named Key.
type collectFn struct{ Key string }

func (fn *collectFn) ProcessElement(r kinesisio.Record) {
	sinksMu.Lock()
	s := sinks[fn.Key]
	sinksMu.Unlock()
	s.mu.Lock()
	s.recs = append(s.recs, rec{Shard: r.ShardID, PK: r.PartitionKey, Seq: r.SequenceNumber, Sub: r.SubSequenceNumber, Data: r.Data})
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

// assertSame compares two multisets of records exactly.
func assertSame(t *testing.T, what string, got, want []rec) {
	t.Helper()
	count := map[string]int{}
	for _, w := range strs(want) {
		count[w]++
	}
	for _, g := range strs(got) {
		count[g]--
	}
	var missing, extra int
	for k, c := range count {
		switch {
		case c > 0:
			if missing < 5 {
				t.Errorf("%s: missing %d× %s", what, c, k)
			}
			missing += c
		case c < 0:
			if extra < 5 {
				t.Errorf("%s: unexpected or duplicated %d× %s", what, -c, k)
			}
			extra -= c
		}
	}
	if missing > 0 || extra > 0 || len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d: %d missing, %d unexpected or duplicated", what, len(got), len(want), missing, extra)
	}
}

// split partitions rs by whether each comes after its shard's checkpoint in ls.
func split(t *testing.T, rs []rec, ls map[string]lease) (before, after []rec) {
	t.Helper()
	for _, r := range rs {
		l, ok := ls[r.Shard]
		if !ok {
			t.Fatalf("no lease for shard %s", r.Shard)
		}
		if r.after(l) {
			after = append(after, r)
		} else {
			before = append(before, r)
		}
	}
	return before, after
}

// splitShard splits shard at the middle of its hash key range.
func splitShard(t *testing.T, client *kinesis.Client, stream, shard string) {
	t.Helper()
	out, err := client.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range out.Shards {
		if aws.ToString(sh.ShardId) != shard {
			continue
		}
		lo, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.StartingHashKey), 10)
		hi, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.EndingHashKey), 10)
		mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
		_, err := client.SplitShard(context.Background(), &kinesis.SplitShardInput{
			StreamName: aws.String(stream), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(mid.String()),
		})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("stream %s has no shard %s", stream, shard)
}
