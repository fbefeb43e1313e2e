package kinesisio

import (
	"fmt"
	"math"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
)

// Write defaults. Aggregation and its limits follow the KPL (kinesis-protocol-notes §1.6);
// see each option for why a default differs from the KPL or the Spark connectors.
const (
	// DefaultMaxAggregateBytes is the KPL's AggregationMaxSize: small enough that a
	// shard's 1 MiB/s carries 20 aggregates a second (so rate limiting stays smooth and a
	// retried aggregate costs little), large enough that per-record overhead is negligible.
	DefaultMaxAggregateBytes = 51200
	// DefaultMaxAggregateRecords is the KPL's AggregationMaxCount: in effect no limit, the
	// byte limit decides.
	DefaultMaxAggregateRecords = math.MaxUint32
	// DefaultRecordMaxBufferedTime is the KPL's RecordMaxBufferedTime.
	DefaultRecordMaxBufferedTime = 100 * time.Millisecond
	// DefaultMaxConnections is the KPL's MaxConnections.
	DefaultMaxConnections = 24
	// DefaultRateLimitPercent keeps each shard at its documented limits.
	DefaultRateLimitPercent = 100
	// DefaultMaxBufferedBytes bounds the user records a writer holds unacknowledged.
	DefaultMaxBufferedBytes = 32 << 20
	// DefaultShardMapRefreshInterval is how often the writer lists the open shards even
	// without evidence of resharding.
	DefaultShardMapRefreshInterval = time.Minute
)

// shardMapMinGap is the shortest time between shard listings caused by evidence of a
// resharding (the KPL's initial shard map refresh backoff).
const shardMapMinGap = 500 * time.Millisecond

// writeConfig holds the options of Write. It travels inside the write DoFn, so its fields
// are exported.
type writeConfig struct {
	Aggregate             bool
	MaxAggregateBytes     int
	MaxAggregateRecords   int
	RecordMaxBufferedTime time.Duration
	MaxConnections        int
	FlushWaitTime         time.Duration
	RateLimitPercent      int
	MaxBufferedBytes      int
	FailOnError           bool
	ShardMapRefresh       time.Duration
}

func defaultWriteConfig() writeConfig {
	return writeConfig{
		Aggregate:             true,
		MaxAggregateBytes:     DefaultMaxAggregateBytes,
		MaxAggregateRecords:   DefaultMaxAggregateRecords,
		RecordMaxBufferedTime: DefaultRecordMaxBufferedTime,
		MaxConnections:        DefaultMaxConnections,
		RateLimitPercent:      DefaultRateLimitPercent,
		MaxBufferedBytes:      DefaultMaxBufferedBytes,
		ShardMapRefresh:       DefaultShardMapRefreshInterval,
	}
}

// limits are the packing limits the configuration implies for a stream whose record size
// limit (partition key + data, MaxRecordSizeInKiB) is maxRecordBytes: raw records up to
// it, aggregates up to MaxAggregateBytes whatever the stream allows, and requests of 5 MiB,
// or 10 MiB when the stream allows records over 1 MiB (batch.RequestBytesFor).
func (w *writeConfig) limits(maxRecordBytes int) batch.Limits {
	return batch.Limits{
		Aggregate:           w.Aggregate,
		MaxAggregateBytes:   w.MaxAggregateBytes,
		MaxAggregateRecords: w.MaxAggregateRecords,
		MaxRecordBytes:      maxRecordBytes,
		MaxRequestEntries:   batch.MaxRequestEntries,
		MaxRequestBytes:     batch.RequestBytesFor(maxRecordBytes),
	}
}

func (w *writeConfig) validate() error {
	if err := w.limits(batch.DefaultMaxRecordBytes).Validate(); err != nil {
		return fmt.Errorf("write limits: %w", err)
	}
	return nil
}

// refuseWriteNoOps refuses WithAggregation beside WithoutAggregation, and the aggregate
// limits without aggregation, which the batcher reads only when it aggregates
// (internal/batch).
func (c *config) refuseWriteNoOps() error {
	if err := c.onlyOne("whether to aggregate", "WithAggregation", "WithoutAggregation"); err != nil {
		return err
	}
	if !c.write.Aggregate {
		for _, name := range []string{"WithMaxAggregateBytes", "WithMaxAggregateRecords"} {
			if c.given[name] {
				return noOp(name, "it bounds KPL aggregates, and WithoutAggregation makes none", "remove one of them")
			}
		}
	}
	return nil
}

// WithAggregation packs the user records bound for one shard into KPL aggregated records
// (the default, as in the KPL and the Spark connectors' kinesis.executor.aggregationEnabled).
// Consumers must deaggregate: kinesisio.Read, the KCL and Lambda's KPL support do. It is
// refused beside WithoutAggregation.
func WithAggregation() WriteOption {
	return writeOnly{option{name: "WithAggregation", apply: func(c *config) error {
		c.write.Aggregate = true
		return nil
	}}}
}

// WithoutAggregation sends every message as its own Kinesis record, for consumers that
// cannot deaggregate. A shard then carries at most 1000 messages a second however small
// they are. WithMaxAggregateBytes and WithMaxAggregateRecords are refused beside it.
func WithoutAggregation() WriteOption {
	return writeOnly{option{name: "WithoutAggregation", apply: func(c *config) error {
		c.write.Aggregate = false
		return nil
	}}}
}

