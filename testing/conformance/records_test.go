package conformance

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// TestPutGetRoundTrip: PutRecords and PutRecord route by MD5 of the partition
// key or by the explicit hash key, and GetRecords returns every record with
// its exact data, partition key and sequence number, in order.
func TestPutGetRoundTrip(t *testing.T) {
	forEachTarget(t, func(t *testing.T, e *env) {
		name := e.newStream(t, 2)
		shards := e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(name)})

		type sent struct {
			pk, ehk string
			data    []byte
			shard   string
			seq     string
		}
		var records []sent
		var entries []types.PutRecordsRequestEntry
		for i := range 40 {
			s := sent{pk: fmt.Sprintf("key-%02d-é", i)}
			s.data = make([]byte, 1+i*37)
			for j := range s.data {
				s.data[j] = byte(i*31 + j) // every byte value occurs
			}
			var key *big.Int
			switch {
			case i%5 == 0:
				s.ehk = "0"
			case i%5 == 1:
				s.ehk = maxHashKey.String()
			}
			if s.ehk != "" {
				key = bigDec(t, s.ehk)
			} else {
				key = md5Key(s.pk)
			}
			s.shard = routeShard(t, shards, key)
			records = append(records, s)
			entry := types.PutRecordsRequestEntry{PartitionKey: aws.String(s.pk), Data: s.data}
			if s.ehk != "" {
				entry.ExplicitHashKey = aws.String(s.ehk)
			}
			entries = append(entries, entry)
		}
		results := e.put(t, name, entries[:30])
		for i, r := range results {
			records[i].seq = aws.ToString(r.SequenceNumber)
			if got := aws.ToString(r.ShardId); got != records[i].shard {
				t.Errorf("record %d (pk %q ehk %q) went to %s, want %s", i, records[i].pk, records[i].ehk, got, records[i].shard)
			}
		}
		for i := 30; i < 40; i++ {
			out, err := e.c.PutRecord(ctx(t), &kinesis.PutRecordInput{
				StreamName: aws.String(name), PartitionKey: entries[i].PartitionKey,
				ExplicitHashKey: entries[i].ExplicitHashKey, Data: entries[i].Data,
			})
			if err != nil {
				t.Fatalf("PutRecord %d: %v", i, err)
			}
			records[i].seq = aws.ToString(out.SequenceNumber)
			if got := aws.ToString(out.ShardId); got != records[i].shard {
				t.Errorf("PutRecord %d (pk %q) went to %s, want %s", i, records[i].pk, got, records[i].shard)
			}
		}

		for _, sh := range shards {
			id := aws.ToString(sh.ShardId)
			var want []sent
			for _, r := range records {
				if r.shard == id {
					want = append(want, r)
				}
			}
			it := e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			got := e.readAll(t, it, 0, false).records
			if len(got) != len(want) {
				t.Fatalf("shard %s: read %d records, want %d", id, len(got), len(want))
			}
			prev := big.NewInt(-1)
			for i, g := range got {
				w := want[i]
				if aws.ToString(g.PartitionKey) != w.pk || string(g.Data) != string(w.data) || aws.ToString(g.SequenceNumber) != w.seq {
					t.Errorf("shard %s record %d = pk %q seq %s %d bytes, want pk %q seq %s %d bytes (same data: %v)",
						id, i, aws.ToString(g.PartitionKey), aws.ToString(g.SequenceNumber), len(g.Data), w.pk, w.seq, len(w.data), string(g.Data) == string(w.data))
				}
				seq := bigDec(t, aws.ToString(g.SequenceNumber))
				if seq.Cmp(prev) <= 0 {
					t.Errorf("shard %s: sequence number %v does not grow after %v", id, seq, prev)
				}
				prev = seq
				if g.ApproximateArrivalTimestamp == nil {
					t.Errorf("shard %s record %d has no ApproximateArrivalTimestamp", id, i)
				}
			}
		}
	})
}

