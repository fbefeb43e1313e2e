package kinesistest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func TestCreateStreamIsDescribedWithEvenHashRanges(t *testing.T) {
	e := newEnv(t)
	_, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("orders"), ShardCount: aws.Int32(2)})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	out, err := e.kc.DescribeStream(e.ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("orders")})
	if err != nil {
		t.Fatalf("DescribeStream: %v", err)
	}
	d := out.StreamDescription
	if d.StreamStatus != types.StreamStatusActive || *d.StreamName != "orders" ||
		*d.StreamARN != "arn:aws:kinesis:us-east-1:123456789012:stream/orders" ||
		*d.RetentionPeriodHours != 24 || !d.StreamCreationTimestamp.Equal(t0) ||
		d.StreamModeDetails.StreamMode != types.StreamModeProvisioned || *d.HasMoreShards {
		t.Errorf("DescribeStream = %+v", d)
	}
	want := [][2]string{
		{"0", "170141183460469231731687303715884105727"},
		{"170141183460469231731687303715884105728", "340282366920938463463374607431768211455"},
	}
	if len(d.Shards) != 2 {
		t.Fatalf("got %d shards, want 2", len(d.Shards))
	}
	for i, s := range d.Shards {
		if *s.ShardId != sid(i) || *s.HashKeyRange.StartingHashKey != want[i][0] || *s.HashKeyRange.EndingHashKey != want[i][1] ||
			s.ParentShardId != nil || s.SequenceNumberRange.EndingSequenceNumber != nil || len(*s.SequenceNumberRange.StartingSequenceNumber) != 56 {
			t.Errorf("shard %d = %+v %+v %+v", i, *s.ShardId, *s.HashKeyRange, *s.SequenceNumberRange)
		}
	}

	sum, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("orders")})
	if err != nil {
		t.Fatalf("DescribeStreamSummary: %v", err)
	}
	s := sum.StreamDescriptionSummary
	if *s.OpenShardCount != 2 || *s.MaxRecordSizeInKiB != 1024 || *s.ConsumerCount != 0 || s.StreamStatus != types.StreamStatusActive {
		t.Errorf("DescribeStreamSummary = %+v", s)
	}
}

func TestCreateStreamOnDemandGetsFourShards(t *testing.T) {
	e := newEnv(t)
	_, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{
		StreamName:        aws.String("od"),
		StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand},
	})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	sum, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("od")})
	if err != nil {
		t.Fatalf("DescribeStreamSummary: %v", err)
	}
	if *sum.StreamDescriptionSummary.OpenShardCount != 4 || sum.StreamDescriptionSummary.StreamModeDetails.StreamMode != types.StreamModeOnDemand {
		t.Errorf("summary = %+v", sum.StreamDescriptionSummary)
	}
}

func TestCreateStreamRejectsDuplicatesAndBadInput(t *testing.T) {
	e := newEnv(t)
	e.createStream("dup", 1)
	_, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("dup"), ShardCount: aws.Int32(1)})
	wantErrorType[*types.ResourceInUseException](t, err)
	wantAPIError(t, err, "ResourceInUseException", "Stream dup under account 123456789012 already exists.")

	_, err = e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("bad name"), ShardCount: aws.Int32(1)})
	wantAPIError(t, err, "ValidationException",
		"1 validation error detected: Value 'bad name' at 'streamName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+")

	_, err = e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("zero"), ShardCount: aws.Int32(0)})
	wantAPIError(t, err, "ValidationException", "")

	_, err = e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("noshards")})
	wantErrorType[*types.InvalidArgumentException](t, err)
}

func TestDeletedStreamIsNotFoundEverywhere(t *testing.T) {
	e := newEnv(t)
	e.createStream("gone", 1)
	it := e.iterator("gone", sid(0), types.ShardIteratorTypeTrimHorizon)
	if _, err := e.kc.DeleteStream(e.ctx, &kinesis.DeleteStreamInput{StreamName: aws.String("gone")}); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	_, err := e.kc.DescribeStream(e.ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("gone")})
	wantErrorType[*types.ResourceNotFoundException](t, err)
	wantAPIError(t, err, "ResourceNotFoundException", "Stream gone under account 123456789012 not found.")

	_, err = e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("gone"), PartitionKey: aws.String("k"), Data: []byte("x")})
	wantErrorType[*types.ResourceNotFoundException](t, err)

	// An iterator of the deleted stream stays dead even after a stream of the
	// same name is created again.
	e.createStream("gone", 1)
	_, err = e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantErrorType[*types.ResourceNotFoundException](t, err)

	_, err = e.kc.DeleteStream(e.ctx, &kinesis.DeleteStreamInput{StreamName: aws.String("never")})
	wantErrorType[*types.ResourceNotFoundException](t, err)
}