// WithMaxAggregateBytes bounds the size of an aggregated record as the service counts it
// (partition key + data), 64 bytes to 1 MiB. Default 51200 (the KPL's). Messages too large
// for an aggregate are sent on their own, as plain records, up to the stream's record size
// limit (see Write): a stream that allows larger records does not make aggregates larger.
// It applies with aggregation, and is refused beside WithoutAggregation.
func WithMaxAggregateBytes(n int) WriteOption {
	return writeOnly{option{name: "WithMaxAggregateBytes", apply: func(c *config) error {
		if n < 64 || n > batch.DefaultMaxRecordBytes {
			return fmt.Errorf("%d bytes is outside 64..%d (the record size limit)", n, batch.DefaultMaxRecordBytes)
		}
		c.write.MaxAggregateBytes = n
		return nil
	}}}
}

// WithMaxAggregateRecords bounds the number of messages in one aggregated record. Default:
// no limit but the byte limit (the KPL's 4294967295). It applies with aggregation, and is
// refused beside WithoutAggregation.
func WithMaxAggregateRecords(n int) WriteOption {
	return writeOnly{option{name: "WithMaxAggregateRecords", apply: func(c *config) error {
		if n < 1 {
			return fmt.Errorf("the limit %d must be at least 1", n)
		}
		c.write.MaxAggregateRecords = n
		return nil
	}}}
}

// WithRecordMaxBufferedTime sets how long a message may wait for its aggregate or its
// PutRecords request to fill before it is sent anyway (the Spark connectors'
// kinesis.executor.recordMaxBufferedTime). Default 100 ms, the KPL's (the Spark connectors
// used 1 s). Longer waits fill requests better; every bundle is flushed at its end in any case.
func WithRecordMaxBufferedTime(d time.Duration) WriteOption {
	return writeOnly{option{name: "WithRecordMaxBufferedTime", apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("the buffered time %v must be positive", d)
		}
		c.write.RecordMaxBufferedTime = d
		return nil
	}}}
}

// WithMaxConnections bounds the PutRecords requests one worker runs at once, 1 to 256 (the
// Spark connectors' kinesis.executor.maxConnections). Default 24, the KPL's.
func WithMaxConnections(n int) WriteOption {
	return writeOnly{option{name: "WithMaxConnections", apply: func(c *config) error {
		if n < 1 || n > 256 {
			return fmt.Errorf("%d connections is outside 1..256", n)
		}
		c.write.MaxConnections = n
		return nil
	}}}
}

// WithFlushWaitTime bounds how long the end of a bundle waits for its messages to be
// acknowledged; when the time runs out the bundle fails and Beam retries it, so messages
// acknowledged before may be written twice (the write is at-least-once in any case).
// Default: no bound; retries are bounded by WithRetries.
//
// It stands for the Spark connectors' kinesis.executor.flushwaittimemillis, which was the
// polling interval of their flush loop. Write does not poll (each acknowledgement wakes it),
// so the option bounds the wait instead.
func WithFlushWaitTime(d time.Duration) WriteOption {
	return writeOnly{option{name: "WithFlushWaitTime", apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("the wait %v must be positive", d)
		}
		c.write.FlushWaitTime = d
		return nil
	}}}
}

// WithRateLimit sets the share of each shard's write limits (1000 records/s, 1 MiB/s) a
// worker allows itself, in percent, 1 to 1000. An aggregated record counts as one record.
// A record larger than a shard's budget (a large record on a stream that allows them, see
// Write) is sent once the shard's budget is full and delays that shard's next records until
// its bytes are paid off, so the long-run rate holds.
// Default 100, so a healthy stream is not driven into throttling. The limit is per worker:
// with several workers writing to the same shards, lower it or rely on retries. (The KPL's
// default of 150 relies on retrying until a 30 s TTL; Write's retries are counted.)
func WithRateLimit(percent int) WriteOption {
	return writeOnly{option{name: "WithRateLimit", apply: func(c *config) error {
		if percent < 1 || percent > 1000 {
			return fmt.Errorf("%d%% is outside 1..1000", percent)
		}
		c.write.RateLimitPercent = percent
		return nil
	}}}
}

// WithMaxBufferedBytes bounds the memory a worker's writer holds in messages not yet
// acknowledged, at least 1 MiB; processing blocks beyond it. Default 32 MiB. A message counts
// its partition key and data twice (the message and its encoded copy) plus about 256 bytes of
// bookkeeping, so the bound holds for the heap, not just for the payload bytes. A single
// message over the bound (a large record on a stream that allows them) is still accepted,
// once everything before it is acknowledged.
func WithMaxBufferedBytes(n int) WriteOption {
	return writeOnly{option{name: "WithMaxBufferedBytes", apply: func(c *config) error {
		if n < batch.DefaultMaxRecordBytes {
			return fmt.Errorf("%d bytes is below the record size limit of %d", n, batch.DefaultMaxRecordBytes)
		}
		c.write.MaxBufferedBytes = n
		return nil
	}}}
}

// WithFailOnError makes a message that cannot be written fail the bundle (and so, after
// the runner's retries, the pipeline) instead of going to the failed output. This includes
// a message over the stream's record size limit: raising the limit with
// UpdateMaxRecordSize lets the retried bundle write it. Other invalid messages (bad keys)
// still go to the failed output: retrying cannot fix them.
func WithFailOnError() WriteOption {
	return writeOnly{option{name: "WithFailOnError", apply: func(c *config) error {
		c.write.FailOnError = true
		return nil
	}}}
}

// WithShardMapRefreshInterval sets how often the writer lists the stream's open shards to
// route messages, besides listing them when a write shows a resharding. Default 1 minute.
func WithShardMapRefreshInterval(d time.Duration) WriteOption {
	return writeOnly{option{name: "WithShardMapRefreshInterval", apply: func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("the interval %v is below 1s", d)
		}
		c.write.ShardMapRefresh = d
		return nil
	}}}
}
