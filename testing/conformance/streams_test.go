package conformance

import (
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// maxHashKey is 2^128-1, the end of the hash key space.
var maxHashKey = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

func bigDec(t *testing.T, s string) *big.Int {
	t.Helper()
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("%q is not a decimal integer", s)
	}
	return n
}

// checkCoverage fails t unless the shards' hash key ranges are contiguous,
// sorted as given, and cover the whole hash key space.
func checkCoverage(t *testing.T, shards []types.Shard) {
	t.Helper()
	next := big.NewInt(0)
	for _, s := range shards {
		start := bigDec(t, aws.ToString(s.HashKeyRange.StartingHashKey))
		end := bigDec(t, aws.ToString(s.HashKeyRange.EndingHashKey))
		if start.Cmp(next) != 0 {
			t.Fatalf("shard %s starts at %v, want %v", aws.ToString(s.ShardId), start, next)
		}
		next = new(big.Int).Add(end, big.NewInt(1))
	}
	if want := new(big.Int).Add(maxHashKey, big.NewInt(1)); next.Cmp(want) != 0 {
		t.Fatalf("shards end at %v, want 2^128-1", new(big.Int).Sub(next, big.NewInt(1)))
	}
}

func shardIDs(shards []types.Shard) []string {
	ids := make([]string, len(shards))
	for i, s := range shards {
		ids[i] = aws.ToString(s.ShardId)
	}
	return ids
}

var streamARNPattern = regexp.MustCompile(`^arn:aws:kinesis:us-east-1:\d{12}:stream/`)

