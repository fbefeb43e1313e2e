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

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/errkind"
)

// What a ResourceNotFoundException met while reading a shard turned out to mean.
const (
	goneNothing  = ""         // the stream, the shard and the consumer all still exist
	goneStream   = "stream"   // the stream was deleted
	goneConsumer = "consumer" // the enhanced fan-out consumer was deregistered
	goneShard    = "shard"    // the shard closed longer ago than the stream's retention
)

// isNotFound reports whether err is (or wraps) a ResourceNotFoundException.
func isNotFound(err error) bool {
	var notFound *types.ResourceNotFoundException
	return errors.As(err, &notFound)
}

// missingResource finds out which resource the read of d depends on no longer exists: the
// stream, the enhanced fan-out consumer (when consumerARN is set) or the shard itself, which
// the service forgets once it has been closed for longer than the retention period.
func (r *shardReader) missingResource(ctx context.Context, d shardDescriptor, consumerARN string) (string, error) {
	shards, err := r.api.ListShards(ctx, d.Stream, nil)
	switch {
	case isNotFound(err):
		return goneStream, nil
	case err != nil:
		return goneNothing, err
	}
	if consumerARN != "" {
		desc, err := r.api.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(consumerARN)})
		switch {
		case isNotFound(err):
			return goneConsumer, nil
		case err != nil:
			return goneNothing, fmt.Errorf("kinesisio: describing consumer %s: %w", consumerARN, err)
		case desc.ConsumerStatus == types.ConsumerStatusDeleting:
			return goneConsumer, nil
		}
	}
	for _, s := range shards {
		if aws.ToString(s.ShardId) == d.ShardID {
			return goneNothing, nil
		}
	}
	return goneShard, nil
}

// resourceGone handles a ResourceNotFoundException (cause) met while reading the shard of st.
// A deleted stream or a deregistered consumer fails the read with an error that says so. A
// shard that no longer exists has closed and passed the stream's retention, as the KCL takes
// it, so its read ends there (ended) and its children, found by discovery, go on: quietly
// when every record it held had been read (the read had caught up, or read records, later
// than the shard can have closed), and otherwise as data loss, which fails the read unless
// WithSkipOnDataLoss is given. It returns neither when everything still exists.
func (r *shardReader) resourceGone(ctx context.Context, st *readState, consumerARN string, cause error) (ended bool, err error) {
	what, err := r.missingResource(ctx, st.d, consumerARN)
	if err != nil {
		return false, fmt.Errorf("kinesisio: reading %v: %w (finding out what no longer exists failed: %v)", st.d, cause, err)
	}
	switch what {
	case goneStream:
		return false, errkind.Mark(errkind.StreamNotFound, fmt.Errorf("kinesisio: reading %v: the stream no longer exists: %w", st.d, cause))
	case goneConsumer:
		return false, fmt.Errorf("kinesisio: reading %v: enhanced fan-out consumer %s was deregistered while the read ran; register it again, or read with another consumer: %w", st.d, consumerARN, cause)
	case goneNothing:
		return false, nil
	}
	// A shard is forgotten no sooner than the minimum retention after it closed, and every
	// one of its records arrived before it closed: a read that had verified a time after
	// that has read them all.
	rest := st.rest
	verified := rest.VerifiedMs
	if c := st.lastClaim; c != nil && c.ArrivalMs > verified {
		verified = c.ArrivalMs
	}
	if verified == 0 || time.Since(time.UnixMilli(verified)) >= minRetention {
		if r.spec.FailOnDataLoss {
			return false, errkind.Mark(errkind.DataLoss, fmt.Errorf("kinesisio: %v no longer exists: it closed and passed the stream's retention before the read (at %s) reached its end, so records may have been lost; pass kinesisio.WithSkipOnDataLoss() to end its read there and go on with its children: %w", st.d, rest.startString(), cause))
		}
		dataLossSkips.Inc(ctx, 1)
		log.Warnf(ctx, "kinesisio: %v no longer exists (it closed and passed the stream's retention) before the read at %s reached its end; records may have been lost; going on with its children", st.d, rest.startString())
	} else {
		log.Infof(ctx, "kinesisio: %v no longer exists (it closed and passed the stream's retention) and had been read to its end", st.d)
	}
	return true, nil
}

// readError is what the read of st's shard does after err: if err is a
// ResourceNotFoundException, what resourceGone decides (a fetched batch that ends the shard, or an
// error); otherwise, or when everything still exists, it fails with err.
func (r *shardReader) readError(ctx context.Context, st *readState, consumerARN string, err error) (fetched, error) {
	if isNotFound(err) {
		ended, gerr := r.resourceGone(ctx, st, consumerARN, err)
		if gerr != nil {
			return fetched{}, gerr
		}
		if ended {
			return fetched{gone: true}, nil
		}
	}
	return fetched{}, err
}
