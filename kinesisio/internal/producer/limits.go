package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// Per-shard write limits of the service (kinesis-protocol-notes §2.1).
const (
	ShardRecordsPerSecond = 1000
	ShardBytesPerSecond   = 1 << 20
)

// limiterBurst is the burst the rate limiter allows each shard. The service's bucket holds
// one second; ours holds a little less because it is charged when a request leaves and the
// service's when it arrives: the margin absorbs the difference in latency between
// requests (a first request also opens its connection), which would otherwise show up as
// throttled entries at the start of a write and after every pause.
const limiterBurst = 950 * time.Millisecond

// Describer is the part of the Kinesis client StreamMaxRecordBytes uses.
type Describer interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// StreamMaxRecordBytes returns stream's record size limit in bytes (partition key + data)
// as DescribeStreamSummary reports it in MaxRecordSizeInKiB, retrying by policy. A summary
// without the field (a service or emulator that predates large records) means the default
// 1 MiB.
//
// New does not call it: Config.Limits is derived from the limit, and when the stream may
// not be described, what to do instead is the caller's choice (kinesisio.Write warns and
// keeps to 1 MiB).
func StreamMaxRecordBytes(ctx context.Context, api Describer, stream string, policy backoff.Policy) (int, error) {
	var out *kinesis.DescribeStreamSummaryOutput
	err := backoff.Do(ctx, policy, func(ctx context.Context) error {
		var err error
		out, err = api.DescribeStreamSummary(ctx, streamarn.SummaryInput(stream))
		return err
	}, nil)
	if err != nil {
		return 0, err
	}
	if out.StreamDescriptionSummary == nil || out.StreamDescriptionSummary.MaxRecordSizeInKiB == nil {
		return batch.DefaultMaxRecordBytes, nil
	}
	kib := int(*out.StreamDescriptionSummary.MaxRecordSizeInKiB)
	// Clamp to what the service documents (1024..10240 KiB), so a stray value can neither
	// refuse every record nor make requests the service would reject whole.
	return min(max(kib<<10, batch.DefaultMaxRecordBytes), batch.MaxRecordBytes), nil
}

// tooLarge explains why rec cannot be written to a stream whose record size limit is
// limit, and what to do about it.
func tooLarge(stream string, rec kpl.UserRecord, limit int) string {
	size := len(rec.PartitionKey) + len(rec.Data)
	reason := fmt.Sprintf("record of %d bytes (partition key %d + data %d) is over the stream's record size limit of %d bytes (stream %q, MaxRecordSizeInKiB %d)",
		size, len(rec.PartitionKey), len(rec.Data), limit, stream, limit>>10)
	if size <= batch.MaxRecordBytes {
		return reason + fmt.Sprintf("; raise the stream's limit with UpdateMaxRecordSize (MaxRecordSizeInKiB up to %d, 10 MiB) and restart the pipeline (writers read the limit when they start), or make the message smaller",
			batch.MaxRecordBytes>>10)
	}
	return reason + "; no stream takes records over 10 MiB (partition key included): split the message, or store the payload elsewhere (such as S3) and write a reference to it"
}
