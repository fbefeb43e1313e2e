package kinesistest_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// t0 is when every test's manual clock starts.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// env is a server on a manual clock and a client that does not retry, so
// errors surface at once.
type env struct {
	t     *testing.T
	ctx   context.Context
	srv   *kinesistest.Server
	clock *kinesistest.ManualClock
	kc    *kinesis.Client
}

func newEnv(t *testing.T, opts ...kinesistest.Option) *env {
	t.Helper()
	clock := kinesistest.NewManualClock(t0)
	srv, err := kinesistest.Start(append([]kinesistest.Option{kinesistest.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &env{
		t:     t,
		ctx:   t.Context(),
		srv:   srv,
		clock: clock,
		kc:    srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 }),
	}
}

func (e *env) createStream(name string, shards int) {
	e.t.Helper()
	if err := e.srv.CreateStream(name, shards); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) put(stream, pk, data string) *kinesis.PutRecordOutput {
	e.t.Helper()
	out, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{
		StreamName: aws.String(stream), PartitionKey: aws.String(pk), Data: []byte(data),
	})
	if err != nil {
		e.t.Fatalf("PutRecord(%s, %s): %v", stream, pk, err)
	}
	return out
}

// putEHK writes a record with an explicit hash key, so it lands in the shard
// whose range holds ehk whatever its partition key.
func (e *env) putEHK(stream, ehk, data string) *kinesis.PutRecordOutput {
	e.t.Helper()
	out, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{
		StreamName: aws.String(stream), PartitionKey: aws.String("pk"), ExplicitHashKey: aws.String(ehk), Data: []byte(data),
	})
	if err != nil {
		e.t.Fatalf("PutRecord(%s, ehk %s): %v", stream, ehk, err)
	}
	return out
}

func (e *env) iterator(stream, shardID string, typ types.ShardIteratorType, mutate ...func(*kinesis.GetShardIteratorInput)) string {
	e.t.Helper()
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shardID), ShardIteratorType: typ}
	for _, m := range mutate {
		m(in)
	}
	out, err := e.kc.GetShardIterator(e.ctx, in)
	if err != nil {
		e.t.Fatalf("GetShardIterator(%s, %s, %s): %v", stream, shardID, typ, err)
	}
	return *out.ShardIterator
}

func (e *env) getRecords(it string, limit int32) *kinesis.GetRecordsOutput {
	e.t.Helper()
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String(it)}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	out, err := e.kc.GetRecords(e.ctx, in)
	if err != nil {
		e.t.Fatalf("GetRecords: %v", err)
	}
	return out
}

// readToTip reads from it until a page is empty and caught up, or the shard
// ends. It returns the records' data and the last page.
func (e *env) readToTip(it string) ([]string, *kinesis.GetRecordsOutput) {
	e.t.Helper()
	var got []string
	for {
		out := e.getRecords(it, 0)
		for _, r := range out.Records {
			got = append(got, string(r.Data))
		}
		if out.NextShardIterator == nil || (len(out.Records) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0) {
			return got, out
		}
		it = *out.NextShardIterator
	}
}

func (e *env) listShards(in *kinesis.ListShardsInput) []types.Shard {
	e.t.Helper()
	var shards []types.Shard
	for {
		out, err := e.kc.ListShards(e.ctx, in)
		if err != nil {
			e.t.Fatalf("ListShards: %v", err)
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			return shards
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

func shardIDs(shards []types.Shard) string {
	ids := make([]string, len(shards))
	for i, s := range shards {
		ids[i] = strings.TrimPrefix(*s.ShardId, "shardId-00000000000")
	}
	return strings.Join(ids, ",")
}

func sid(n int) string { return fmt.Sprintf("shardId-%012d", n) }

// wantAPIError fails unless err is a service error with code and, when
// message is not empty, exactly that message.
func wantAPIError(t *testing.T, err error, code, message string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got error %v, want API error %s", err, code)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("got error code %s (%v), want %s", ae.ErrorCode(), err, code)
	}
	if message != "" && ae.ErrorMessage() != message {
		t.Fatalf("got message %q, want %q", ae.ErrorMessage(), message)
	}
}

// wantErrorType fails unless err wraps a *T, the SDK's typed error.
func wantErrorType[T error](t *testing.T, err error) T {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("got error %v (%T), want %T", err, err, target)
	}
	return target
}

func seqLess(a, b string) bool {
	x, ok1 := new(big.Int).SetString(a, 10)
	y, ok2 := new(big.Int).SetString(b, 10)
	if !ok1 || !ok2 {
		panic("not a sequence number: " + a + " / " + b)
	}
	return x.Cmp(y) < 0
}

func hashKey(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic("not a hash key: " + s)
	}
	return v
}