// TestStreamLifecycle: CreateStream, DescribeStream, DescribeStreamSummary,
// ListStreams, DeleteStream, and the errors for a duplicate and a deleted
// stream.
func TestStreamLifecycle(t *testing.T) {
	forEachTarget(t, func(t *testing.T, e *env) {
		name := e.newStream(t, 3)

		sum := e.waitActive(t, name)
		if got := aws.ToString(sum.StreamName); got != name {
			t.Errorf("summary StreamName = %q, want %q", got, name)
		}
		if arn := aws.ToString(sum.StreamARN); !streamARNPattern.MatchString(arn) || !strings.HasSuffix(arn, "/"+name) {
			t.Errorf("summary StreamARN = %q, want arn:aws:kinesis:us-east-1:<account>:stream/%s", arn, name)
		}
		if got := aws.ToInt32(sum.OpenShardCount); got != 3 {
			t.Errorf("OpenShardCount = %d, want 3", got)
		}
		if got := aws.ToInt32(sum.RetentionPeriodHours); got != 24 {
			t.Errorf("RetentionPeriodHours = %d, want 24", got)
		}
		if sum.StreamCreationTimestamp == nil || time.Since(*sum.StreamCreationTimestamp) > time.Hour || time.Until(*sum.StreamCreationTimestamp) > time.Minute {
			t.Errorf("StreamCreationTimestamp = %v, want about now", sum.StreamCreationTimestamp)
		}
		if sum.EncryptionType != "" && sum.EncryptionType != types.EncryptionTypeNone {
			t.Errorf("EncryptionType = %q, want NONE", sum.EncryptionType)
		}
		t.Run("StreamModeDetails", func(t *testing.T) {
			skipGap(t, e.target, "streamModeDetails")
			if sum.StreamModeDetails == nil || sum.StreamModeDetails.StreamMode != types.StreamModeProvisioned {
				t.Errorf("StreamModeDetails = %+v, want PROVISIONED", sum.StreamModeDetails)
			}
		})

		desc, err := e.c.DescribeStream(ctx(t), &kinesis.DescribeStreamInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatalf("DescribeStream: %v", err)
		}
		d := desc.StreamDescription
		if d.StreamStatus != types.StreamStatusActive || aws.ToString(d.StreamName) != name ||
			aws.ToString(d.StreamARN) != aws.ToString(sum.StreamARN) || aws.ToBool(d.HasMoreShards) {
			t.Errorf("DescribeStream = status %s name %q arn %q hasMore %v; want ACTIVE %q %q false",
				d.StreamStatus, aws.ToString(d.StreamName), aws.ToString(d.StreamARN), aws.ToBool(d.HasMoreShards), name, aws.ToString(sum.StreamARN))
		}
		if len(d.Shards) != 3 {
			t.Fatalf("DescribeStream lists %d shards, want 3", len(d.Shards))
		}
		checkCoverage(t, d.Shards)
		for _, s := range d.Shards {
			if s.ParentShardId != nil || s.AdjacentParentShardId != nil || s.SequenceNumberRange == nil ||
				s.SequenceNumberRange.StartingSequenceNumber == nil || s.SequenceNumberRange.EndingSequenceNumber != nil {
				t.Errorf("new shard %s = %+v, want no parents, a starting and no ending sequence number", aws.ToString(s.ShardId), s)
			}
		}
		ids := shardIDs(d.Shards)
		if want := []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002"}; !slices.Equal(ids, want) {
			t.Errorf("shard ids = %q, want %q", ids, want)
		}

		t.Run("StreamARN", func(t *testing.T) {
			skipGap(t, e.target, "streamARN")
			byARN, err := e.c.DescribeStreamSummary(ctx(t), &kinesis.DescribeStreamSummaryInput{StreamARN: sum.StreamARN})
			if err != nil {
				t.Fatalf("DescribeStreamSummary by ARN: %v", err)
			}
			if got := aws.ToString(byARN.StreamDescriptionSummary.StreamName); got != name {
				t.Errorf("DescribeStreamSummary by ARN names %q, want %q", got, name)
			}
		})

		if !e.listsStream(t, name) {
			t.Errorf("ListStreams does not list %s", name)
		}

		t.Run("Retention", func(t *testing.T) {
			if _, err := e.c.IncreaseStreamRetentionPeriod(ctx(t), &kinesis.IncreaseStreamRetentionPeriodInput{StreamName: aws.String(name), RetentionPeriodHours: aws.Int32(48)}); err != nil {
				t.Fatalf("IncreaseStreamRetentionPeriod to 48: %v", err)
			}
			if got := aws.ToInt32(e.waitActive(t, name).RetentionPeriodHours); got != 48 {
				t.Errorf("RetentionPeriodHours after increase = %d, want 48", got)
			}
			_, err := e.c.IncreaseStreamRetentionPeriod(ctx(t), &kinesis.IncreaseStreamRetentionPeriodInput{StreamName: aws.String(name), RetentionPeriodHours: aws.Int32(36)})
			if got := errorCode(err); got != "InvalidArgumentException" {
				t.Errorf("IncreaseStreamRetentionPeriod to less than the current: error %q, want InvalidArgumentException", got)
			}
			if _, err := e.c.DecreaseStreamRetentionPeriod(ctx(t), &kinesis.DecreaseStreamRetentionPeriodInput{StreamName: aws.String(name), RetentionPeriodHours: aws.Int32(24)}); err != nil {
				t.Fatalf("DecreaseStreamRetentionPeriod to 24: %v", err)
			}
			if got := aws.ToInt32(e.waitActive(t, name).RetentionPeriodHours); got != 24 {
				t.Errorf("RetentionPeriodHours after decrease = %d, want 24", got)
			}
		})

		_, err = e.c.CreateStream(ctx(t), &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)})
		if got := errorCode(err); got != "ResourceInUseException" {
			t.Errorf("CreateStream of an existing stream: error %q, want ResourceInUseException", got)
		}

		if _, err := e.c.DeleteStream(ctx(t), &kinesis.DeleteStreamInput{StreamName: aws.String(name)}); err != nil {
			t.Fatalf("DeleteStream: %v", err)
		}
		// The stream may stay DELETING for a while; then it is gone.
		deadline := time.Now().Add(30 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		loggedActive := false
		for {
			out, err := e.c.DescribeStreamSummary(ctx(t), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
			if code := errorCode(err); code == "ResourceNotFoundException" {
				break
			} else if err != nil {
				t.Fatalf("DescribeStreamSummary after delete: %v", err)
			} else if st := out.StreamDescriptionSummary.StreamStatus; st != types.StreamStatusDeleting {
				reason, ok := gaps[e.target]["deletingStatus"]
				if !ok || st != types.StreamStatusActive {
					t.Fatalf("after DeleteStream the stream is %s, want DELETING or gone", st)
				}
				if !loggedActive {
					t.Logf("stream ACTIVE after DeleteStream, tolerated: %s", reason)
					loggedActive = true
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("stream still DELETING after 30s")
			}
			<-tick.C
		}
		if e.listsStream(t, name) {
			t.Errorf("ListStreams still lists deleted stream %s", name)
		}
		_, err = e.c.DeleteStream(ctx(t), &kinesis.DeleteStreamInput{StreamName: aws.String(name)})
		if got := errorCode(err); got != "ResourceNotFoundException" {
			t.Errorf("DeleteStream of a deleted stream: error %q, want ResourceNotFoundException", got)
		}
	})
}

