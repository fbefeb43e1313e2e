// Package readapi is the one place where the read side of kinesisio calls Kinesis: shard
// listing, iterators, GetRecords, SubscribeToShard and stream consumers. Every call retries
// throttling and transient failures under one policy (internal/backoff), logs each retry,
// and is counted; the counts are taken by the caller, which reports them as metrics on its
// own goroutine (calls may run on others).
package readapi

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/errkind"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
)

// Client makes the read side's Kinesis calls with retries. It is safe for concurrent use.
type Client struct {
	api   *kinesis.Client
	retry backoff.Policy

	getRecords, subscribes, throttles, retries atomic.Int64
}

// New returns a Client calling api, retrying under policy. The SDK's own retries must be off
// (the connector's client has aws.NopRetryer), so that the two layers do not multiply.
func New(api *kinesis.Client, policy backoff.Policy) *Client {
	return &Client{api: api, retry: policy}
}

// Fork returns a Client making the same calls under the same policy with counts of its own,
// for calls made on behalf of someone who takes them later (the read-ahead's fetches).
func (c *Client) Fork() *Client { return New(c.api, c.retry) }

// Stats counts calls since the last TakeStats.
type Stats struct {
	// GetRecords and Subscribes count the GetRecords and SubscribeToShard calls sent,
	// refused ones included.
	GetRecords, Subscribes int64
	// Throttles counts the calls refused for a limit; Retries the calls sent again.
	Throttles, Retries int64
}

// Add returns the sum of s and o.
func (s Stats) Add(o Stats) Stats {
	return Stats{GetRecords: s.GetRecords + o.GetRecords, Subscribes: s.Subscribes + o.Subscribes,
		Throttles: s.Throttles + o.Throttles, Retries: s.Retries + o.Retries}
}

// TakeStats returns the counts since the last call and starts them again from zero.
func (c *Client) TakeStats() Stats {
	return Stats{
		GetRecords: c.getRecords.Swap(0),
		Subscribes: c.subscribes.Swap(0),
		Throttles:  c.throttles.Swap(0),
		Retries:    c.retries.Swap(0),
	}
}

// do runs call with the client's retries. op and what name the call and its target in the
// debug line logged before each retry.
// Its errors are marked with their kind (errkind.Classify); ListShards and
// DescribeStreamSummary are the calls whose "not found" is the stream's.
func (c *Client) do(ctx context.Context, op string, what fmt.Stringer, call func(context.Context) error) error {
	return errkind.Classify(backoff.Do(ctx, c.retry, func(ctx context.Context) error {
		err := call(ctx)
		if backoff.Classify(err) == backoff.Throttled {
			c.throttles.Add(1)
		}
		return err
	}, func(attempt int, err error, class backoff.Class, wait time.Duration) {
		c.retries.Add(1)
		log.Debugf(ctx, "kinesisio: %s on %v failed (%v, attempt %d): %v; retrying in %v", op, what, class, attempt, err, wait)
	}), op == "ListShards" || op == "DescribeStreamSummary")
}

// streamName names a stream in log lines.
type streamName string

func (s streamName) String() string { return "stream " + string(s) }

