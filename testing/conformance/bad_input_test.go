package conformance

import (
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

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
