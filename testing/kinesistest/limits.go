package kinesistest

import "sync"

// Throughput limits of the service, enforced in limits mode.
const (
	shardWriteRecordsPerSec = 1000
	shardWriteBytesPerSec   = 1 << 20
	shardReadCallsPerSec    = 5
	shardReadBytesPerSec    = 2 << 20
	shardIteratorsPerSec    = 5
)

// largeReadPauseMs is how long a GetRecords page of bytes pauses its shard's
// reads under the large-read throttle: the time the shard's read rate takes to
// pay for it, rounded up to the millisecond (5000 for 10 MiB).
func largeReadPauseMs(bytes int) int64 {
	return (int64(bytes)*1000 + shardReadBytesPerSec - 1) / shardReadBytesPerSec
}

// controlPlaneTPS is the documented transactions per second of the control
// plane operations, per account (ListShards: per stream). Exceeding one gives
// LimitExceededException.
var controlPlaneTPS = map[string]float64{
	"CreateStream":                  5,
	"DeleteStream":                  5,
	"DescribeStream":                10,
	"DescribeStreamSummary":         20,
	"ListStreams":                   5,
	"ListShards":                    1000,
	"SplitShard":                    5,
	"MergeShards":                   5,
	"UpdateShardCount":              10,
	"IncreaseStreamRetentionPeriod": 5,
	"DecreaseStreamRetentionPeriod": 5,
	"UpdateMaxRecordSize":           5,
	"UpdateStreamWarmThroughput":    5,
	"DescribeAccountSettings":       5,
	"UpdateAccountSettings":         5,
	// The service counts the consumer operations but RegisterStreamConsumer
	// per stream; this server counts them all per account.
	"RegisterStreamConsumer":   5,
	"DeregisterStreamConsumer": 5,
	"DescribeStreamConsumer":   20,
	"ListStreamConsumers":      5,
}

// Resharding quotas of UpdateShardCount, enforced in limits mode.
const (
	maxScalingsPerDay  = 10
	maxShardsPerStream = 10000
)

// bucket is a token bucket on the server clock that holds at most one second
// of its rate. It may go into debt: a request larger than the bucket (a 10 MiB
// GetRecords page, a large record) is let through when the bucket is full and
// then blocks others until the debt is repaid, which is how the service
// treats a GetRecords call that returns 10 MiB ("throttled for the next 5 s").
type bucket struct {
	rate   float64 // tokens per second, also the capacity
	tokens float64
	lastMs int64
	primed bool
}

func (b *bucket) refill(nowMs int64) {
	if !b.primed {
		b.tokens, b.lastMs, b.primed = b.rate, nowMs, true
		return
	}
	// A clock set backwards does not refill; the window restarts from there.
	if elapsed := nowMs - b.lastMs; elapsed > 0 {
		b.tokens += b.rate * float64(elapsed) / 1000
		if b.tokens > b.rate {
			b.tokens = b.rate
		}
	}
	b.lastMs = nowMs
}

// take consumes n tokens if the bucket holds them (or is full, for n larger
// than the bucket) and reports whether it did.
func (b *bucket) take(nowMs int64, n float64) bool {
	b.refill(nowMs)
	if b.tokens < min(n, b.rate) {
		return false
	}
	b.tokens -= n
	return true
}

// positive reports whether the bucket is out of debt; charge takes the actual
// cost afterwards. Reads use this pair because a page's size is only known
// once it is read.
func (b *bucket) positive(nowMs int64) bool {
	b.refill(nowMs)
	return b.tokens > 0
}

func (b *bucket) charge(n float64) { b.tokens -= n }

// shardBuckets are one shard's throughput windows; guarded by the shard's mu.
type shardBuckets struct {
	writeRecords bucket
	writeBytes   bucket
	readCalls    bucket
	readBytes    bucket
	iterators    bucket
}

func newShardBuckets() shardBuckets {
	return shardBuckets{
		writeRecords: bucket{rate: shardWriteRecordsPerSec},
		writeBytes:   bucket{rate: shardWriteBytesPerSec},
		readCalls:    bucket{rate: shardReadCallsPerSec},
		readBytes:    bucket{rate: shardReadBytesPerSec},
		iterators:    bucket{rate: shardIteratorsPerSec},
	}
}

// takeWrite admits one record of size bytes against both write limits, or
// neither.
func (sb *shardBuckets) takeWrite(nowMs int64, size int) bool {
	sb.writeRecords.refill(nowMs)
	sb.writeBytes.refill(nowMs)
	if sb.writeRecords.tokens < 1 || sb.writeBytes.tokens < min(float64(size), sb.writeBytes.rate) {
		return false
	}
	sb.writeRecords.tokens--
	sb.writeBytes.tokens -= float64(size)
	return true
}

// rateLimiter holds the control plane's buckets by key.
type rateLimiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

// allow takes one token from the bucket of key, created with rate on first use.
func (l *rateLimiter) allow(key string, rate float64, nowMs int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if l.buckets == nil {
			l.buckets = make(map[string]*bucket)
		}
		b = &bucket{rate: rate}
		l.buckets[key] = b
	}
	return b.take(nowMs, 1)
}