func TestStreamARNAddressesStreams(t *testing.T) {
	e := newEnv(t)
	e.createStream("byarn", 1)
	arn := e.srv.StreamARN("byarn")
	if arn != "arn:aws:kinesis:us-east-1:123456789012:stream/byarn" {
		t.Fatalf("StreamARN = %s", arn)
	}
	if _, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamARN: aws.String(arn), PartitionKey: aws.String("k"), Data: []byte("x")}); err != nil {
		t.Fatalf("PutRecord by ARN: %v", err)
	}
	shards := e.listShards(&kinesis.ListShardsInput{StreamARN: aws.String(arn)})
	if len(shards) != 1 {
		t.Fatalf("ListShards by ARN: %d shards", len(shards))
	}
	it, err := e.kc.GetShardIterator(e.ctx, &kinesis.GetShardIteratorInput{StreamARN: aws.String(arn), ShardId: aws.String(sid(0)), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatalf("GetShardIterator by ARN: %v", err)
	}
	got, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, StreamARN: aws.String(arn)})
	if err != nil || len(got.Records) != 1 {
		t.Fatalf("GetRecords with StreamARN: %v, %+v", err, got)
	}

	_, err = e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("other"), StreamARN: aws.String(arn)})
	wantErrorType[*types.InvalidArgumentException](t, err)

	// ARNs in responses carry the region the client signs for.
	eu := e.srv.Client(func(o *kinesis.Options) { o.Region = "eu-west-1"; o.RetryMaxAttempts = 1 })
	sum, err := eu.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String("arn:aws:kinesis:eu-west-1:123456789012:stream/byarn")})
	if err != nil {
		t.Fatalf("DescribeStreamSummary from eu-west-1: %v", err)
	}
	if got := *sum.StreamDescriptionSummary.StreamARN; got != "arn:aws:kinesis:eu-west-1:123456789012:stream/byarn" {
		t.Errorf("StreamARN from eu-west-1 = %s", got)
	}
}

func TestListStreamsPages(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"e", "c", "a", "d", "b"} {
		e.createStream(n, 1)
	}
	var names []string
	p := kinesis.NewListStreamsPaginator(e.kc, &kinesis.ListStreamsInput{Limit: aws.Int32(2)})
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(e.ctx)
		if err != nil {
			t.Fatalf("ListStreams: %v", err)
		}
		pages++
		if len(out.StreamNames) != len(out.StreamSummaries) {
			t.Fatalf("names %v and summaries %d differ", out.StreamNames, len(out.StreamSummaries))
		}
		for i, s := range out.StreamSummaries {
			if *s.StreamName != out.StreamNames[i] || s.StreamStatus != types.StreamStatusActive || *s.StreamARN != e.srv.StreamARN(*s.StreamName) {
				t.Errorf("summary %+v", s)
			}
		}
		if *out.HasMoreStreams != (out.NextToken != nil) {
			t.Errorf("HasMoreStreams %v with NextToken %v", *out.HasMoreStreams, out.NextToken)
		}
		names = append(names, out.StreamNames...)
	}
	if fmt.Sprint(names) != "[a b c d e]" || pages != 3 {
		t.Errorf("streams %v in %d pages, want [a b c d e] in 3", names, pages)
	}
	out, err := e.kc.ListStreams(e.ctx, &kinesis.ListStreamsInput{ExclusiveStartStreamName: aws.String("c")})
	if err != nil || fmt.Sprint(out.StreamNames) != "[d e]" || *out.HasMoreStreams {
		t.Errorf("ListStreams after c = %v, %v", out, err)
	}
}

func TestDescribeStreamPagesShards(t *testing.T) {
	e := newEnv(t)
	e.createStream("five", 5)
	var ids []types.Shard
	p := kinesis.NewDescribeStreamPaginator(e.kc, &kinesis.DescribeStreamInput{StreamName: aws.String("five"), Limit: aws.Int32(2)})
	for p.HasMorePages() {
		out, err := p.NextPage(e.ctx)
		if err != nil {
			t.Fatalf("DescribeStream: %v", err)
		}
		if len(out.StreamDescription.Shards) > 2 {
			t.Fatalf("page of %d shards with Limit 2", len(out.StreamDescription.Shards))
		}
		ids = append(ids, out.StreamDescription.Shards...)
	}
	if got := shardIDs(ids); got != "0,1,2,3,4" {
		t.Errorf("shards %s, want 0,1,2,3,4", got)
	}
}