// TestIterators: every shard iterator type, and GetRecords Limit paging.
func TestIterators(t *testing.T) {
	forEachTarget(t, func(t *testing.T, e *env) {
		name := e.newStream(t, 1)
		shard := aws.String("shardId-000000000000")
		latest := e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shard, ShardIteratorType: types.ShardIteratorTypeLatest})

		var entries []types.PutRecordsRequestEntry
		for i := range 5 {
			entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("k%d", i)), Data: []byte{byte('a' + i)}})
		}
		res := e.put(t, name, entries)
		seqs := make([]string, len(res))
		for i, r := range res {
			seqs[i] = aws.ToString(r.SequenceNumber)
		}
		data := func(rs []types.Record) string {
			var b strings.Builder
			for _, r := range rs {
				b.Write(r.Data)
			}
			return b.String()
		}

		// An iterator taken before the writes sees them all.
		if got := data(e.readAll(t, latest, 0, false).records); got != "abcde" {
			t.Errorf("LATEST taken before the writes read %q, want %q", got, "abcde")
		}
		trim := e.readAll(t, e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shard, ShardIteratorType: types.ShardIteratorTypeTrimHorizon}), 2, false)
		if got := data(trim.records); got != "abcde" {
			t.Errorf("TRIM_HORIZON read %q, want %q", got, "abcde")
		}
		if !slices.Equal(trim.pages, []int{2, 2, 1}) {
			t.Errorf("TRIM_HORIZON with Limit 2: pages of %v records, want [2 2 1]", trim.pages)
		}
		at := e.readAll(t, e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shard,
			ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(seqs[2])}), 0, false)
		if got := data(at.records); got != "cde" {
			t.Errorf("AT_SEQUENCE_NUMBER of the third record read %q, want %q", got, "cde")
		}
		afterIt := e.readAll(t, e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shard,
			ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String(seqs[2])}), 0, false)
		if got := data(afterIt.records); got != "de" {
			t.Errorf("AFTER_SEQUENCE_NUMBER of the third record read %q, want %q", got, "de")
		}
		afterLast := e.readAll(t, e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shard,
			ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String(seqs[4])}), 0, false)
		if got := data(afterLast.records); got != "" {
			t.Errorf("AFTER_SEQUENCE_NUMBER of the last record read %q, want nothing", got)
		}

		// LATEST taken now sees only later writes.
		latest = e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shard, ShardIteratorType: types.ShardIteratorTypeLatest})
		e.put(t, name, []types.PutRecordsRequestEntry{{PartitionKey: aws.String("k5"), Data: []byte("f")}, {PartitionKey: aws.String("k6"), Data: []byte("g")}})
		if got := data(e.readAll(t, latest, 0, false).records); got != "fg" {
			t.Errorf("LATEST taken after 5 writes read %q, want %q", got, "fg")
		}

		t.Run("AT_TIMESTAMP", func(t *testing.T) {
			skipGap(t, e.target, "atTimestamp")
			all := e.readAll(t, e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shard, ShardIteratorType: types.ShardIteratorTypeTrimHorizon}), 0, false).records
			if len(all) != 7 {
				t.Fatalf("read %d records, want 7", len(all))
			}
			for _, tc := range []struct {
				name string
				ts   time.Time
			}{
				{"long before", time.Now().Add(-time.Hour)},
				{"at the third record", *all[2].ApproximateArrivalTimestamp},
				{"at the sixth record", *all[5].ApproximateArrivalTimestamp},
			} {
				var want string
				for _, r := range all {
					if !r.ApproximateArrivalTimestamp.Before(tc.ts) {
						want += string(r.Data)
					}
				}
				got := data(e.readAll(t, e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shard,
					ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(tc.ts)}), 0, false).records)
				if got != want {
					t.Errorf("AT_TIMESTAMP %s (%v) read %q, want the records arrived at or after it, %q", tc.name, tc.ts, got, want)
				}
			}
			// A timestamp in the future is rejected.
			_, err := e.c.GetShardIterator(ctx(t), &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shard,
				ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(time.Now().Add(time.Hour))})
			if got := errorCode(err); got != "InvalidArgumentException" {
				t.Errorf("AT_TIMESTAMP an hour ahead: error %q, want InvalidArgumentException", got)
			}
		})
	})
}
