package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
)

// consumerARNPattern is the service's pattern for stream consumer ARNs.
var consumerARNPattern = regexp.MustCompile(`^arn:aws[a-z0-9-]*:kinesis:[a-z0-9-]*:\d{12}:stream/[a-zA-Z0-9_.-]+/consumer/[a-zA-Z0-9_.-]+:[0-9]+$`)

// consumerActivationTimeout bounds how long a reader waits for a stream consumer to become
// ACTIVE after registering it (the service takes seconds, rarely more than a minute).
const consumerActivationTimeout = 5 * time.Minute

// WithEnhancedFanOut reads each shard with enhanced fan-out (SubscribeToShard) as the stream
// consumer named consumerName instead of polling GetRecords. The consumer gets its own
// 2 MiB/s per shard and records are pushed as they arrive. The readers register the consumer
// if the stream has none of that name, reuse it if it exists, and wait until it is ACTIVE;
// they never deregister it. This is the Spark connectors' kinesis.consumerType =
// SubscribeToShard with kinesis.consumerName. Restrictions, checkpoints, deaggregation,
// watermarks and metrics are the same as with polling; WithMaxRecordsPerRead,
// WithPollInterval and WithIdleTimeBetweenReads do not apply.
func WithEnhancedFanOut(consumerName string) Option {
	return Option{name: "WithEnhancedFanOut", dirs: dirRead, apply: func(c *config) error {
		if !streamNamePattern.MatchString(consumerName) {
			return fmt.Errorf("consumer name %q is invalid: consumer names are 1 to 128 characters of a-z, A-Z, 0-9, '_', '.' and '-'", consumerName)
		}
		c.read.consumerName, c.read.consumerARN = consumerName, ""
		return nil
	}}
}

// WithEnhancedFanOutConsumerARN is WithEnhancedFanOut with a stream consumer registered
// beforehand, named by its ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/STREAM/consumer/NAME:EPOCH).
// The readers subscribe with it as it is and register nothing.
func WithEnhancedFanOutConsumerARN(arn string) Option {
	return Option{name: "WithEnhancedFanOutConsumerARN", dirs: dirRead, apply: func(c *config) error {
		if !consumerARNPattern.MatchString(arn) {
			return fmt.Errorf("%q is not a stream consumer ARN like arn:aws:kinesis:us-east-1:123456789012:stream/NAME/consumer/CONSUMER:1700000000", arn)
		}
		c.read.consumerARN, c.read.consumerName = arn, ""
		return nil
	}}
}

// enhancedFanOut says whether the reader subscribes instead of polling.
func (s readSpec) enhancedFanOut() bool { return s.ConsumerName != "" || s.ConsumerARN != "" }

// consumer returns the ARN of the reader's stream consumer, registering the consumer or
// waiting for it to become ACTIVE the first time it is asked.
func (r *shardReader) consumer(ctx context.Context) (string, error) {
	if r.spec.ConsumerARN != "" {
		return r.spec.ConsumerARN, nil
	}
	r.consumerMu.Lock()
	defer r.consumerMu.Unlock()
	if r.consumerARN != "" {
		return r.consumerARN, nil
	}
	arn, err := r.resolveConsumer(ctx)
	if err != nil {
		return "", fmt.Errorf("kinesisio: enhanced fan-out consumer %q of stream %s: %w", r.spec.ConsumerName, r.spec.Stream, err)
	}
	r.consumerARN = arn
	return arn, nil
}

// resolveConsumer describes the consumer named in the spec, registering it if the stream has
// none of that name, and waits until it is ACTIVE. Several workers may do this at once: a
// registration that loses the race (ResourceInUseException) describes the winner's consumer.
func (r *shardReader) resolveConsumer(ctx context.Context) (string, error) {
	name := r.spec.ConsumerName
	var summary *kinesis.DescribeStreamSummaryOutput
	if err := backoff.Do(ctx, r.retry, func(ctx context.Context) error {
		var err error
		summary, err = r.client.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(r.spec.Stream)})
		return err
	}, nil); err != nil {
		return "", fmt.Errorf("describing the stream: %w", err)
	}
	streamARN := summary.StreamDescriptionSummary.StreamARN

	describe := func(in *kinesis.DescribeStreamConsumerInput) (*types.ConsumerDescription, error) {
		var out *kinesis.DescribeStreamConsumerOutput
		err := backoff.Do(ctx, r.retry, func(ctx context.Context) error {
			var err error
			out, err = r.client.DescribeStreamConsumer(ctx, in)
			return err
		}, nil)
		if err != nil {
			return nil, err
		}
		return out.ConsumerDescription, nil
	}
	var notFound *types.ResourceNotFoundException
	desc, err := describe(&kinesis.DescribeStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String(name)})
	var arn, status string
	switch {
	case err == nil:
		arn, status = aws.ToString(desc.ConsumerARN), string(desc.ConsumerStatus)
		log.Infof(ctx, "kinesisio: reusing enhanced fan-out consumer %s (%s)", arn, status)
	case errors.As(err, &notFound):
		var out *kinesis.RegisterStreamConsumerOutput
		err := backoff.Do(ctx, r.retry, func(ctx context.Context) error {
			var err error
			out, err = r.client.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String(name)})
			return err
		}, nil)
		var inUse *types.ResourceInUseException
		switch {
		case err == nil:
			arn, status = aws.ToString(out.Consumer.ConsumerARN), string(out.Consumer.ConsumerStatus)
			log.Infof(ctx, "kinesisio: registered enhanced fan-out consumer %s", arn)
		case errors.As(err, &inUse):
			// Another worker registered it first.
			desc, err := describe(&kinesis.DescribeStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String(name)})
			if err != nil {
				return "", fmt.Errorf("describing the consumer registered meanwhile: %w", err)
			}
			arn, status = aws.ToString(desc.ConsumerARN), string(desc.ConsumerStatus)
		default:
			return "", fmt.Errorf("registering it: %w", err)
		}
	default:
		return "", fmt.Errorf("describing it: %w", err)
	}

	deadline := time.Now().Add(consumerActivationTimeout)
	wait := 100 * time.Millisecond
	for status != string(types.ConsumerStatusActive) {
		if status == string(types.ConsumerStatusDeleting) {
			return "", fmt.Errorf("consumer %s is being deregistered; wait until it is gone or use another name", arn)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("consumer %s is still %s after %v", arn, status, consumerActivationTimeout)
		}
		if err := backoff.Sleep(ctx, wait); err != nil {
			return "", fmt.Errorf("waiting for consumer %s to become ACTIVE: %w", arn, err)
		}
		wait = min(2*wait, 2*time.Second)
		desc, err := describe(&kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
		if err != nil {
			return "", fmt.Errorf("waiting for consumer %s to become ACTIVE: %w", arn, err)
		}
		status = string(desc.ConsumerStatus)
	}
	return arn, nil
}
