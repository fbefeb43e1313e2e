package kcl

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

// Streams that distribute records themselves (RecordDistributionStrategy AUTO): the service
// puts each record on a shard of its choosing, whatever its keys. A KCL consumer drops a
// KPL aggregate that holds a user record outside the shard it arrived in, so aggregation
// there loses records for every KCL reader of the stream; kinesisio.Write never aggregates
// on such a stream.

const (
	autoShards   = 4
	autoMessages = 400
)

// autoMessage is message i, with a key of its own.
func autoMessage(i int) kinesisio.Message {
	return kinesisio.Message{PartitionKey: fmt.Sprintf("auto-%d", i), Data: []byte(fmt.Sprintf("auto message %d", i))}
}

// startAuto starts the test server with an AUTO stream, and dynalite for KCL's lease table.
func startAuto(t *testing.T, stream string) (*kinesistest.Server, string) {
	t.Helper()
	components.KCLT(t)
	srv := kinesistest.StartT(t, kinesistest.WithOnDemandStream(stream, autoShards, types.RecordDistributionStrategyAuto))
	return srv, emulators.StartT(t, emulators.Dynalite).URL()
}

// keyed renders a record as its key and data: on an AUTO stream the shard says nothing.
func keyed(pk string, data []byte) string { return pk + "|" + string(data) }

func keyedRecs(rs []rec) map[string]int {
	out := map[string]int{}
	for _, r := range rs {
		out[keyed(r.PK, r.Data)]++
	}
	return out
}

// A KCL 3.x consumer reads everything kinesisio.Write (aggregation on, its default) wrote to
// an AUTO stream: every message exactly once.
func TestKCLReadsEveryMessageWriteWroteToAnAutoStream(t *testing.T) {
	const stream = "auto-write"
	srv, dyn := startAuto(t, stream)
	var msgs []any
	want := map[string]int{}
	for i := range autoMessages {
		m := autoMessage(i)
		msgs = append(msgs, m)
		want[keyed(m.PartitionKey, m.Data)]++
	}
	p, s := beam.NewPipelineWithRoot()
	failed := kinesisio.Write(s, stream, beam.Create(s, msgs...),
		kinesisio.WithEndpoint(srv.URL()), kinesisio.WithRegion("us-east-1"), kinesisio.WithStaticCredentials("test", "test"))
	passert.Empty(s, failed)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	res, err := streamcheck.Read(context.Background(), srv.Client(), stream)
	if err != nil {
		t.Fatal(err)
	}
	if res.Aggregates != 0 {
		t.Fatalf("Write left %d KPL aggregates on an AUTO stream", res.Aggregates)
	}

	createLeaseTable(t, dynamo(dyn), "auto-write-app")
	seedLeases(t, dynamo(dyn), srv.Client(), "auto-write-app", stream)
	k := runKCL(t, kcl31(t), srv.URL(), dyn, stream, "auto-write-app", "kcl-auto", autoMessages, checkpointEvery)
	if d := streamcheck.Diff(keyedRecs(k.Records), want, 5); d != "" {
		t.Fatalf("KCL's read of what Write wrote: %s", d)
	}
	t.Logf("KCL read %d of %d messages in %v", len(k.Records), autoMessages, k.Took.Round(1e6))
}

// The same messages aggregated as a KPL (or a writer that ignores the strategy) would:
// per predicted shard, sent with an explicit hash key in its range. The service puts the
// aggregates where it likes, and a KCL consumer reads exactly the records of those that
// happened to land in their shard: the loss the rule prevents. kinesisio's read keeps them
// all.
func TestKCLLosesAggregatesOnAnAutoStream(t *testing.T) {
	const stream = "auto-aggregated"
	srv, dyn := startAuto(t, stream)
	ctx := context.Background()
	shards, err := srv.Client().ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	byShard := map[string][]kpl.UserRecord{}
	want := map[string]int{}
	for i := range autoMessages {
		m := autoMessage(i)
		u := kpl.UserRecord{PartitionKey: m.PartitionKey, Data: m.Data}
		want[keyed(u.PartitionKey, u.Data)]++
		h, _ := u.HashKey()
		for _, sh := range shards.Shards {
			lo, _ := kpl.ParseUint128(aws.ToString(sh.HashKeyRange.StartingHashKey))
			hi, _ := kpl.ParseUint128(aws.ToString(sh.HashKeyRange.EndingHashKey))
			if h.Cmp(lo) >= 0 && h.Cmp(hi) <= 0 {
				byShard[aws.ToString(sh.ShardId)] = append(byShard[aws.ToString(sh.ShardId)], u)
			}
		}
	}
	var entries []types.PutRecordsRequestEntry
	for _, users := range byShard {
		for len(users) > 0 {
			a := kpl.NewAggregator(1<<20, 10)
			n := min(10, len(users))
			for _, u := range users[:n] {
				if err := a.Add(u); err != nil {
					t.Fatal(err)
				}
			}
			users = users[n:]
			kr, err := a.Build()
			if err != nil {
				t.Fatal(err)
			}
			e := types.PutRecordsRequestEntry{PartitionKey: aws.String(kr.PartitionKey), Data: kr.Data}
			if kr.ExplicitHashKey != "" {
				e.ExplicitHashKey = aws.String(kr.ExplicitHashKey)
			}
			entries = append(entries, e)
		}
	}
	if _, err := srv.Client().PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
		t.Fatal(err)
	}
	res, err := streamcheck.Read(ctx, srv.Client(), stream)
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]int{}
	for _, u := range res.Kept() {
		kept[keyed(u.PartitionKey, u.Data)]++
	}
	n := 0
	for _, c := range kept {
		n += c
	}
	if n == 0 || n >= autoMessages {
		t.Fatalf("%d of %d records in aggregates that landed in their shard; the test needs some to land elsewhere", n, autoMessages)
	}

	createLeaseTable(t, dynamo(dyn), "auto-aggregated-app")
	seedLeases(t, dynamo(dyn), srv.Client(), "auto-aggregated-app", stream)
	k := runKCL(t, kcl31(t), srv.URL(), dyn, stream, "auto-aggregated-app", "kcl-auto-agg", n, checkpointEvery)
	if d := streamcheck.Diff(keyedRecs(k.Records), kept, 5); d != "" {
		t.Fatalf("KCL's read of the aggregates: %s", d)
	}
	t.Logf("KCL read %d of %d aggregated messages: %d lost (%d of %d aggregates landed outside their shard)", len(k.Records), autoMessages, autoMessages-len(k.Records), res.MisplacedAggregates, len(entries))

	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.ReadBounded(s, stream, kinesisio.WithEndpoint(srv.URL()), kinesisio.WithRegion("us-east-1"),
		kinesisio.WithStaticCredentials("test", "test"), kinesisio.WithStartingPosition(kinesisio.TrimHorizon()))
	got := collect(s, t.Name(), recs)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	if d := streamcheck.Diff(keyedRecs(got.get()), want, 5); d != "" {
		t.Fatalf("kinesisio's read of the aggregates: %s", d)
	}
}