// listsStream reports whether ListStreams, followed through every page,
// names the stream.
func (e *env) listsStream(t *testing.T, name string) bool {
	t.Helper()
	in := &kinesis.ListStreamsInput{Limit: aws.Int32(100)}
	for page := 0; page < 100; page++ {
		out, err := e.c.ListStreams(ctx(t), in)
		if err != nil {
			t.Fatalf("ListStreams: %v", err)
		}
		if slices.Contains(out.StreamNames, name) {
			return true
		}
		if !aws.ToBool(out.HasMoreStreams) || len(out.StreamNames) == 0 {
			return false
		}
		in = &kinesis.ListStreamsInput{Limit: aws.Int32(100), ExclusiveStartStreamName: aws.String(out.StreamNames[len(out.StreamNames)-1])}
	}
	t.Fatal("ListStreams: more than 100 pages")
	return false
}

// TestListShards: paging with MaxResults and NextToken, ExclusiveStartShardId
// and the ShardFilter types that do not depend on time, on a stream with a
// closed shard.
func TestListShards(t *testing.T) {
	forEachTarget(t, func(t *testing.T, e *env) {
		name := e.newStream(t, 3)
		shards := e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(name)})
		if len(shards) != 3 {
			t.Fatalf("ListShards lists %d shards, want 3", len(shards))
		}
		// Split shard 0 in the middle of its range: shard 0 closes, shards
		// 3 and 4 open.
		r := shards[0].HashKeyRange
		mid := new(big.Int).Add(bigDec(t, aws.ToString(r.StartingHashKey)), bigDec(t, aws.ToString(r.EndingHashKey)))
		mid.Rsh(mid, 1)
		if _, err := e.c.SplitShard(ctx(t), &kinesis.SplitShardInput{
			StreamName: aws.String(name), ShardToSplit: shards[0].ShardId, NewStartingHashKey: aws.String(mid.String()),
		}); err != nil {
			t.Fatalf("SplitShard: %v", err)
		}
		e.waitActive(t, name)

		all := e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(name)})
		wantAll := []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003", "shardId-000000000004"}
		if got := shardIDs(all); !slices.Equal(got, wantAll) {
			t.Fatalf("ListShards = %q, want %q", got, wantAll)
		}

		t.Run("Paging", func(t *testing.T) {
			skipGap(t, e.target, "listShardsPaging")
			paged := e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(name), MaxResults: aws.Int32(2)})
			if got := shardIDs(paged); !slices.Equal(got, wantAll) {
				t.Errorf("ListShards with MaxResults 2, all pages = %q, want %q", got, wantAll)
			}
			first, err := e.c.ListShards(ctx(t), &kinesis.ListShardsInput{StreamName: aws.String(name), MaxResults: aws.Int32(2)})
			if err != nil {
				t.Fatalf("ListShards: %v", err)
			}
			if len(first.Shards) != 2 || first.NextToken == nil {
				t.Fatalf("first page of 2: %d shards, NextToken %v; want 2 and a token", len(first.Shards), first.NextToken)
			}
			// NextToken together with StreamName is invalid.
			_, err = e.c.ListShards(ctx(t), &kinesis.ListShardsInput{StreamName: aws.String(name), NextToken: first.NextToken})
			if got := errorCode(err); got != "InvalidArgumentException" {
				t.Errorf("ListShards with NextToken and StreamName: error %q, want InvalidArgumentException", got)
			}
		})

		t.Run("DescribeStreamPaging", func(t *testing.T) {
			skipGap(t, e.target, "describeStreamPaging")
			var ids []string
			in := &kinesis.DescribeStreamInput{StreamName: aws.String(name), Limit: aws.Int32(2)}
			for page := 0; ; page++ {
				out, err := e.c.DescribeStream(ctx(t), in)
				if err != nil {
					t.Fatalf("DescribeStream: %v", err)
				}
				got := shardIDs(out.StreamDescription.Shards)
				if len(got) > 2 {
					t.Fatalf("DescribeStream Limit 2 returned %d shards", len(got))
				}
				ids = append(ids, got...)
				if !aws.ToBool(out.StreamDescription.HasMoreShards) {
					break
				}
				if page > 10 || len(got) == 0 {
					t.Fatalf("DescribeStream paging does not end")
				}
				in.ExclusiveStartShardId = aws.String(got[len(got)-1])
			}
			if !slices.Equal(ids, wantAll) {
				t.Errorf("DescribeStream pages = %q, want %q", ids, wantAll)
			}
		})

		after := e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(name), ExclusiveStartShardId: aws.String("shardId-000000000001")})
		if got, want := shardIDs(after), wantAll[2:]; !slices.Equal(got, want) {
			t.Errorf("ListShards ExclusiveStartShardId shardId-000000000001 = %q, want %q", got, want)
		}

		t.Run("ShardFilter", func(t *testing.T) {
			skipGap(t, e.target, "shardFilter")
			for _, tc := range []struct {
				filter types.ShardFilter
				want   []string
			}{
				{types.ShardFilter{Type: types.ShardFilterTypeAtLatest}, wantAll[1:]},
				{types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon}, wantAll[:3]},
				{types.ShardFilter{Type: types.ShardFilterTypeFromTrimHorizon}, wantAll},
				{types.ShardFilter{Type: types.ShardFilterTypeAfterShardId, ShardId: aws.String("shardId-000000000002")}, wantAll[3:]},
			} {
				t.Run(string(tc.filter.Type), func(t *testing.T) {
					skipGap(t, e.target, "shardFilter"+string(tc.filter.Type))
					got := shardIDs(e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(name), ShardFilter: &tc.filter}))
					if !slices.Equal(got, tc.want) {
						t.Errorf("ShardFilter %s %s = %q, want %q", tc.filter.Type, aws.ToString(tc.filter.ShardId), got, tc.want)
					}
				})
			}
		})
	})
}

