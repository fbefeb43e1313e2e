package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/errkind"
)

// consumerActivationTimeout bounds how long a reader waits for a stream consumer to become
// ACTIVE after registering it (the service takes seconds, rarely more than a minute).
const consumerActivationTimeout = 5 * time.Minute

// enhancedFanOut reports whether the reader subscribes instead of polling.
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
// A consumer of that name that is being deregistered (DELETING) is waited on until it is
// gone, and then registered anew.
func (r *shardReader) resolveConsumer(ctx context.Context) (string, error) {
	summary, err := r.api.DescribeStreamSummary(ctx, r.spec.Stream)
	if err != nil {
		return "", fmt.Errorf("describing the stream: %w", err)
	}
	streamARN := summary.StreamARN
	byName := &kinesis.DescribeStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String(r.spec.ConsumerName)}

	deadline := time.Now().Add(consumerActivationTimeout)
	for {
		var arn, status string
		desc, err := r.api.DescribeStreamConsumer(ctx, byName)
		switch {
		case err == nil:
			arn, status = aws.ToString(desc.ConsumerARN), string(desc.ConsumerStatus)
			log.Infof(ctx, "kinesisio: reusing enhanced fan-out consumer %s (%s)", arn, status)
		case isNotFound(err):
			if arn, status, err = r.registerConsumer(ctx, streamARN, byName); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("describing it: %w", err)
		}
		status, err = r.awaitConsumer(ctx, arn, status, deadline, "to become ACTIVE", func(s string) bool {
			return s == string(types.ConsumerStatusActive) || s == string(types.ConsumerStatusDeleting) || s == ""
		})
		if err != nil {
			return "", err
		}
		if status == string(types.ConsumerStatusActive) {
			return arn, nil
		}
		// Being deregistered, or gone: wait until the name is free, then register it again.
		if status != "" {
			log.Infof(ctx, "kinesisio: enhanced fan-out consumer %s is being deregistered; waiting until it is gone to register %q again", arn, r.spec.ConsumerName)
			if _, err := r.awaitConsumer(ctx, arn, status, deadline, "to be deregistered", func(s string) bool { return s == "" }); err != nil {
				return "", fmt.Errorf("%w; use another consumer name", err)
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("could not register it within %v: it was deregistered each time", consumerActivationTimeout)
		}
	}
}

// awaitConsumer describes the consumer arn, whose status is status now, until done says yes
// to its status ("" once it is gone), backing off from 100ms to 2s, and returns that status.
// It fails after deadline; what says what it waits for.
func (r *shardReader) awaitConsumer(ctx context.Context, arn, status string, deadline time.Time, what string, done func(string) bool) (string, error) {
	wait := 100 * time.Millisecond
	for !done(status) {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("consumer %s is still %s after %v waiting for it %s", arn, status, consumerActivationTimeout, what)
		}
		if err := backoff.Sleep(ctx, wait); err != nil {
			return "", fmt.Errorf("waiting for consumer %s %s: %w", arn, what, err)
		}
		wait = min(2*wait, 2*time.Second)
		desc, err := r.api.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
		switch {
		case isNotFound(err):
			status = ""
		case err != nil:
			return "", fmt.Errorf("waiting for consumer %s %s: %w", arn, what, err)
		default:
			status = string(desc.ConsumerStatus)
		}
	}
	return status, nil
}

// registerConsumer registers the consumer byName names and returns its ARN and status. When
// another worker registered it first (ResourceInUseException), it describes that one.
func (r *shardReader) registerConsumer(ctx context.Context, streamARN *string, byName *kinesis.DescribeStreamConsumerInput) (arn, status string, err error) {
	consumer, err := r.api.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: streamARN, ConsumerName: byName.ConsumerName})
	var inUse *types.ResourceInUseException
	switch {
	case err == nil:
		arn = aws.ToString(consumer.ConsumerARN)
		log.Infof(ctx, "kinesisio: registered enhanced fan-out consumer %s", arn)
		return arn, string(consumer.ConsumerStatus), nil
	case isConsumerLimit(err):
		if lerr := r.consumerLimitError(ctx, err); lerr != nil {
			return "", "", lerr
		}
	case errors.As(err, &inUse):
		desc, err := r.api.DescribeStreamConsumer(ctx, byName)
		if isNotFound(err) {
			return "", "", nil // gone again already: the caller tries once more
		}
		if err != nil {
			return "", "", fmt.Errorf("describing the consumer registered meanwhile: %w", err)
		}
		return aws.ToString(desc.ConsumerARN), string(desc.ConsumerStatus), nil
	}
	return "", "", fmt.Errorf("registering it: %w", err)
}

// The service's limits on the consumers registered to one stream: 20, or 50 for an
// on-demand stream while the account has the On-demand Advantage minimum throughput billing
// commitment (UpdateAccountSettings). Registering one more answers LimitExceededException,
// which is also the answer to registering too fast (5 a second per account, at most 5
// consumers CREATING at once).
const (
	consumersPerStream          = 20
	consumersPerStreamCommitted = 50
)

// isConsumerLimit reports whether err is a LimitExceededException.
func isConsumerLimit(err error) bool {
	var limit *types.LimitExceededException
	return errors.As(err, &limit)
}

// consumerLimitError tells a stream at its consumer limit from a registration refused for
// its rate: when the stream has as many consumers as the limit allows, it returns the error
// that fails the read (it is not ridden out), saying which limit and how to raise it; nil
// otherwise.
func (r *shardReader) consumerLimitError(ctx context.Context, cause error) error {
	sum, err := r.api.DescribeStreamSummary(ctx, r.spec.Stream)
	if err != nil || aws.ToInt32(sum.ConsumerCount) < consumersPerStream {
		return nil
	}
	limit, committed := consumersPerStream, false
	onDemand := sum.StreamModeDetails != nil && sum.StreamModeDetails.StreamMode == types.StreamModeOnDemand
	if settings, err := r.api.DescribeAccountSettings(ctx); err == nil && settings.MinimumThroughputBillingCommitment != nil {
		switch settings.MinimumThroughputBillingCommitment.Status {
		case types.MinimumThroughputBillingCommitmentOutputStatusEnabled, types.MinimumThroughputBillingCommitmentOutputStatusEnabledUntilEarliestAllowedEnd:
			committed = true
		}
	}
	if committed && onDemand {
		limit = consumersPerStreamCommitted
	}
	if aws.ToInt32(sum.ConsumerCount) < int32(limit) {
		return nil // under its limit: the registration was refused for its rate
	}
	what := fmt.Sprintf("registering it: the stream already has %d registered consumers, the limit of %d", aws.ToInt32(sum.ConsumerCount), limit)
	how := "deregister a consumer the stream no longer needs (DeregisterStreamConsumer), share one with WithEnhancedFanOutConsumerARN, or read by polling (without WithEnhancedFanOut)"
	switch {
	case limit == consumersPerStreamCommitted:
		what += " for an on-demand stream under the minimum throughput billing commitment"
	case onDemand:
		what += fmt.Sprintf(" without the On-demand Advantage minimum throughput billing commitment, which raises it to %d (UpdateAccountSettings; it is billed, for at least 24 hours)", consumersPerStreamCommitted)
	default:
		what += fmt.Sprintf(" for a provisioned stream (an on-demand stream under the On-demand Advantage minimum throughput billing commitment allows %d)", consumersPerStreamCommitted)
	}
	return noRideOut{errkind.Mark(errkind.ConsumerLimit, fmt.Errorf("%s; %s: %w", what, how, cause))}
}
