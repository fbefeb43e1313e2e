package kinesisio

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/checkpoint"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/queue"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/readapi"
)

// Every metric the package reports, in one place. The namespace names the transform:
// "kinesisio" for Read and ReadBounded (discovery, the shard readers and their commit steps)
// and "kinesisio.Write" for Write. Names are snake_case: counters count things (records,
// calls, retries), gauges and distributions end with their unit (_bytes, _ms) or say what
// they hold; the checkpoint table's start with checkpoint_. The package doc lists them.
const (
	// metricsNamespace is the namespace of the read's metrics.
	metricsNamespace = "kinesisio"
	// writeNamespace is the namespace of Write's metrics.
	writeNamespace = "kinesisio.Write"
)

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
	// aggregatesKeptOnAuto counts the aggregates outside their shard's range read whole
	// because the stream distributes records itself (AUTO).
	aggregatesKeptOnAuto = beam.NewCounter(metricsNamespace, "aggregates_outside_shard_kept")
	dataLossSkips        = beam.NewCounter(metricsNamespace, "data_loss_skips")
	shardsDiscovered     = beam.NewCounter(metricsNamespace, "shards_discovered")
	millisBehindLatest   = beam.NewGauge(metricsNamespace, "millis_behind_latest")
	recordsPerCall       = beam.NewDistribution(metricsNamespace, "records_per_getrecords")
	// iteratorsReused counts ProcessElement calls that continued the shard iterator the
	// previous call on this worker left, instead of calling GetShardIterator.
	iteratorsReused = beam.NewCounter(metricsNamespace, "iterators_reused")
	// backlogBytes is the latest estimate of a shard's unread bytes (read_backlog.go).
	backlogBytes = beam.NewGauge(metricsNamespace, "backlog_bytes")
	// checkpointsInsideAggregates counts the checkpoints made after a user record that was
	// not the last of its KPL aggregate: the call that resumes reads the aggregate again
	// and skips what was claimed.
	checkpointsInsideAggregates = beam.NewCounter(metricsNamespace, "checkpoints_inside_aggregates")
)

// Read-ahead metrics (read_ahead.go), reported by the read's calls in the worker: pages
// fetched while no call held their shard, pages (their calls and data bytes) dropped
// because no call resumed where they start, entries dropped after readAheadIdleAge, and the
// memory the read's entries hold.
var (
	readAheadPages        = beam.NewCounter(metricsNamespace, "readahead_pages")
	readAheadDroppedPages = beam.NewCounter(metricsNamespace, "readahead_dropped_pages")
	readAheadDroppedBytes = beam.NewCounter(metricsNamespace, "readahead_dropped_bytes")
	readAheadDroppedCalls = beam.NewCounter(metricsNamespace, "readahead_dropped_calls")
	readAheadExpired      = beam.NewCounter(metricsNamespace, "readahead_expired")
	readAheadHeldBytes    = beam.NewGauge(metricsNamespace, "readahead_held_bytes")
)

