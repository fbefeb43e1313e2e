package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

func TestSplitDuringTheWriteReroutes(t *testing.T) {
	for _, tc := range []struct {
		name         string
		faults       kinesistest.Faults
		wantRerouted bool // without faults, whether any are depends on timing
	}{
		{"no faults", kinesistest.Faults{}, false},
		// Failed entries are retried after the map has changed: retried aggregates of a
		// closed shard must be re-routed.
		{"30% failing entries", kinesistest.Faults{Seed: 9, PutEntryThrottleRate: 0.15, PutEntryInternalFailureRate: 0.15, Operations: []string{"PutRecords"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := kinesistest.StartT(t, kinesistest.WithStream("split", 2))
			cfg := testConfig("split", true)
			cfg.Limits.MaxAggregateRecords = 20 // many aggregates, so every path is taken
			cfg.Retry.Retries = 30
			p := newProducer(t, srv, cfg)
			const n = 6000
			putAll(t, p, 0, n/2)
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Split both shards in the middle of their ranges; the producer's map is now
			// stale (it refreshes every minute) and only the writes show the change.
			c := srv.Client()
			ls, err := c.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String("split")})
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range ls.Shards {
				start, _ := kpl.ParseUint128(*sh.HashKeyRange.StartingHashKey)
				end, _ := kpl.ParseUint128(*sh.HashKeyRange.EndingHashKey)
				mid := midpoint(start, end)
				if _, err := c.SplitShard(context.Background(), &kinesis.SplitShardInput{StreamName: aws.String("split"),
					ShardToSplit: sh.ShardId, NewStartingHashKey: aws.String(mid.String())}); err != nil {
					t.Fatal(err)
				}
				waitActive(t, c, "split")
			}
			srv.SetFaults(tc.faults)
			putAll(t, p, n/2, n)
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if f := p.Failures(); len(f) != 0 {
				t.Fatalf("%d failures, first: %+v", len(f), f[0])
			}
			st := p.TakeStats()
			if st.ShardMapRefresh == 0 || st.WrongShard == 0 || (tc.wantRerouted && st.Rerouted == 0) {
				t.Errorf("stats %+v: want the map refreshed, wrong-shard aggregates re-sent, retried records re-routed (%v)", st, tc.wantRerouted)
			}
			res := readBack(t, srv, "split")
			kept := res.Kept()
			if d := streamcheck.Diff(streamcheck.Multiset(kept, userKey), wantMultiset(0, n), 5); d != "" {
				t.Fatalf("records a KCL consumer keeps: %s", d)
			}
			inShard := make(map[string]int)
			for _, u := range kept {
				if !u.InRange {
					t.Fatalf("record %q kept in shard %s outside its range", u.PartitionKey, u.Shard)
				}
				inShard[u.Shard]++
			}
			if len(inShard) != 6 {
				t.Errorf("records in shards %v, want 6 shards (2 parents before the split, 4 children after)", inShard)
			}
			if res.MisplacedAggregates != int(st.WrongShard) {
				t.Errorf("%d misplaced aggregates in the stream, the producer re-sent %d", res.MisplacedAggregates, st.WrongShard)
			}
		})
	}
}

func midpoint(a, b kpl.Uint128) kpl.Uint128 {
	// (a+b)/2 without overflow: a + (b-a)/2.
	dHi, dLo := b.Hi-a.Hi, b.Lo-a.Lo
	if b.Lo < a.Lo {
		dHi--
	}
	half := kpl.Uint128{Hi: dHi >> 1, Lo: dLo>>1 | dHi<<63}
	lo := a.Lo + half.Lo
	hi := a.Hi + half.Hi
	if lo < a.Lo {
		hi++
	}
	return kpl.Uint128{Hi: hi, Lo: lo}
}

func waitActive(t *testing.T, c *kinesis.Client, stream string) {
	t.Helper()
	w := kinesis.NewStreamExistsWaiter(c, func(o *kinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 50*time.Millisecond
	})
	if err := w.Wait(context.Background(), &kinesis.DescribeStreamInput{StreamName: aws.String(stream)}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	out, err := c.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	if out.StreamDescriptionSummary.StreamStatus != types.StreamStatusActive {
		t.Fatalf("stream %s is %s after the waiter", stream, out.StreamDescriptionSummary.StreamStatus)
	}
}

func TestExplicitHashKeysRouteInsteadOfPartitionKeys(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("ehk", 4))
	p := newProducer(t, srv, testConfig("ehk", true))
	const n = 400
	for i := 0; i < n; i++ {
		// One partition key for all (MD5 routing would pick one shard); hash keys spread
		// evenly over the key space.
		ehk := kpl.Uint128{Hi: uint64(i) * (^uint64(0)/n + 1)}
		rec := kpl.UserRecord{PartitionKey: "same", ExplicitHashKey: ehk.String(), Data: fmt.Appendf(nil, "%d", i)}
		if err := p.Put(context.Background(), rec, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := readBack(t, srv, "ehk")
	perShard := make(map[string]int)
	for _, u := range res.Records {
		if !u.Aggregated || !u.InRange {
			t.Fatalf("record %s: aggregated %v, in range %v; want an aggregated record in its explicit hash key's shard", u.Data, u.Aggregated, u.InRange)
		}
		perShard[u.Shard]++
	}
	if len(res.Records) != n || len(perShard) != 4 {
		t.Fatalf("%d records over shards %v, want %d spread over 4", len(res.Records), perShard, n)
	}
	for shard, c := range perShard {
		if c != n/4 {
			t.Errorf("shard %s holds %d records, want %d", shard, c, n/4)
		}
	}
}