// routeShard returns the id of the shard whose hash key range holds key.
func routeShard(t *testing.T, shards []types.Shard, key *big.Int) string {
	t.Helper()
	for _, s := range shards {
		if s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil {
			continue // closed
		}
		lo := bigDec(t, aws.ToString(s.HashKeyRange.StartingHashKey))
		hi := bigDec(t, aws.ToString(s.HashKeyRange.EndingHashKey))
		if key.Cmp(lo) >= 0 && key.Cmp(hi) <= 0 {
			return aws.ToString(s.ShardId)
		}
	}
	t.Fatalf("no open shard holds hash key %v", key)
	return ""
}

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

// TestSplitLineage: SplitShard closes the parent with an EndingSequenceNumber,
// the children name it as ParentShardId and split its range at
// NewStartingHashKey, new writes go to the children, and reading the parent
// to its end yields its records, then no iterator and the ChildShards.
func TestSplitLineage(t *testing.T) {
	forEachTarget(t, func(t *testing.T, e *env) {
		name := e.newStream(t, 1)
		parent := "shardId-000000000000"
		before := e.put(t, name, []types.PutRecordsRequestEntry{
			{PartitionKey: aws.String("a"), Data: []byte("1")},
			{PartitionKey: aws.String("b"), Data: []byte("2")},
		})
		half := new(big.Int).Lsh(big.NewInt(1), 127)
		if _, err := e.c.SplitShard(ctx(t), &kinesis.SplitShardInput{
			StreamName: aws.String(name), ShardToSplit: aws.String(parent), NewStartingHashKey: aws.String(half.String()),
		}); err != nil {
			t.Fatalf("SplitShard: %v", err)
		}
		e.waitActive(t, name)
		shards := e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(name)})
		if got, want := shardIDs(shards), []string{parent, "shardId-000000000001", "shardId-000000000002"}; !slices.Equal(got, want) {
			t.Fatalf("shards after split = %q, want %q", got, want)
		}
		p := shards[0]
		if p.SequenceNumberRange == nil || p.SequenceNumberRange.EndingSequenceNumber == nil {
			t.Fatalf("split parent has no EndingSequenceNumber: %+v", p.SequenceNumberRange)
		}
		end := bigDec(t, aws.ToString(p.SequenceNumberRange.EndingSequenceNumber))
		if last := bigDec(t, aws.ToString(before[1].SequenceNumber)); end.Cmp(last) < 0 {
			if reason, ok := gaps[e.target]["endingSequenceNumber"]; ok {
				t.Logf("not checking EndingSequenceNumber %v against the last record %v: %s", end, last, reason)
			} else {
				t.Errorf("parent EndingSequenceNumber %v is before its last record %v", end, last)
			}
		}
		wantRanges := [][2]string{{"0", new(big.Int).Sub(half, big.NewInt(1)).String()}, {half.String(), maxHashKey.String()}}
		for i, c := range shards[1:] {
			if aws.ToString(c.ParentShardId) != parent || c.AdjacentParentShardId != nil {
				t.Errorf("child %s: ParentShardId %v AdjacentParentShardId %v, want %s and none",
					aws.ToString(c.ShardId), aws.ToString(c.ParentShardId), aws.ToString(c.AdjacentParentShardId), parent)
			}
			if got := [2]string{aws.ToString(c.HashKeyRange.StartingHashKey), aws.ToString(c.HashKeyRange.EndingHashKey)}; got != wantRanges[i] {
				t.Errorf("child %s range %v, want %v", aws.ToString(c.ShardId), got, wantRanges[i])
			}
			if c.SequenceNumberRange.EndingSequenceNumber != nil {
				t.Errorf("child %s is closed", aws.ToString(c.ShardId))
			}
		}

		// A write after the split lands in a child.
		after := e.put(t, name, []types.PutRecordsRequestEntry{
			{PartitionKey: aws.String("x"), ExplicitHashKey: aws.String("1"), Data: []byte("low")},
			{PartitionKey: aws.String("y"), ExplicitHashKey: aws.String(half.String()), Data: []byte("high")},
		})
		if got := []string{aws.ToString(after[0].ShardId), aws.ToString(after[1].ShardId)}; !slices.Equal(got, []string{"shardId-000000000001", "shardId-000000000002"}) {
			t.Errorf("writes after the split went to %q, want the two children", got)
		}

		res := e.readAll(t, e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(parent), ShardIteratorType: types.ShardIteratorTypeTrimHorizon}), 0, true)
		if len(res.records) != 2 || string(res.records[0].Data) != "1" || string(res.records[1].Data) != "2" {
			t.Errorf("parent read %d records, want its 2", len(res.records))
		}
		if !res.closed {
			t.Errorf("reading the closed parent never ended (NextShardIterator kept coming)")
		}
		t.Run("ChildShards", func(t *testing.T) {
			skipGap(t, e.target, "childShards")
			checkChildShards(t, res.childShards, map[string][]string{
				"shardId-000000000001": {parent},
				"shardId-000000000002": {parent},
			})
		})
	})
}

