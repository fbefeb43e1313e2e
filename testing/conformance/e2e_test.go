package conformance

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// The end-to-end tests run the connector's transforms, on the Prism runner,
// against the two emulators: proof that the connector is not tuned to our own
// server. They are kept small: kinesis-local is slow to accept writes.

func init() {
	register.Function1x1(recordKey)
}

// recordKey identifies a record read by ReadBounded: shard, keys, data and
// whether it came out of an aggregate.
func recordKey(r kinesisio.Record) string {
	return userKey(r.ShardID, r.PartitionKey, r.ExplicitHashKey, r.Data, r.Aggregated)
}

func userKey(shard, pk, ehk string, data []byte, aggregated bool) string {
	return fmt.Sprintf("%s|%s|%s|%x|%v", shard, pk, ehk, data, aggregated)
}

// connect returns the options that point the connector at e followed by opts, read or
// write options (O is kinesisio.ReadOption or kinesisio.WriteOption).
func connect[O any](e *env, opts ...O) []O {
	client := []kinesisio.ClientOption{
		kinesisio.WithEndpoint(e.url), kinesisio.WithRegion("us-east-1"), kinesisio.WithStaticCredentials("test", "test"),
	}
	all := make([]O, 0, len(client)+len(opts))
	for _, c := range client {
		all = append(all, any(c).(O))
	}
	return append(all, opts...)
}

// forEachEmulator runs fn as a subtest per emulator, one after the other
// (each runs a pipeline, and the machine may have two cores).
func forEachEmulator(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, target := range []string{kinesisLocal, kinesalite} {
		t.Run(target, func(t *testing.T) {
			e := openTarget(t, target)
			fn(t, e)
			if t.Failed() && e.output() != "" {
				t.Logf("%s output (last part):\n%s", target, tail(e.output(), 4000))
			}
		})
	}
}

// openShards returns the stream's open shards.
func (e *env) openShards(t *testing.T, stream string) []types.Shard {
	t.Helper()
	var open []types.Shard
	for _, s := range e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(stream)}) {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, s)
		}
	}
	return open
}

// TestE2EReadBounded writes plain records and KPL aggregates with the SDK,
// splits a shard, writes more, and checks that kinesisio.ReadBounded from
// TRIM_HORIZON returns exactly the user records, each once, with the shard it
// was stored in.
func TestE2EReadBounded(t *testing.T) {
	forEachEmulator(t, func(t *testing.T, e *env) {
		name := e.newStream(t, 2)
		var want []string
		putPlain := func(from, to int) {
			var entries []types.PutRecordsRequestEntry
			for i := from; i < to; i++ {
				entries = append(entries, types.PutRecordsRequestEntry{
					PartitionKey: aws.String(fmt.Sprintf("plain-%03d", i)),
					Data:         fmt.Appendf(nil, "plain record %d", i),
				})
			}
			for i, r := range e.put(t, name, entries) {
				want = append(want, userKey(aws.ToString(r.ShardId), aws.ToString(entries[i].PartitionKey), "", entries[i].Data, false))
			}
		}
		putPlain(0, 100)

		// Ten aggregates of twelve user records, each aggregate's records
		// routed to one shard by their partition keys' MD5.
		shards := e.openShards(t, name)
		var entries []types.PutRecordsRequestEntry
		var users [][]kpl.UserRecord
		cand := 0
		for a := range 10 {
			shard := shards[a%len(shards)]
			lo := bigDec(t, aws.ToString(shard.HashKeyRange.StartingHashKey))
			hi := bigDec(t, aws.ToString(shard.HashKeyRange.EndingHashKey))
			agg := kpl.NewAggregator(1<<20, 12)
			var us []kpl.UserRecord
			for len(us) < 12 {
				pk := fmt.Sprintf("agg-%04d", cand)
				cand++
				if k := md5Key(pk); k.Cmp(lo) < 0 || k.Cmp(hi) > 0 {
					continue
				}
				u := kpl.UserRecord{PartitionKey: pk, Data: fmt.Appendf(nil, "aggregate %d user record %d", a, len(us))}
				if len(us) == 5 {
					u.ExplicitHashKey = lo.String() // also carried through
				}
				if err := agg.Add(u); err != nil {
					t.Fatal(err)
				}
				us = append(us, u)
			}
			kr, err := agg.Build()
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(kr.PartitionKey), ExplicitHashKey: aws.String(kr.ExplicitHashKey), Data: kr.Data})
			users = append(users, us)
		}
		for i, r := range e.put(t, name, entries) {
			for _, u := range users[i] {
				want = append(want, userKey(aws.ToString(r.ShardId), u.PartitionKey, u.ExplicitHashKey, u.Data, true))
			}
		}

		// Split shard 0; later records go to its children.
		r := shards[0].HashKeyRange
		mid := new(big.Int).Add(bigDec(t, aws.ToString(r.StartingHashKey)), bigDec(t, aws.ToString(r.EndingHashKey)))
		mid.Rsh(mid, 1)
		if _, err := e.c.SplitShard(ctx(t), &kinesis.SplitShardInput{StreamName: aws.String(name), ShardToSplit: shards[0].ShardId, NewStartingHashKey: aws.String(mid.String())}); err != nil {
			t.Fatalf("SplitShard: %v", err)
		}
		e.waitActive(t, name)
		putPlain(100, 160)

		// ReadBounded reads the records that arrived before it started.
		// kinesalite starts split children 1 s in the future (shardCreateTime
		// now+1000 in its splitShard.js), and records put into them before
		// then carry that future ApproximateArrivalTimestamp: wait until the
		// latest arrival time is past.
		var latest time.Time
		for _, sh := range e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(name)}) {
			it := e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			for _, r := range e.readAll(t, it, 0, false).records {
				if r.ApproximateArrivalTimestamp.After(latest) {
					latest = *r.ApproximateArrivalTimestamp
				}
			}
		}
		if wait := time.Until(latest); wait > 0 {
			t.Logf("latest record arrival %v is %v ahead of this clock; waiting for it", latest, wait)
			<-time.After(wait + time.Millisecond)
		}

		p, s := beam.NewPipelineWithRoot()
		recs := kinesisio.ReadBounded(s, name, connect(e, kinesisio.WithStartingPosition(kinesisio.TrimHorizon()))...)
		passert.Equals(s, beam.ParDo(s, recordKey, recs), anySlice(want)...)
		if err := ptest.Run(p); err != nil {
			t.Fatalf("ReadBounded of %d records: %v", len(want), err)
		}
	})
}