// ListShards lists the shards of stream (a name or an ARN) that filter selects (nil: every
// shard within retention), following every page, sorted by shard id.
func (c *Client) ListShards(ctx context.Context, stream string, filter *types.ShardFilter) ([]types.Shard, error) {
	var shards []types.Shard
	in := &kinesis.ListShardsInput{ShardFilter: filter}
	in.StreamName, in.StreamARN = streamarn.Input(stream)
	for {
		var out *kinesis.ListShardsOutput
		err := c.do(ctx, "ListShards", streamName(stream), func(ctx context.Context) error {
			var err error
			out, err = c.api.ListShards(ctx, in)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("kinesisio: listing the shards of stream %s: %w", stream, err)
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			break
		}
		// With a token, the service refuses the stream name and filter.
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
	sort.Slice(shards, func(i, j int) bool { return aws.ToString(shards[i].ShardId) < aws.ToString(shards[j].ShardId) })
	return shards, nil
}

// Endpoint names where the client's calls go: its endpoint URL when one was given, else the
// regional endpoint of its region.
func (c *Client) Endpoint() string {
	o := c.api.Options()
	if e := aws.ToString(o.BaseEndpoint); e != "" {
		return e
	}
	return "https://kinesis." + o.Region + ".amazonaws.com"
}

// ShardIterator calls GetShardIterator for shard.
func (c *Client) ShardIterator(ctx context.Context, shard fmt.Stringer, in *kinesis.GetShardIteratorInput) (string, error) {
	var out *kinesis.GetShardIteratorOutput
	err := c.do(ctx, "GetShardIterator", shard, func(ctx context.Context) error {
		var err error
		out, err = c.api.GetShardIterator(ctx, in)
		return err
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ShardIterator), nil
}

// GetRecords reads up to limit records of shard at iterator.
func (c *Client) GetRecords(ctx context.Context, shard fmt.Stringer, iterator string, limit int32) (*kinesis.GetRecordsOutput, error) {
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String(iterator), Limit: aws.Int32(limit)}
	var out *kinesis.GetRecordsOutput
	err := c.do(ctx, "GetRecords", shard, func(ctx context.Context) error {
		c.getRecords.Add(1)
		var err error
		out, err = c.api.GetRecords(ctx, in)
		return err
	})
	return out, err
}

// SubscribeToShard subscribes to shard. The event stream lives on streamCtx, which must
// outlive the call (ctx bounds only the call and its retries). sent is when the last
// attempt was sent.
func (c *Client) SubscribeToShard(ctx, streamCtx context.Context, shard fmt.Stringer, in *kinesis.SubscribeToShardInput) (out *kinesis.SubscribeToShardOutput, sent time.Time, err error) {
	err = c.do(ctx, "SubscribeToShard", shard, func(context.Context) error {
		sent = time.Now()
		c.subscribes.Add(1)
		var err error
		out, err = c.api.SubscribeToShard(streamCtx, in, OwnProtocol)
		return err
	})
	return out, sent, err
}

// OwnProtocol gives one SubscribeToShard call its own protocol, hence its own event-stream
// decoder: a client's protocol shares one decoder between all its event streams without
// synchronisation (aws/smithy-go#714).
func OwnProtocol(o *kinesis.Options) { o.Protocol = awsjson.New11(schemas.Kinesis_20131202) }

// DescribeStreamSummary describes stream (a name or an ARN).
func (c *Client) DescribeStreamSummary(ctx context.Context, stream string) (*types.StreamDescriptionSummary, error) {
	var out *kinesis.DescribeStreamSummaryOutput
	err := c.do(ctx, "DescribeStreamSummary", streamName(stream), func(ctx context.Context) error {
		var err error
		out, err = c.api.DescribeStreamSummary(ctx, streamarn.SummaryInput(stream))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out.StreamDescriptionSummary, nil
}

// account names the account in log lines.
type account struct{}

func (account) String() string { return "the account" }

// DescribeAccountSettings describes the account's settings (its minimum throughput billing
// commitment).
func (c *Client) DescribeAccountSettings(ctx context.Context) (*kinesis.DescribeAccountSettingsOutput, error) {
	var out *kinesis.DescribeAccountSettingsOutput
	err := c.do(ctx, "DescribeAccountSettings", account{}, func(ctx context.Context) error {
		var err error
		out, err = c.api.DescribeAccountSettings(ctx, &kinesis.DescribeAccountSettingsInput{})
		return err
	})
	return out, err
}

// consumerName names a stream consumer in log lines.
type consumerName struct {
	in *kinesis.DescribeStreamConsumerInput
}

func (c consumerName) String() string {
	if c.in.ConsumerARN != nil {
		return "consumer " + *c.in.ConsumerARN
	}
	return fmt.Sprintf("consumer %s of %s", aws.ToString(c.in.ConsumerName), aws.ToString(c.in.StreamARN))
}

// DescribeStreamConsumer describes the stream consumer in names (by ARN, or by stream and
// name).
func (c *Client) DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput) (*types.ConsumerDescription, error) {
	var out *kinesis.DescribeStreamConsumerOutput
	err := c.do(ctx, "DescribeStreamConsumer", consumerName{in}, func(ctx context.Context) error {
		var err error
		out, err = c.api.DescribeStreamConsumer(ctx, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out.ConsumerDescription, nil
}

// RegisterStreamConsumer registers the stream consumer in names.
func (c *Client) RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput) (*types.Consumer, error) {
	var out *kinesis.RegisterStreamConsumerOutput
	what := consumerName{&kinesis.DescribeStreamConsumerInput{StreamARN: in.StreamARN, ConsumerName: in.ConsumerName}}
	err := c.do(ctx, "RegisterStreamConsumer", what, func(ctx context.Context) error {
		var err error
		out, err = c.api.RegisterStreamConsumer(ctx, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out.Consumer, nil
}