// TestMergeLineage: MergeShards closes both parents, and the child names them
// as ParentShardId and AdjacentParentShardId and covers both ranges.
func TestMergeLineage(t *testing.T) {
	forEachTarget(t, func(t *testing.T, e *env) {
		name := e.newStream(t, 2)
		a, b := "shardId-000000000000", "shardId-000000000001"
		if _, err := e.c.MergeShards(ctx(t), &kinesis.MergeShardsInput{
			StreamName: aws.String(name), ShardToMerge: aws.String(a), AdjacentShardToMerge: aws.String(b),
		}); err != nil {
			t.Fatalf("MergeShards: %v", err)
		}
		e.waitActive(t, name)
		shards := e.listShards(t, &kinesis.ListShardsInput{StreamName: aws.String(name)})
		if got, want := shardIDs(shards), []string{a, b, "shardId-000000000002"}; !slices.Equal(got, want) {
			t.Fatalf("shards after merge = %q, want %q", got, want)
		}
		for _, p := range shards[:2] {
			if p.SequenceNumberRange.EndingSequenceNumber == nil {
				t.Errorf("merged parent %s has no EndingSequenceNumber", aws.ToString(p.ShardId))
			}
		}
		c := shards[2]
		if aws.ToString(c.ParentShardId) != a || aws.ToString(c.AdjacentParentShardId) != b {
			t.Errorf("child ParentShardId %q AdjacentParentShardId %q, want %q and %q",
				aws.ToString(c.ParentShardId), aws.ToString(c.AdjacentParentShardId), a, b)
		}
		if aws.ToString(c.HashKeyRange.StartingHashKey) != "0" || aws.ToString(c.HashKeyRange.EndingHashKey) != maxHashKey.String() {
			t.Errorf("child range %s..%s, want the whole key space", aws.ToString(c.HashKeyRange.StartingHashKey), aws.ToString(c.HashKeyRange.EndingHashKey))
		}
		for _, p := range []string{a, b} {
			res := e.readAll(t, e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(p), ShardIteratorType: types.ShardIteratorTypeTrimHorizon}), 0, true)
			if !res.closed || len(res.records) != 0 {
				t.Errorf("parent %s: closed %v, %d records; want closed and empty", p, res.closed, len(res.records))
			}
			t.Run("ChildShards-"+p, func(t *testing.T) {
				skipGap(t, e.target, "childShards")
				checkChildShards(t, res.childShards, map[string][]string{"shardId-000000000002": {a, b}})
			})
		}
	})
}

