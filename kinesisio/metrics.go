package kinesisio

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/readapi"
)

// metricsNamespace is the Beam metrics namespace of every kinesisio metric.
const metricsNamespace = "kinesisio"

// Read metrics. Counters are added once per GetRecords response, not per record.
var (
	recordsRead          = beam.NewCounter(metricsNamespace, "records")
	bytesRead            = beam.NewCounter(metricsNamespace, "bytes")
	getRecordsCalls      = beam.NewCounter(metricsNamespace, "getrecords_calls")
	readThrottles        = beam.NewCounter(metricsNamespace, "throttles")
	readRetries          = beam.NewCounter(metricsNamespace, "retries")
	expiredIterators     = beam.NewCounter(metricsNamespace, "expired_iterators")
	readUnavailable      = beam.NewCounter(metricsNamespace, "unavailable")
	aggregatesPassed     = beam.NewCounter(metricsNamespace, "aggregates_passed_through")
	aggregatesOutOfRange = beam.NewCounter(metricsNamespace, "aggregates_outside_shard")
	dataLossSkips        = beam.NewCounter(metricsNamespace, "data_loss_skips")
	shardsDiscovered     = beam.NewCounter(metricsNamespace, "shards_discovered")
	millisBehindLatest   = beam.NewGauge(metricsNamespace, "millis_behind_latest")
	recordsPerCall       = beam.NewDistribution(metricsNamespace, "records_per_getrecords")
	// iteratorsReused counts ProcessElement calls that continued the shard iterator the
	// previous call on this worker left, instead of calling GetShardIterator.
	iteratorsReused = beam.NewCounter(metricsNamespace, "iterators_reused")
	// backlogBytes is the latest estimate of a shard's unread bytes (shardmemo.go).
	backlogBytes = beam.NewGauge(metricsNamespace, "backlog_bytes")
)

// Enhanced fan-out metrics, beside the read metrics polling also counts (records, bytes,
// throttles, retries, millis_behind_latest).
var (
	// subscribeCalls counts SubscribeToShard calls, refused ones included.
	subscribeCalls = beam.NewCounter(metricsNamespace, "subscribe_calls")
	// resubscribes counts subscriptions that ended before their shard did and were renewed.
	resubscribes = beam.NewCounter(metricsNamespace, "resubscribes")
	// subscriptionsReused counts ProcessElement calls that continued the subscription a
	// previous call on this worker left open, instead of subscribing.
	subscriptionsReused = beam.NewCounter(metricsNamespace, "subscriptions_reused")
)

// reportCalls adds the Kinesis calls a read's client counted to the read metrics.
func reportCalls(ctx context.Context, s readapi.Stats) {
	if s.GetRecords > 0 {
		getRecordsCalls.Inc(ctx, s.GetRecords)
	}
	if s.Subscribes > 0 {
		subscribeCalls.Inc(ctx, s.Subscribes)
	}
	if s.Throttles > 0 {
		readThrottles.Inc(ctx, s.Throttles)
	}
	if s.Retries > 0 {
		readRetries.Inc(ctx, s.Retries)
	}
}