func TestStreamExistsWaiterSeesActiveStream(t *testing.T) {
	e := newEnv(t)
	e.createStream("waited", 1)
	w := kinesis.NewStreamExistsWaiter(e.kc)
	if err := w.Wait(e.ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("waited")}, 10*time.Second); err != nil {
		t.Fatalf("StreamExistsWaiter: %v", err)
	}
}

func TestTransitionDelayShowsCreatingAndUpdating(t *testing.T) {
	e := newEnv(t, kinesistest.WithTransitionDelay(10*time.Second))
	_, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("slow"), ShardCount: aws.Int32(1)})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	status := func() types.StreamStatus {
		out, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("slow")})
		if err != nil {
			t.Fatalf("DescribeStreamSummary: %v", err)
		}
		return out.StreamDescriptionSummary.StreamStatus
	}
	if s := status(); s != types.StreamStatusCreating {
		t.Fatalf("status after CreateStream = %s, want CREATING", s)
	}
	_, err = e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("slow"), PartitionKey: aws.String("k"), Data: []byte("x")})
	wantErrorType[*types.ResourceNotFoundException](t, err)

	e.clock.Advance(10 * time.Second)
	if s := status(); s != types.StreamStatusActive {
		t.Fatalf("status 10 s later = %s, want ACTIVE", s)
	}
	if _, err := e.kc.UpdateShardCount(e.ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String("slow"), TargetShardCount: aws.Int32(2), ScalingType: types.ScalingTypeUniformScaling}); err != nil {
		t.Fatalf("UpdateShardCount: %v", err)
	}
	if s := status(); s != types.StreamStatusUpdating {
		t.Fatalf("status after UpdateShardCount = %s, want UPDATING", s)
	}
	e.put("slow", "k", "written while UPDATING")
	_, err = e.kc.MergeShards(e.ctx, &kinesis.MergeShardsInput{StreamName: aws.String("slow"), ShardToMerge: aws.String(sid(1)), AdjacentShardToMerge: aws.String(sid(2))})
	wantErrorType[*types.ResourceInUseException](t, err)
	wantAPIError(t, err, "ResourceInUseException", "Stream slow under account 123456789012 not ACTIVE, instead in state UPDATING")
	e.clock.Advance(10 * time.Second)
	if s := status(); s != types.StreamStatusActive {
		t.Fatalf("status after the update = %s, want ACTIVE", s)
	}
}

func TestRetentionPeriodChanges(t *testing.T) {
	e := newEnv(t)
	e.createStream("ret", 1)
	name := aws.String("ret")
	hours := func() int32 {
		out, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: name})
		if err != nil {
			t.Fatal(err)
		}
		return *out.StreamDescriptionSummary.RetentionPeriodHours
	}
	_, err := e.kc.IncreaseStreamRetentionPeriod(e.ctx, &kinesis.IncreaseStreamRetentionPeriodInput{StreamName: name, RetentionPeriodHours: aws.Int32(12)})
	wantAPIError(t, err, "InvalidArgumentException", "Minimum allowed retention period is 24 hours. Requested retention period (12 hours) is too short.")
	_, err = e.kc.IncreaseStreamRetentionPeriod(e.ctx, &kinesis.IncreaseStreamRetentionPeriodInput{StreamName: name, RetentionPeriodHours: aws.Int32(9000)})
	wantErrorType[*types.InvalidArgumentException](t, err)
	if _, err := e.kc.IncreaseStreamRetentionPeriod(e.ctx, &kinesis.IncreaseStreamRetentionPeriodInput{StreamName: name, RetentionPeriodHours: aws.Int32(48)}); err != nil {
		t.Fatalf("IncreaseStreamRetentionPeriod: %v", err)
	}
	if h := hours(); h != 48 {
		t.Fatalf("retention = %d h, want 48", h)
	}
	_, err = e.kc.IncreaseStreamRetentionPeriod(e.ctx, &kinesis.IncreaseStreamRetentionPeriodInput{StreamName: name, RetentionPeriodHours: aws.Int32(30)})
	wantErrorType[*types.InvalidArgumentException](t, err)
	_, err = e.kc.DecreaseStreamRetentionPeriod(e.ctx, &kinesis.DecreaseStreamRetentionPeriodInput{StreamName: name, RetentionPeriodHours: aws.Int32(72)})
	wantErrorType[*types.InvalidArgumentException](t, err)
	if _, err := e.kc.DecreaseStreamRetentionPeriod(e.ctx, &kinesis.DecreaseStreamRetentionPeriodInput{StreamName: name, RetentionPeriodHours: aws.Int32(24)}); err != nil {
		t.Fatalf("DecreaseStreamRetentionPeriod: %v", err)
	}
	if h := hours(); h != 24 {
		t.Fatalf("retention = %d h, want 24", h)
	}
}