// TestE2EWrite writes messages with kinesisio.Write, aggregated and not, and
// checks, reading the stream back with the SDK and kpl.Deaggregate, that every
// message is stored exactly once, in the shard whose range holds its key.
func TestE2EWrite(t *testing.T) {
	forEachEmulator(t, func(t *testing.T, e *env) {
		for _, aggregate := range []bool{true, false} {
			t.Run(fmt.Sprintf("aggregation=%v", aggregate), func(t *testing.T) {
				name := e.newStream(t, 2)
				var msgs []kinesisio.Message
				want := map[string]int{}
				for i := range 300 {
					m := kinesisio.Message{PartitionKey: fmt.Sprintf("msg-%03d", i), Data: fmt.Appendf(nil, "message %d %s", i, strings.Repeat("x", i%40))}
					if i%10 == 0 {
						m.ExplicitHashKey = new(big.Int).Mul(big.NewInt(int64(i)), new(big.Int).Lsh(big.NewInt(1), 119)).String()
					}
					msgs = append(msgs, m)
					want[m.PartitionKey+"|"+string(m.Data)]++
				}
				mode := kinesisio.WithoutAggregation()
				if aggregate {
					mode = kinesisio.WithAggregation()
				}
				p, s := beam.NewPipelineWithRoot()
				failed := kinesisio.Write(s, name, beam.CreateList(s, msgs), connect(e, mode)...)
				passert.Empty(s, failed)
				if err := ptest.Run(p); err != nil {
					t.Fatalf("Write: %v", err)
				}

				got := map[string]int{}
				aggregates := 0
				byKey := map[string]kinesisio.Message{}
				for _, m := range msgs {
					byKey[m.PartitionKey] = m
				}
				for _, sh := range e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(name)}) {
					lo := bigDec(t, aws.ToString(sh.HashKeyRange.StartingHashKey))
					hi := bigDec(t, aws.ToString(sh.HashKeyRange.EndingHashKey))
					it := e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
					for _, rec := range e.readAll(t, it, 0, false).records {
						us, ok, err := kpl.Deaggregate(rec.Data)
						if err != nil {
							t.Fatalf("record %s: %v", aws.ToString(rec.SequenceNumber), err)
						}
						if ok {
							aggregates++
						} else {
							us = []kpl.UserRecord{{PartitionKey: aws.ToString(rec.PartitionKey), Data: rec.Data}}
						}
						for _, u := range us {
							got[u.PartitionKey+"|"+string(u.Data)]++
							m := byKey[u.PartitionKey]
							key := md5Key(m.PartitionKey)
							if m.ExplicitHashKey != "" {
								key = bigDec(t, m.ExplicitHashKey)
							}
							if key.Cmp(lo) < 0 || key.Cmp(hi) > 0 {
								t.Errorf("message %q is in %s, whose range does not hold its hash key", u.PartitionKey, aws.ToString(sh.ShardId))
							}
						}
					}
				}
				if d := diffMultiset(got, want); d != "" {
					t.Errorf("stream does not hold each message once: %s", d)
				}
				if aggregate && aggregates == 0 {
					t.Errorf("WithAggregation wrote no aggregates")
				}
				if !aggregate && aggregates != 0 {
					t.Errorf("WithoutAggregation wrote %d aggregates", aggregates)
				}
			})
		}
	})
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// diffMultiset describes how got differs from want, or returns "".
func diffMultiset(got, want map[string]int) string {
	var diffs []string
	for k, n := range want {
		if got[k] != n {
			diffs = append(diffs, fmt.Sprintf("%q: %d times, want %d", k, got[k], n))
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q: %d times, want none", k, n))
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 10 {
		diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
	}
	return strings.Join(diffs, "; ")
}
