package producer

import (
	"fmt"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
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
