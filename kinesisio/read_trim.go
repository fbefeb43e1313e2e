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
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/seqnum"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
)

// The trim rule, for polling and enhanced fan-out alike: a read that starts at a sequence
// number the stream no longer retains has lost the records between that number and the
// oldest retained one. It fails, or with WithSkipOnDataLoss it goes on from the trim
// horizon, with a warning and the data_loss_skips counter.

const (
	// minRetention is the shortest retention Kinesis allows. A position verified (read, or
	// caught up past) less than minRetention minus retentionMargin ago cannot have been
	// trimmed, so only older or user-given positions are checked against the trim horizon.
	minRetention    = 24 * time.Hour
	retentionMargin = time.Hour
	// trimProbePages bounds the pages read to find a shard's oldest record.
	trimProbePages = 20
)

// mayBeTrimmed reports whether the range starts at a sequence number that retention may have
// trimmed: one the user gave, or one the read last verified nearly a minimum retention ago.
func (r shardRestriction) mayBeTrimmed(now time.Time) bool {
	if _, ok := r.sequenceStart(); !ok {
		return false
	}
	return r.VerifiedMs == 0 || now.Sub(time.UnixMilli(r.VerifiedMs)) > minRetention-retentionMargin
}

// latestInFuture reports whether err is the service refusing the range's AT_TIMESTAMP start
// because it is still in the future on the service's clock: the read began at LATEST, which
// discovery made AT_TIMESTAMP on this worker's clock, less than a minute ago. Nothing has
// arrived after it yet, so LATEST reads the same records; the restriction keeps the
// timestamp, so a checkpoint before the first record still skips nothing.
func (r shardRestriction) latestInFuture(err error) bool {
	var invalid *types.InvalidArgumentException
	return err != nil && r.StartKind == startAtTimestamp && errors.As(err, &invalid) &&
		time.Since(time.UnixMilli(r.StartTimeMs)) < time.Minute
}

// checkStart applies the trim rule to start, where a fetcher opens shard d, when it may
// have been trimmed.
func (r *shardReader) checkStart(ctx context.Context, d shardDescriptor, start *shardRestriction) error {
	if !start.mayBeTrimmed(time.Now()) {
		return nil
	}
	lost, err := r.startTrimmed(ctx, d, start.StartSeq)
	if err != nil || lost == "" {
		return err
	}
	return r.onDataLoss(ctx, d, start, lost)
}

// onDataLoss fails the read of d, whose start is older than oldest, the oldest retained
// sequence number, or without failOnDataLoss moves start to the trim horizon (so nothing
// is skipped there: start.skipThrough() is nil).
func (r *shardReader) onDataLoss(ctx context.Context, d shardDescriptor, start *shardRestriction, oldest string) error {
	if r.spec.FailOnDataLoss {
		return dataLossError(d, *start, oldest)
	}
	dataLossSkips.Inc(ctx, 1)
	log.Warnf(ctx, "kinesisio: %v: the read position %s is older than the oldest retained record (%s); continuing from the trim horizon, records may have been lost", d, start.startString(), oldest)
	start.StartKind, start.StartSeq, start.StartSub = startTrimHorizon, "", 0
	return nil
}

// dataLossError is the error of a read whose position rest has been trimmed; oldest is the
// oldest retained sequence number.
func dataLossError(d shardDescriptor, rest shardRestriction, oldest string) error {
	return errkind.Mark(errkind.DataLoss, fmt.Errorf("kinesisio: %v: the read position %s is older than the oldest record the shard still retains (%s), so records may have been lost to the stream's retention; pass kinesisio.WithSkipOnDataLoss() to continue from the trim horizon", d, rest.startString(), oldest))
}

// startTrimmed reports whether the record seq of shard d has been trimmed: it returns the
// oldest retained sequence number (or "none") when that is later than seq, and "" when seq is
// still retained.
func (r *shardReader) startTrimmed(ctx context.Context, d shardDescriptor, seq string) (string, error) {
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(d.ShardID), ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	in.StreamName, in.StreamARN = streamarn.Input(d.Stream)
	it, err := r.api.ShardIterator(ctx, d, in)
	if err != nil {
		return "", fmt.Errorf("kinesisio: finding the trim horizon of %v: %w", d, err)
	}
	for range trimProbePages {
		out, err := r.api.GetRecords(ctx, d, it, 1)
		if err != nil {
			return "", fmt.Errorf("kinesisio: finding the trim horizon of %v: %w", d, err)
		}
		if len(out.Records) > 0 {
			oldest := aws.ToString(out.Records[0].SequenceNumber)
			if seqnum.Compare(oldest, seq) > 0 {
				return oldest, nil
			}
			return "", nil
		}
		caughtUp := out.MillisBehindLatest != nil && *out.MillisBehindLatest == 0
		if out.NextShardIterator == nil || caughtUp {
			break
		}
		it = aws.ToString(out.NextShardIterator)
	}
	// The shard retains no record at all, so the one the position names is gone too.
	return "none", nil
}