// checkChildShards compares GetRecords ChildShards with want (child id ->
// parent ids in order), checking the children's hash key ranges are present.
func checkChildShards(t *testing.T, got []types.ChildShard, want map[string][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("ChildShards = %d entries %+v, want %d", len(got), got, len(want))
	}
	for _, c := range got {
		parents, ok := want[aws.ToString(c.ShardId)]
		if !ok {
			t.Errorf("unexpected child shard %s", aws.ToString(c.ShardId))
			continue
		}
		if !slices.Equal(c.ParentShards, parents) {
			t.Errorf("child %s ParentShards = %q, want %q", aws.ToString(c.ShardId), c.ParentShards, parents)
		}
		if c.HashKeyRange == nil || c.HashKeyRange.StartingHashKey == nil || c.HashKeyRange.EndingHashKey == nil {
			t.Errorf("child %s has no HashKeyRange", aws.ToString(c.ShardId))
		}
	}
}

// TestBadInput: the error type for each kind of bad request. A request that
// should be rejected stores nothing.
func TestBadInput(t *testing.T) {
	forEachTarget(t, func(t *testing.T, e *env) {
		name := e.newStream(t, 1)
		c := kinesis.New(e.c.Options(), noRetry)
		stream := aws.String(name)
		missing := aws.String("no-such-stream-" + sanitize(e.target))
		shard := aws.String("shardId-000000000000")
		put := func(pk string, data []byte) func() error {
			return func() error {
				_, err := c.PutRecords(ctx(t), &kinesis.PutRecordsInput{StreamName: stream, Records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String(pk), Data: data}}})
				return err
			}
		}
		putOne := func(pk, ehk string, data []byte) func() error {
			return func() error {
				in := &kinesis.PutRecordInput{StreamName: stream, PartitionKey: aws.String(pk), Data: data}
				if ehk != "" {
					in.ExplicitHashKey = aws.String(ehk)
				}
				_, err := c.PutRecord(ctx(t), in)
				return err
			}
		}
		oneMiB := make([]byte, 1<<20)
		overMiB := make([]byte, 1<<20+1)

		for _, tc := range []struct {
			name string
			gap  string // gaps key under which an emulator may skip this case
			want string
			call func() error
		}{
			{"DescribeStreamSummary unknown stream", "", "ResourceNotFoundException", func() error {
				_, err := c.DescribeStreamSummary(ctx(t), &kinesis.DescribeStreamSummaryInput{StreamName: missing})
				return err
			}},
			{"DescribeStream unknown stream", "", "ResourceNotFoundException", func() error {
				_, err := c.DescribeStream(ctx(t), &kinesis.DescribeStreamInput{StreamName: missing})
				return err
			}},
			{"ListShards unknown stream", "", "ResourceNotFoundException", func() error {
				_, err := c.ListShards(ctx(t), &kinesis.ListShardsInput{StreamName: missing})
				return err
			}},
			{"PutRecords unknown stream", "", "ResourceNotFoundException", func() error {
				_, err := c.PutRecords(ctx(t), &kinesis.PutRecordsInput{StreamName: missing, Records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String("k"), Data: []byte("x")}}})
				return err
			}},
			{"PutRecord unknown stream", "", "ResourceNotFoundException", func() error {
				_, err := c.PutRecord(ctx(t), &kinesis.PutRecordInput{StreamName: missing, PartitionKey: aws.String("k"), Data: []byte("x")})
				return err
			}},
			{"GetShardIterator unknown stream", "", "ResourceNotFoundException", func() error {
				_, err := c.GetShardIterator(ctx(t), &kinesis.GetShardIteratorInput{StreamName: missing, ShardId: shard, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
				return err
			}},
			{"GetShardIterator unknown shard", "", "ResourceNotFoundException", func() error {
				_, err := c.GetShardIterator(ctx(t), &kinesis.GetShardIteratorInput{StreamName: stream, ShardId: aws.String("shardId-000000000009"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
				return err
			}},
			{"GetShardIterator AT_SEQUENCE_NUMBER without a sequence number", "", "InvalidArgumentException", func() error {
				_, err := c.GetShardIterator(ctx(t), &kinesis.GetShardIteratorInput{StreamName: stream, ShardId: shard, ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber})
				return err
			}},
			{"GetShardIterator AT_SEQUENCE_NUMBER of another shard's record", "foreignSequenceNumber", "InvalidArgumentException", func() error {
				// A well-formed sequence number of shard 6 of some stream.
				_, err := c.GetShardIterator(ctx(t), &kinesis.GetShardIteratorInput{StreamName: stream, ShardId: shard, ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber,
					StartingSequenceNumber: aws.String("49590338271490256608559692538361571095921575989136588898")})
				return err
			}},
			{"GetShardIterator AT_SEQUENCE_NUMBER malformed", "sequenceNumberPattern", "ValidationException", func() error {
				_, err := c.GetShardIterator(ctx(t), &kinesis.GetShardIteratorInput{StreamName: stream, ShardId: shard, ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber,
					StartingSequenceNumber: aws.String("12x")})
				return err
			}},
			{"GetRecords malformed iterator", "badIterator", "InvalidArgumentException", func() error {
				_, err := c.GetRecords(ctx(t), &kinesis.GetRecordsInput{ShardIterator: aws.String("not-an-iterator")})
				return err
			}},
			{"GetRecords Limit 10001", "getRecordsLimit", "InvalidArgumentException", func() error {
				it := e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: stream, ShardId: shard, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
				_, err := c.GetRecords(ctx(t), &kinesis.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(10001)})
				return err
			}},
			{"PutRecords empty partition key", "partitionKeyValidation", "ValidationException", put("", []byte("x"))},
			{"PutRecord empty partition key", "partitionKeyValidation", "ValidationException", putOne("", "", []byte("x"))},
			{"PutRecord 257-character partition key", "partitionKeyValidation", "ValidationException", putOne(strings.Repeat("k", 257), "", []byte("x"))},
			{"PutRecords no records", "emptyPutRecords", "ValidationException", func() error {
				_, err := c.PutRecords(ctx(t), &kinesis.PutRecordsInput{StreamName: stream, Records: []types.PutRecordsRequestEntry{}})
				return err
			}},
			{"PutRecord malformed explicit hash key", "hashKeyPattern", "ValidationException", putOne("k", "12a", []byte("x"))},
			{"PutRecord explicit hash key 2^128", "", "InvalidArgumentException", putOne("k", new(big.Int).Add(maxHashKey, big.NewInt(1)).String(), []byte("x"))},
			{"PutRecords explicit hash key 2^128", "", "InvalidArgumentException", func() error {
				_, err := c.PutRecords(ctx(t), &kinesis.PutRecordsInput{StreamName: stream, Records: []types.PutRecordsRequestEntry{
					{PartitionKey: aws.String("k"), Data: []byte("x")},
					{PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(new(big.Int).Add(maxHashKey, big.NewInt(1)).String()), Data: []byte("x")},
				}})
				return err
			}},
			// The current API allows records of up to 10 MiB in the model
			// (Data max length 10485760), so a record over the stream's
			// maximum record size (1 MiB by default, data plus partition
			// key) is rejected by the service with InvalidArgumentException.
			{"PutRecord 1 MiB data + 1-byte key", "recordSizeCountsKey", "InvalidArgumentException", putOne("k", "", oneMiB)},
			{"PutRecords 1 MiB data + 1-byte key", "recordSizeCountsKey", "InvalidArgumentException", put("k", oneMiB)},
			{"PutRecord 1 MiB + 1 data", "oldRecordSizeModel", "InvalidArgumentException", putOne("k", "", overMiB)},
			{"PutRecords 1 MiB + 1 data", "putRecordsSize", "InvalidArgumentException", put("k", overMiB)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.gap != "" {
					skipGap(t, e.target, tc.gap)
				}
				err := tc.call()
				if got := errorCode(err); got != tc.want {
					t.Errorf("error %q, want %s (%v)", got, tc.want, err)
				}
			})
		}

		// None of the rejected writes stored anything (those an emulator
		// accepted, on a skipped case, excepted).
		got := e.readAll(t, e.iterator(t, &kinesis.GetShardIteratorInput{StreamName: stream, ShardId: shard, ShardIteratorType: types.ShardIteratorTypeTrimHorizon}), 0, false).records
		var stored []string
		for _, r := range got {
			if len(r.Data) < 1<<20 {
				stored = append(stored, fmt.Sprintf("%q/%d bytes", aws.ToString(r.PartitionKey), len(r.Data)))
			}
		}
		if len(stored) != 0 {
			t.Errorf("rejected writes stored records: %v", stored)
		}
	})
}

// md5Key is the hash key the service routes partition key pk to.
func md5Key(pk string) *big.Int {
	k := kpl.HashPartitionKey(pk)
	n := new(big.Int).SetUint64(k.Hi)
	n.Lsh(n, 64)
	return n.Or(n, new(big.Int).SetUint64(k.Lo))
}
