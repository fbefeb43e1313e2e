// Package kinesisio is a native Apache Beam Go connector for Amazon Kinesis Data Streams.
// [Read] and [ReadBounded] turn a stream into a PCollection of [Record]; [Write] writes a
// PCollection of [Message] and returns the messages it could not write as a PCollection of
// [FailedMessage].
//
//	recs := kinesisio.Read(s, "orders",
//		kinesisio.WithRegion("eu-west-1"),
//		kinesisio.WithStartingPosition(kinesisio.TrimHorizon()))
//	failed := kinesisio.Write(s, "orders-copy", msgs, kinesisio.WithRegion("eu-west-1"))
//
// Options are typed by the transforms that take them: [Read] and [ReadBounded] take
// [ReadOption]s, [Write] takes [WriteOption]s, so a write option given to a read does not
// compile. Client options ([ClientOption]: [WithRegion], [WithEndpoint], [WithProfile],
// [WithStaticCredentials], [WithSessionToken], [WithAssumeRole], [WithRetries]) serve every
// transform; a [SourceOption] serves both reads. Options are validated when the pipeline is
// built: a bad option, or one that does nothing for the transform or beside another option
// given (each option says where it applies), panics with a message naming the option and the
// fix, never at run time. Without credential options the AWS SDK's default chain applies:
// environment, shared files, web identity, ECS task role, EC2 instance profile. Static keys
// travel inside the serialised pipeline and are never logged; prefer the default chain or
// [WithAssumeRole]. The stream argument is a stream name or a stream ARN (for a stream in
// another account); with an ARN the client's region is the ARN's, and a different
// [WithRegion] is refused.
//
// How the package works inside (its files, one record's path, pacing, the state a worker
// keeps, its vocabulary) is described in kinesisio/DESIGN.md in the repository.
//
// # Reading
//
// [Read] is the streaming read. It lists the stream's shards when it starts and every
// [WithDescribeShardInterval] (1s) after, and hands each shard, behind a Reshuffle, to a
// splittable DoFn. Shards created by SplitShard, MergeShards or UpdateShardCount are read as
// they appear, and each shard is read exactly once. [ReadBounded] reads every shard within
// retention, closed parents and their children alike, up to the records that arrived
// before the read started, and stops: the batch and backfill mode.
//
// A shard reader yields to the runner (a self-checkpoint) after [WithMaxRecordsPerFetch]
// user records (100000) or [WithMaxFetchTime] (1s), at the last user record it emitted, even
// inside a KPL aggregate. Aggregates are split into their user records unless
// [WithoutDeaggregation] keeps them whole. As the KCL does, a record with the KPL magic that
// does not parse is passed through whole, and an aggregate holding user records outside its
// shard's hash range is dropped; both are logged and counted.
//
// Event time is the record's ApproximateArrivalTimestamp (millisecond precision) unless
// [WithProcessingTimeWatermarkPolicy] or [WithCustomWatermarkPolicy] says otherwise. A
// shard's watermark is the latest arrival time it has read, and the read's watermark is the
// minimum over its shards. A caught-up shard that gets no records for [WithIdleThreshold]
// (5s) advances its watermark to the poll time minus that threshold, so one idle shard does
// not hold every window back. A new shard's records are not late, and the watermark never
// advances while reads fail.
//
// A read with an end reads every record that arrived before that end: [ReadBounded] ends at
// its start, or [WithMaxReadTime] after it; [Read] with [WithMaxReadTime] ends that long
// after its first shard listing, which it logs. A shard ends on a caught-up read sent
// [WithPropagationDelay] (1s) after the end, as Kinesis makes a record readable only after
// a short delay. [WithMaxRecords] stops each shard after n user records.
//
// Polling keeps to a shard's budget of 5 GetRecords calls a second, shared by every consumer
// of the stream: a caught-up shard waits [WithPollInterval] (250ms) after an empty page and
// leaves at least one call a second to others ([WithIdleTimeBetweenReads] leaves more); a
// shard that is behind is read back to back.
//
// A worker reads all its polling shards at once: while the runner works on one shard, the
// others the worker holds (a restriction it checkpointed, or one the runner sized before
// its first call) keep fetching their next pages within the same budget, up to the tip, and
// the call that resumes a shard exactly where they start reads them without waiting. The
// pages are held within [WithMaxReadAheadBytes] (64 MiB a read and worker, a quarter of it a
// shard); a restriction resumed elsewhere or at another position drops them, and the
// readahead_* metrics count the calls and bytes that cost. With enhanced fan-out, the
// subscriptions a worker leaves open between calls have their events read into the same
// bound, where the connection's buffers would hold only about 5 MiB before the service stops
// sending. [WithoutReadAhead] turns it off.
// A residual's backlog is then the bytes held plus what the newest answer's
// MillisBehindLatest says lies beyond them.
//
// Throttling, 5xx and dropped connections are retried with exponential backoff and full
// jitter ([WithRetries]: 3 retries, from 1s to 10s); an expired iterator is renewed from the
// last claimed position. When the retries run out a [ReadBounded] fails, and a [Read] logs a
// warning, counts unavailable and resumes from its last claimed position later; but a [Read]
// that has not once listed its shards fails after [WithStartupTimeout] (3 minutes; 0 rides
// out from the start) with [ErrNeverReached]. A position retention has trimmed fails the
// read or, with [WithSkipOnDataLoss], continues from the oldest retained record (a closed
// shard past retention is ended under the same rule, as the KCL does). A deleted stream or
// a deregistered enhanced fan-out consumer fails the read, saying which.
//
// # Errors
//
// The errors a read or a write fails with name the stream, shard or table and the fix, and
// match their kind with errors.Is: [ErrStreamNotFound], [ErrNoCredentials],
// [ErrAccessDenied], [ErrConsumerLimit], [ErrLeaseHeld], [ErrDataLoss] and [ErrNeverReached];
// the AWS SDK's error stays in the chain for errors.As. A runner that runs the pipeline out
// of the launching process (Prism, Flink, Dataflow) returns a failed job's error as text, so
// match the kinds where kinesisio's calls run in your process (a DoFn's tests, a check before
// the launch) and print the text of a job's failure: its last DoFn error is the cause.
//
// # Starting positions
//
// [WithStartingPosition] says where a shard starts when nothing else gives its position:
//
//   - [Latest], the default (as in the Spark connectors): after the newest record when the
//     read begins; a self-checkpoint before the first record arrives skips nothing.
//   - [TrimHorizon] ("earliest" in [ParseStartingPosition]): the oldest record each shard
//     retains.
//   - [AtTimestamp]: the first record that arrived at or after a time (millisecond
//     precision); a time older than retention reads from the trim horizon.
//   - [ShardPositions]: each listed shard at its own position ([AtSequenceNumber],
//     [AfterSequenceNumber]); shards not listed start at their trim horizon.
//
// Shards created while the read runs are read from their beginning. A checkpoint table's
// positions come first: the starting position applies only to shards the table has no
// position for. [ReadBounded] with the default [Latest] reads nothing; pass [TrimHorizon] or
// [AtTimestamp] for a backfill. [ParseStartingPosition] reads the Spark connectors' forms
// ("latest", "trim_horizon", "earliest", "AT_TIMESTAMP <RFC 3339 time>", or their JSON map
// of shard positions), with which a job without a table resumes where another stopped.
//
// # Enhanced fan-out
//
// [WithEnhancedFanOut] reads every shard with SubscribeToShard as a named stream consumer,
// instead of polling GetRecords: the consumer has its own 2 MiB/s per shard, outside the
// polling budget, and records are pushed as they arrive. The readers register the consumer
// if the stream has none of that name, reuse it if it has, and never deregister it;
// [WithEnhancedFanOutConsumerARN] names a consumer registered beforehand. Positions,
// deaggregation, watermarks, the checkpoint table and metrics are those of polling; the
// polling options are refused.
//
// # Checkpoint table
//
// [WithCheckpointTable] keeps each shard's position in a DynamoDB table laid out as a KCL
// 2.x/3.x lease table, so that a new job, or a KCL application, continues where the last
// one stopped. Without a table, positions live only in the runner's state (its checkpoints
// and savepoints, a Dataflow update). The table's region and credentials are the Kinesis
// client's; [WithCheckpointTableEndpoint] points it at a local DynamoDB. Use one table per
// stream. A missing table is created as KCL 3 expects; each shard has one item, keyed by
// its shard id (the item's attributes are listed in kinesisio/DESIGN.md). What holds:
//
//   - A position is written only after the runner committed the bundle that read it.
//   - A job started on the table resumes each shard after its committed position (inside a
//     KPL aggregate, by its sub-sequence number). A shard without an item starts at
//     [WithStartingPosition], the KCL's rule, and a shard at SHARD_END is not read again.
//     What the old job read after its last commit is read again: at-least-once across
//     jobs, and nothing is skipped.
//   - Per-key order across resharding, for [Read]: a child shard is read only once each of
//     its parents' items says SHARD_END. A parent without an item does not block.
//     [ReadBounded] does not wait for parents.
//   - Positions never move back: every write is conditional on the lease counter and owner
//     last seen, and replaces a position only with a later one.
//   - A write the table refuses (validation, a deleted table, denied access) fails the
//     commit step's bundle, naming the table and the shards. While the table is unreachable
//     the read goes on and its positions are written when DynamoDB answers.
//   - There are never two writers. A job holds each shard's lease, renewed every third of
//     [WithCheckpointLeaseDuration] (10s, the KCL's failoverTimeMillis); a job that finds
//     another owner's lease waits one lease duration, as the KCL does, and fails with
//     [ErrLeaseHeld] if the owner is alive. [WithCheckpointTakeover] takes the leases at once
//     (a redeployment), and the old job stops at its next write.
//
// The job needs dynamodb:DescribeTable, GetItem, PutItem and UpdateItem on the table (and
// CreateTable to create it); it makes about one conditional UpdateItem per shard per
// commit-step bundle or lease renewal. To share a table with a KCL application, name the
// table after the application and set [WithCheckpointLeaseDuration] to its
// failoverTimeMillis.
//
// # Committing after the sinks
//
// A pipeline that keeps records in runner state before its sinks (a window, a GroupByKey, a
// combine) loses that state when its job dies without a savepoint or drain, and a new job on
// the table would start after the records its open windows held. Such pipelines give the
// read [WithCommitAfterSinks] and pass their sinks' outputs to [Commit.After]:
//
//	var commit kinesisio.Commit
//	recs := kinesisio.Read(s, "orders", kinesisio.WithCheckpointTable("orders-positions"),
//		kinesisio.WithCommitAfterSinks(&commit))
//	files := filesink.Write(s, lines(beam.WindowInto(s, window.NewFixedWindows(time.Minute), recs)), cfg)
//	commit.After(s, files) // a position is written once its window's file is
//
// A position is then written once every sink output's watermark has passed the end of the
// last window holding the records before it, so a restart resumes a shard at the first
// record of a window not yet written. A commit lags the read by up to one window plus the
// allowed lateness. A shard read to its end gets the KCL's pendingCheckpoint = SHARD_END
// first, so that its children are read meanwhile. Merging windows (sessions) are refused.
//
// # Queues
//
// [ReadQueue] reads a Kinesis queue (a queue on an on-demand stream) by its ARN into
// [QueueRecord]s. A queue has no shards: the read has [WithQueueSlots] slots (4) that the
// runner spreads over its workers, and each worker keeps [WithQueueReceivers] (4)
// long-polling receives going for each slot it runs at once. A record is acknowledged
// once the runner committed the bundle that emitted it, or, with [WithCommitAfterSinks]
// and [Commit.After] as above, once the sinks' output watermark passed the end of its
// window: never before. Until then the
// worker that received it extends its visibility ahead of the deadline
// ([WithQueueVisibility], 1 minute), for up to [WithQueueProcessingTimeout] (10 minutes;
// make it longer than a held window plus its allowed lateness). A job that dies stops
// extending, and its records come back after their visibility timeout.
//
// Delivery is at least once and unordered: a record comes back after a dead worker, a
// failed acknowledgement, a stale handle (counted in stale_handles, logged once, not fatal)
// or, rarely, after its acknowledgement; every delivery has the same RecordId. With
// [WithQueueDeduplication] a stateful step keyed by RecordId (and SubIndex) passes each
// record once within the given span, in one job; without it the pipeline sees every
// delivery. KPL aggregates a queue delivers whole are split into their user records
// (SubIndex) unless [WithoutDeaggregation], and acknowledged together.
//
// Event time is the receive time ([QueueRecord].ReceiveTimestamp), and the watermark
// follows the wall clock. A record that comes back after a worker died arrived a visibility
// timeout or more ago: by its arrival time it would be late, dropped by its window and
// acknowledged all the same (lost); by its receive time it lands in an open window. The
// cost: windows hold records by when the job got them. A pipeline that needs arrival or
// producer time re-stamps records itself, with an allowed lateness of at least the
// processing timeout.
//
// [ReadQueueDeadLetters] reads the dead-letter side (records received MaxReceiveCount times
// without an acknowledgement) the same way, and discards each record once acknowledged, or
// restores it to the queue with [WithRestoreDeadLetters]: route poison records to a sink
// before retention takes them. The queue reads report in namespace "kinesisio.ReadQueue":
// records, bytes, receive_calls, empty_receives, throttles, retries, extensions, released
// (held past the processing timeout), in_flight (gauge) from the read; acks, restores,
// failed_acks, stale_handles and the distribution ack_lag_ms (receive to acknowledgement)
// from the acknowledge step; duplicates from the deduplication.
//
// # Writing
//
// [Write] routes each [Message] by the MD5 of its partition key, or by its explicit hash
// key, to its shard, packs the records bound for one shard into KPL aggregates
// ([WithAggregation], the default; [WithoutAggregation] sends one Kinesis record per
// message), and sends them in PutRecords requests, up to [WithMaxConnections] (24) at once,
// within every shard's 1000 records/s and 1 MiB/s per worker ([WithRateLimit]). A message
// waits at most [WithRecordMaxBufferedTime] (100ms) to be sent, and every bundle is flushed
// at its end. Entries the service fails are retried ([WithRetries]); what still fails goes
// to the failed output as a [FailedMessage], a dead letter the write never sends again, or
// fails the bundle with [WithFailOnError]. Messages the service would refuse go to the
// failed output at once with [ErrorCodeInvalidMessage]. [Write] has the details (record
// sizes up to 10 MiB, streams that distribute records themselves). [MessagesFromBytes] and
// [MessagesFromStrings] key messages with a registered function; [MessagesWithRandomKeys]
// spreads them evenly over the shards.
//
// # Delivery guarantees
//
// Guaranteed:
//
//   - Exactly-once read within a job: every user record in the read's range enters the
//     pipeline once, across self-checkpoints, retried bundles, splits and merges, on a
//     runner that commits a bundle's outputs and residuals together (Prism, Dataflow, Flink
//     with its checkpointing on).
//   - At-least-once across jobs, with a checkpoint table (above).
//   - At-least-once write: a [Write] bundle finishes only when every message is
//     acknowledged by Kinesis or emitted as a [FailedMessage] (or the bundle fails).
//   - A read with an end reads every record that arrived before it, and under the
//     arrival-time policy no record arrives behind the watermark.
//
// Not guaranteed:
//
//   - Exactly-once across jobs. Without a table a new job starts at its starting position;
//     with one, what a job read after its last commit is read again.
//   - Exactly-once writes: Kinesis has no idempotent producer, so a retried bundle or a lost
//     response can store a message twice (transforms/dedup's PerKey removes such copies).
//   - Order. Within a shard records are emitted in sequence order, but Beam keeps no order
//     downstream, and across shards there is none. Without a table, a child shard may be
//     read while its parent is still draining.
//   - Producer time. Event time is the arrival time; a [WithCustomWatermarkPolicy] that
//     takes it from the payload can make records late.
//   - Data beyond retention: records trimmed before they are read are gone.
//   - Write throughput: [WithRateLimit] holds per worker, not per stream.
//
// # Metrics
//
// The read reports in namespace "kinesisio" (counters unless marked): records and bytes
// (user records emitted, their data bytes), getrecords_calls, the distribution
// records_per_getrecords, throttles, retries, expired_iterators, iterators_reused,
// unavailable (calls that gave up and resume later), the gauges millis_behind_latest and
// backlog_bytes (a shard's estimated unread bytes), aggregates_passed_through,
// aggregates_outside_shard, aggregates_outside_shard_kept, checkpoints_inside_aggregates,
// data_loss_skips, shards_discovered, subscribe_calls, resubscribes,
// subscriptions_reused, and the read-ahead's readahead_pages (pages fetched while no call
// held their shard), readahead_dropped_pages, readahead_dropped_bytes and
// readahead_dropped_calls (fetched for a position no call resumed at), readahead_expired
// (entries no call took for 2 minutes) and the gauge readahead_held_bytes. With a checkpoint table, in the same namespace: checkpoint_commits,
// checkpoint_dynamodb_calls, checkpoint_shard_ends, checkpoint_leases_lost,
// checkpoint_lease_renewals, checkpoint_table_unavailable (commits held while the table was
// unreachable), checkpoint_committed_records_<shard id>, and the distributions
// checkpoint_commit_latency_ms and checkpoint_commit_lag_ms (end of the reader call to the
// written item). [Write] reports in namespace "kinesisio.Write": user_records,
// kinesis_records, bytes, putrecords_calls, throttled_entries, retries, failed_messages,
// invalid_messages, wrong_shard_aggregates, rerouted_messages, service_distributed_messages,
// distribution_switches, and the distribution aggregate_bytes. The queue reads' metrics are
// listed under Queues.
//
// # Runners
//
// Every DoFn and type is registered, and the pipelines run on Prism, Flink and Dataflow.
// [Record], [Message] and [FailedMessage] keep Beam's schema (row) coder, so they can cross
// to other SDKs and through Java runners' coders; a nil Data crosses as an empty one.
//
// Flink runs the pipelines through Beam's Flink job server (pipelines/flinkrunner sends the
// options a streaming read needs). Beam's Flink runner before 2.76 keeps every residual a
// splittable DoFn returns (Beam issue #27648), so a long read's checkpoints and heap grow:
// use a 2.76 or later job server. A table written by
// [Read] on Flink can be ahead of Flink's last completed checkpoint: a job restored from its
// own checkpoint or savepoint is not affected, but a new job started from the table after a
// crash can skip what the crashed job read after it. Move a job with a savepoint, or read
// with [WithCommitAfterSinks].
//
// Dataflow scales a streaming job on the readers' backlog, a drain ends the reads
// (TruncateRestriction), and an update keeps their state.
//
// # Spark connector options
//
// The options of the seeds' Spark connectors, qubole's kinesis-sql and awslabs'
// spark-sql-kinesis-connector (which prefixes each with "kinesis."), map to these (seed
// default, then ours; "exec." is kinesis.executor., "client." is kinesis.client.):
//
//	streamName                           the stream argument of Read, ReadBounded, Write
//	endpointUrl (us-east-1's)            WithEndpoint (the region's)
//	kinesis.region (awslabs)             WithRegion (the AWS SDK's resolution)
//	awsAccessKeyId, awsSecretKey         WithStaticCredentials (+ WithSessionToken)
//	awsSTSRoleARN, awsSTSSessionName     WithAssumeRole (STS with the base credentials)
//	awsUseInstanceProfile (true)         the default chain; no switch turns it off
//	startingPosition (LATEST)            WithStartingPosition (Latest); ParseStartingPosition
//	failondataloss (true)                failing by default; false is WithSkipOnDataLoss
//	exec.maxFetchTimeInMs (1000)         WithMaxFetchTime (1s)
//	exec.maxFetchRecordsPerShard (1e5)   WithMaxRecordsPerFetch (100000)
//	exec.maxRecordPerRead (10000)        WithMaxRecordsPerRead (10000; 1 to 10000)
//	exec.addIdleTimeBetweenReads,        WithIdleTimeBetweenReads (0, off), one option
//	  ...idleTimeBetweenReadsInMs (1000)
//	(none)                               WithPollInterval (250ms)
//	client.describeShardInterval (1s)    WithDescribeShardInterval (1s)
//	client.numRetries (3), retryInterval WithRetries (3, 1s, 10s), reads and writes
//	  Ms (1000), maxRetryIntervalMs (1e4)
//	client.avoidEmptyBatches (false)     not applicable: Beam runs no micro-batches
//	sink exec.recordMaxBufferedTime      WithRecordMaxBufferedTime (100ms, the KPL's; 1000)
//	sink exec.maxConnections (1)         WithMaxConnections (24, the KPL's; 1 to 256)
//	sink exec.aggregationEnabled (true)  WithAggregation (the default), WithoutAggregation
//	sink kniesis.exec.flushwaittimemillis WithFlushWaitTime (no bound; the seed's 100 was its
//	                                       flush loop's interval, ours bounds a bundle's end)
//	consumerType (awslabs: GetRecords)   WithEnhancedFanOut, WithEnhancedFanOutConsumerARN
//	consumerName (awslabs)               the consumer name of WithEnhancedFanOut
//	metadataCommitterType = DYNAMODB,    WithCheckpointTable (+ WithCheckpointTableEndpoint)
//	  dynamodb.tableName (awslabs)
//
// The pipelines' flags for these options are listed in pipelines/README.md.
package kinesisio