// Write metrics, reported from the producer's statistics (writeFn.report).
var (
	writeUserRecords    = beam.NewCounter(writeNamespace, "user_records")
	writeKinesisRecords = beam.NewCounter(writeNamespace, "kinesis_records")
	writeBytes          = beam.NewCounter(writeNamespace, "bytes")
	writeCalls          = beam.NewCounter(writeNamespace, "putrecords_calls")
	writeThrottled      = beam.NewCounter(writeNamespace, "throttled_entries")
	writeRetries        = beam.NewCounter(writeNamespace, "retries")
	writeFailures       = beam.NewCounter(writeNamespace, "failed_messages")
	writeInvalid        = beam.NewCounter(writeNamespace, "invalid_messages")
	writeWrongShard     = beam.NewCounter(writeNamespace, "wrong_shard_aggregates")
	writeRerouted       = beam.NewCounter(writeNamespace, "rerouted_messages")
	writeAggregateSizes = beam.NewDistribution(writeNamespace, "aggregate_bytes")
	// writeServiceDistributed counts the messages written as records of their own,
	// although aggregation is on, to a stream that distributes records itself (AUTO).
	writeServiceDistributed = beam.NewCounter(writeNamespace, "service_distributed_messages")
	// writeDistributionSwitches counts the switches of the stream's distribution strategy
	// a writer adopted while it ran.
	writeDistributionSwitches = beam.NewCounter(writeNamespace, "distribution_switches")
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

// inc adds n to counter c, skipping the call when there is nothing to add.
func inc(ctx context.Context, c beam.Counter, n int64) {
	if n != 0 {
		c.Inc(ctx, n)
	}
}

// reportCalls adds the Kinesis calls a read's client counted to the read metrics.
func reportCalls(ctx context.Context, s readapi.Stats) {
	inc(ctx, getRecordsCalls, s.GetRecords)
	inc(ctx, subscribeCalls, s.Subscribes)
	inc(ctx, readThrottles, s.Throttles)
	inc(ctx, readRetries, s.Retries)
}

// Checkpoint table metrics: commits written, DynamoDB calls, latency of a commit's write,
// lag from the end of the reader call that reached a position to its committed write,
// SHARD_END commits, leases lost to another owner, lease renewals, commits held because the
// table was unreachable (internal/checkpoint). Per shard,
// checkpoint_committed_records_<shard id> counts the user records the committed positions
// cover. They are reported by the commit step's bundles.
var (
	tableCommits    = beam.NewCounter(metricsNamespace, "checkpoint_commits")
	tableCalls      = beam.NewCounter(metricsNamespace, "checkpoint_dynamodb_calls")
	tableLatencyMs  = beam.NewDistribution(metricsNamespace, "checkpoint_commit_latency_ms")
	tableLagMs      = beam.NewDistribution(metricsNamespace, "checkpoint_commit_lag_ms")
	tableShardEnds  = beam.NewCounter(metricsNamespace, "checkpoint_shard_ends")
	tableLostLeases = beam.NewCounter(metricsNamespace, "checkpoint_leases_lost")
	tableRenewals   = beam.NewCounter(metricsNamespace, "checkpoint_lease_renewals")
	// tableUnavailable counts the commits (and SHARD_END preparations) the table could not
	// take when they were made; the checkpointer holds and retries them.
	tableUnavailable = beam.NewCounter(metricsNamespace, "checkpoint_table_unavailable")
)

// committedRecordsMetric is the name of the per-shard counter of committed records.
func committedRecordsMetric(shardID string) string { return "checkpoint_committed_records_" + shardID }

// reportTable adds what a checkpoint table's handle counted since the last report to the
// Beam metrics, and shows it to tableReported when a test set that.
func reportTable(ctx context.Context, cp *checkpoint.Checkpointer) {
	s := cp.TakeStats()
	if tableReported != nil {
		tableReported(cp.Table(), s)
	}
	inc(ctx, tableCommits, s.Commits)
	inc(ctx, tableCalls, s.Calls)
	inc(ctx, tableShardEnds, s.ShardEnds)
	inc(ctx, tableLostLeases, s.LeasesLost)
	inc(ctx, tableRenewals, s.Renewals)
	inc(ctx, tableUnavailable, s.Unavailable)
	for shard, n := range s.Records {
		inc(ctx, beam.NewCounter(metricsNamespace, committedRecordsMetric(shard)), n)
	}
	for _, ms := range s.LatencyMs {
		tableLatencyMs.Update(ctx, ms)
	}
	for _, ms := range s.LagMs {
		tableLagMs.Update(ctx, ms)
	}
}

// queueNamespace is the namespace of the queue read's metrics (ReadQueue,
// ReadQueueDeadLetters).
const queueNamespace = "kinesisio.ReadQueue"

// Queue read metrics, reported from the engine's statistics (internal/queue) by the
// receiver slots' calls and the acknowledge step's bundles.
var (
	queueRecords       = beam.NewCounter(queueNamespace, "records")
	queueBytes         = beam.NewCounter(queueNamespace, "bytes")
	queueReceives      = beam.NewCounter(queueNamespace, "receive_calls")
	queueEmptyReceives = beam.NewCounter(queueNamespace, "empty_receives")
	queueThrottles     = beam.NewCounter(queueNamespace, "throttles")
	queueRetries       = beam.NewCounter(queueNamespace, "retries")
	// queueExtensions counts visibility extensions of held records; queueReleased, held
	// records let go at the processing timeout (they come back).
	queueExtensions = beam.NewCounter(queueNamespace, "extensions")
	queueReleased   = beam.NewCounter(queueNamespace, "released")
	queueAcks       = beam.NewCounter(queueNamespace, "acks")
	queueRestores   = beam.NewCounter(queueNamespace, "restores")
	queueFailedAcks = beam.NewCounter(queueNamespace, "failed_acks")
	queueStale      = beam.NewCounter(queueNamespace, "stale_handles")
	// queueDuplicates counts deliveries dropped by WithQueueDeduplication.
	queueDuplicates = beam.NewCounter(queueNamespace, "duplicates")
	// queueInFlight is how many records the worker's pool holds in flight.
	queueInFlight = beam.NewGauge(queueNamespace, "in_flight")
	// queueAckLagMs is, per acknowledged (or restored) record, the time from its receive
	// to its acknowledgement.
	queueAckLagMs = beam.NewDistribution(queueNamespace, "ack_lag_ms")
)

// reportQueue adds a queue engine's statistics to the metrics.
func reportQueue(ctx context.Context, s queue.Stats) {
	inc(ctx, queueRecords, s.Records)
	inc(ctx, queueBytes, s.Bytes)
	inc(ctx, queueReceives, s.Receives)
	inc(ctx, queueEmptyReceives, s.EmptyReceives)
	inc(ctx, queueThrottles, s.Throttles)
	inc(ctx, queueRetries, s.Retries)
	inc(ctx, queueExtensions, s.Extensions)
	inc(ctx, queueReleased, s.Released)
	inc(ctx, queueAcks, s.Acks)
	inc(ctx, queueRestores, s.Restores)
	inc(ctx, queueFailedAcks, s.FailedAcks)
	inc(ctx, queueStale, s.StaleHandles)
	for _, ms := range s.AckLagMs {
		queueAckLagMs.Update(ctx, ms)
	}
}

// tableReported, when set, sees every report of reportTable with its table's name. Only
// tests set it, before any read runs (main_test.go), to observe what the table's handles
// did beside the metrics.
var tableReported func(table string, s checkpoint.Stats)
