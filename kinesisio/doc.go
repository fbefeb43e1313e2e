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
// [WithAssumeRole].
//
// The stream argument is a stream name or a stream ARN
// (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME, for example a stream in another account),
// which is sent as the API's StreamARN. The client's region is then the ARN's (a different
// [WithRegion] is refused), and records still carry the stream's name.
//
// # Reading
//
// [Read] is the streaming read. It lists the stream's shards when it starts and every
// [WithDescribeShardInterval] (1s) after, and hands each shard, behind a Reshuffle, to a
// splittable DoFn whose restriction is a range of (sequence number, sub-sequence number)
// positions. Shards created by SplitShard, MergeShards or UpdateShardCount are read as they
// appear, and each shard is read exactly once. [ReadBounded] reads every shard within
// retention, closed parents and their children alike, up to the records that arrived
// before the read started, and stops. It is the batch and backfill mode.
//
// A shard reader checkpoints after [WithMaxRecordsPerFetch] user records (100000) or
// [WithMaxFetchTime] (1s). Its checkpoint is the position of the last user record it
// emitted, so a read that resumes inside a KPL aggregate skips the user records it has
// already emitted. Aggregates are split into their user records (by default;
// [WithoutDeaggregation] keeps them whole). As the KCL does, a record that carries the KPL
// magic but fails its checksum or does not parse is passed through whole, and an aggregate
// that holds user records outside its shard's hash range is dropped; both are logged and
// counted.
//
// Event time is the record's ApproximateArrivalTimestamp (millisecond precision) unless
// [WithProcessingTimeWatermarkPolicy] or [WithCustomWatermarkPolicy] says otherwise. A
// shard's watermark is the latest arrival time it has read, and the read's watermark is the
// minimum over its shards. A caught-up shard that gets no records for [WithIdleThreshold]
// (5s) advances its watermark to the poll time minus that threshold, so one idle shard does
// not hold every window back. A shard found while the read runs starts at the time of the
// poll before it appeared, so its records are not late, and the watermark never advances
// while reads fail. So a fixed window fires once every shard has read past its end, and
// under the arrival-time policy no record arrives behind the watermark.
//
// A read with an end reads every record that arrived before that end. [ReadBounded] ends at
// its start, or [WithMaxReadTime] after it. [Read] with [WithMaxReadTime] ends that long
// after its first shard listing on a worker, which it logs ("reading stream S: the records
// that arrived from ... to ..."); a record that arrived later is not read. Kinesis makes a
// stored record readable only after a short delay, so a shard ends only on a caught-up read
// sent [WithPropagationDelay] (1s) after the end, and each shard of such a read runs that
// much longer. [WithMaxRecords] stops each shard after n user records.
//
// Polling keeps to the read budget of a shard: 5 GetRecords calls a second, shared by every
// consumer of the stream. A caught-up shard waits [WithPollInterval] (250ms) after an empty
// answer, and reads at the tip are at least 250ms apart, which leaves at least one read a
// second to other consumers. A shard that is behind (MillisBehindLatest > 0) is read back to
// back, fetching the next page while the last is emitted, until it has caught up; there the
// service's limits (5 reads/s, 2 MiB/s) pace it, and throttled calls back off. An answer
// larger than 2 MiB (large records, up to 10 MiB) makes the service refuse the shard's reads
// until its 2 MiB/s has paid for it, 5 seconds after a 10 MiB answer: the reader waits that
// long before it reads the shard again, instead of meeting the refusals.
// [WithIdleTimeBetweenReads] or a longer poll interval leaves more to other consumers.
//
// The connector paces its API calls by its own clock, since a runner may resume a
// splittable DoFn at once whatever delay it asked for (Flink does while it drains a job).
// Discovery calls ListShards at most once per [WithDescribeShardInterval]; a caught-up shard
// calls GetRecords at most once per poll interval after an empty answer (after throttling,
// once per maximum retry interval); SubscribeToShard is called at most once a second per
// shard. An early call waits up to 200ms, or asks to be resumed later without calling the
// service. A call that ends at a checkpoint leaves its shard iterator in a cache of the
// worker; the next call takes it only if its restriction starts at that exact position on
// the same worker and the iterator is under 4 minutes old. Otherwise, as after a retried
// bundle, it opens an iterator from its restriction.
//
// The backlog of a shard is its estimated unread bytes. It is the size of a residual
// restriction (what Dataflow scales streaming jobs on), the tracker's remaining work and the
// backlog_bytes gauge:
//
//	backlog = MillisBehindLatest × (Σ bytes − first record's bytes) / (last arrival − first arrival)
//
// over the responses read in the last 30s of arrival time (at most 32), and 0 when the shard
// is caught up. With a steady producer that is the bytes that arrived in the last
// MillisBehindLatest milliseconds. A residual whose start this worker has not read to (a new
// shard, a resume elsewhere) reports a nominal 1; with [WithMaxRecords] the size is the
// records left. Enhanced fan-out uses the same formula over the events read, plus the bytes
// left in an event a call stopped inside. An event's MillisBehindLatest is measured when the
// service sends it, and the service pushes events as records arrive (up to the client's
// HTTP/2 window), so a reader that falls behind reads events that said 0. For an event sent
// caught up whose last record is more than 500ms old on the worker's clock, that age stands
// for MillisBehindLatest. A reader less than 500ms behind therefore reports no backlog, and
// after a producer stops while the reader is behind by events already sent, the estimate
// runs high (by the pause times the byte rate) until the reader has read them.
//
// Throttling, 5xx and dropped connections are retried with exponential backoff and full
// jitter ([WithRetries]: 3 retries, from 1s to 10s); an expired iterator is renewed from the
// last claimed position. When the retries run out, a [Read] does not fail: it logs a warning,
// counts unavailable and resumes from its last claimed position one maximum retry interval
// later; discovery lists the shards again one [WithDescribeShardInterval] after a failed
// listing. A
// [ReadBounded] fails. A starting or resume position that retention has already trimmed fails
// the read (the default) or, with [WithSkipOnDataLoss], continues from the oldest retained
// record, counted in data_loss_skips. A closed shard past retention no longer exists for the
// service (ResourceNotFoundException): a reader resumed on it ends it, as the KCL does, and goes on with its children,
// quietly when its checkpoint proves it had read everything (it had caught up within the
// last 24 hours), and otherwise under the same data-loss rule. A deleted stream or a
// deregistered enhanced fan-out consumer fails the read with an error that says which.
//
// # Starting positions
//
// [WithStartingPosition] says where a shard starts when nothing else gives its position:
//
//   - [Latest], the default (as in the Spark connectors): after the newest record when the
//     read begins. The read fixes that moment when it starts and reads AT_TIMESTAMP from it,
//     so a checkpoint taken before the first record arrives skips nothing.
//   - [TrimHorizon] ("earliest" in ParseStartingPosition): the oldest record each shard retains.
//   - [AtTimestamp]: the first record that arrived at or after a time (millisecond
//     precision); a time older than retention reads from the trim horizon.
//   - [ShardPositions]: each listed shard at its own position ([AtSequenceNumber],
//     [AfterSequenceNumber]); shards not listed start at their trim horizon.
//
// Shards created while the read runs are read from their beginning. A checkpoint table's
// positions come first: the starting position applies only to shards the table holds no
// position for. [ReadBounded] with the default [Latest] reads nothing; pass [TrimHorizon] or
// [AtTimestamp] for a backfill. [ParseStartingPosition] reads the Spark connectors' forms:
// "latest", "trim_horizon", "earliest", "AT_TIMESTAMP <RFC 3339 time>", or the JSON map of
// shard positions they keep in their offsets. A job without a table resumes where another
// stopped with [AtTimestamp] or such a map.
//
// # Enhanced fan-out
//
// [WithEnhancedFanOut] reads every shard with SubscribeToShard as a named stream consumer,
// instead of polling GetRecords. The consumer has its own 2 MiB/s per shard, outside the
// polling read budget, and records are pushed as they arrive. The readers register the
// consumer if the stream has none of that name, reuse it if it has, and wait until it is
// ACTIVE; a consumer of that name that is being deregistered is waited on until it is gone,
// then registered again. They never deregister it. [WithEnhancedFanOutConsumerARN] names a
// consumer registered beforehand and registers nothing.
//
// Restrictions, checkpoints, deaggregation, watermarks, the checkpoint table and metrics are
// those of polling; [WithMaxRecordsPerRead] and [WithIdleTimeBetweenReads] do not apply and
// are refused, and so is [WithPollInterval] but for Read's parent check with a checkpoint
// table. A subscription stays open from one ProcessElement
// call to the next on the same worker. One that ends before its shard does (the service ends
// each after 5 minutes; a connection may drop) is renewed from its continuation sequence
// number, at most once a second per shard; the service refuses a second subscription of a
// shard by one consumer within 5 seconds, and the reader waits that out. A shard ends on an
// event that lists its children and has no continuation. A caught-up reader returns to the
// runner when no event is waiting and is resumed shortly after, so that it does not hold up
// other shards a runner put in the same bundle.
//
// # Checkpoint table
//
// [WithCheckpointTable] keeps each shard's position in a DynamoDB table laid out as a KCL
// 2.x/3.x lease table, so that a new job, or a KCL application, continues where the last one
// stopped. Without a table, positions live only in the runner's state (its checkpoints and
// savepoints, a Dataflow update). The table's region and credentials are the Kinesis
// client's; [WithCheckpointTableEndpoint] points it at a local DynamoDB. Use one table per
// stream. A missing table is created on demand, with hash key leaseKey and the
// LeaseOwnerToLeaseKeyIndex index KCL 3 expects. Each shard has one item: leaseKey (the shard
// id), checkpoint (a sequence number, TRIM_HORIZON, AT_TIMESTAMP or SHARD_END),
// checkpointSubSequenceNumber, leaseCounter, leaseOwner, ownerSwitchesSinceCheckpoint,
// parentShardId, childShardIds (written with SHARD_END), startingHashKey and endingHashKey.
//
// What holds with a table:
//
//   - A position is written only after the runner committed the bundle that read it. Each
//     reader call emits the position it reached (its last user record, or SHARD_END) as a
//     commit token on a second output; the tokens cross a Reshuffle, a fusion break, to a
//     commit step, and a runner hands an element to the next stage only once it has
//     committed the bundle that emitted it. The commit step writes each shard's furthest
//     position of a bundle with one conditional UpdateItem. (The table does not rely on
//     bundle finalization: Beam Go v2.77.0 finalizes only the first bundle of each
//     execution plan.)
//   - A job started on the table resumes each shard after its committed checkpoint (inside a
//     KPL aggregate, by its sub-sequence number). A shard without an item starts at
//     [WithStartingPosition], the KCL's rule, and a shard at SHARD_END is not read again.
//     What the old job read after its last commit is read again: at-least-once across jobs,
//     and nothing is skipped. A checkpoint older than retention follows [WithSkipOnDataLoss].
//     Within a job, reads stay exactly once where the runner gives that; across jobs a sink
//     sees the records read again, so only a sink that rewrites what it wrote, the same way,
//     is exactly once across jobs (the staged files of pipelines/kinesis-to-files are).
//   - Per-key order across resharding, for [Read]: a child shard is read only once each of
//     its parents' items says SHARD_END, which is written only after the runner committed
//     the parent's last records. A parent without an item (expired, never leased) does not
//     block. [ReadBounded] does not wait for parents, since a runner may run a parent and
//     its child in one bundle.
//   - Positions never move back. Every write is conditional on the lease counter and owner
//     last seen, and a checkpoint is replaced only by a later one, so an old bundle's late
//     token cannot move a position back.
//   - A write that fails is not dropped. The DynamoDB client tries each write 8 times,
//     which rides out throttling and 5xx. A write the table refuses (validation, a deleted
//     table or item, denied access) fails the commit step's bundle, naming the table and
//     the shards.
//
// While the table is unreachable (no connection, timeouts, or 5xx and throttling past those
// retries), the read goes on. The commit step holds each shard's furthest unwritten position
// in the worker (a later one replaces it, never an earlier one, so a SHARD_END is never
// dropped) and writes it once DynamoDB answers, retrying from 1s and doubling up to 30s. It
// logs one warning per shard when its commits start failing ("checkpoint table T
// unreachable; holding shard S's position P ..."), counts checkpoint_table_unavailable, and
// logs once per shard when the held position is written ("checkpoint table T reachable
// again after D: wrote shard S's held position P"). Lease renewals warn once per outage and
// retry: an unreachable table is not a lost lease. The first renewal or commit the table
// takes ends the outage. What needs the table waits: new shards from a split or a merge are
// not leased, so not read, until it answers (one warning "... new shard(s) ... wait for their
// leases", and a line when they are leased), and children wait for their parents' SHARD_END;
// the shards already leased are read on. A held position lives in the worker only, so a job that
// dies during the outage leaves the table behind its read, and the next job reads those
// records again. A bounded read does not end with positions unwritten: its commit step waits
// up to 2 minutes for them, then fails naming the table and the shards ("unreachable for more
// than 2m0s at the end of a bounded read ... the next read on the table reads their records
// again"). A [Read] that ends
// with [WithMaxReadTime] does not wait; its last positions land if the worker lives on until
// the table answers.
//
// A job holds the lease of each shard it reads and renews it (leaseCounter + 1) every third
// of [WithCheckpointLeaseDuration] (10s, the KCL's failoverTimeMillis), unless a commit just
// did. A lease whose counter moves has a live owner, and one whose counter stood still for a
// lease duration a dead one: the KCL's rule, so KCL workers and beamkinesis jobs see each
// other the same way. A job that finds another owner's lease watches its counter for one
// lease duration. If it moved, the job refuses to read beside that owner and reads nothing:
// it fails with "checkpoint table T: shard S of stream X is leased by owner "O", which is
// alive (its lease counter went from a to b within 10s); this job (owner "P") refuses to read
// alongside it ...". If it stood still, the job takes the lease over with a write
// conditional on that counter and logs "took over the expired lease of ... from owner "O"".
// A job started right after another stopped (or was killed) therefore waits one lease
// duration. With [WithCheckpointTakeover] a job takes the leases at once (a
// redeployment) and logs "took over the lease of ... from owner "O""; the old job learns it at
// its next commit or renewal, when its conditional write fails, logs it, and stops reading
// those shards and writing their positions. What it read in between is read by both jobs. Either way
// there are never two writers.
//
// Cost: one conditional UpdateItem per shard per commit-step bundle, one per shard per third
// of the lease duration for a shard with nothing new to commit, and a GetItem per shard at
// the start (one more when a lease changed under a write). The job needs, on the table
// (arn:aws:dynamodb:REGION:ACCOUNT:table/TABLE), besides its Kinesis permissions:
//
//	{
//	  "Effect": "Allow",
//	  "Action": ["dynamodb:DescribeTable", "dynamodb:CreateTable", "dynamodb:GetItem",
//	             "dynamodb:PutItem", "dynamodb:UpdateItem"],
//	  "Resource": "arn:aws:dynamodb:eu-west-1:123456789012:table/orders-positions"
//	}
//
// CreateTable only if the job creates the table; PutItem writes a shard's first item and
// UpdateItem the commits, renewals and take-overs.
//
// To share a table with a KCL application, give the read the application's name as the
// table name and set [WithCheckpointLeaseDuration] to its failoverTimeMillis. The KCL needs
// permissions of its own (it also scans the table and queries the index), and KCL 3 keeps
// two more tables, APP-CoordinatorState and APP-WorkerMetricStats. When KCL 3 creates the
// table itself it adds the index with a later UpdateTable, which dynalite rejects; a table
// created by beamkinesis has the index from the start.
//
// # Committing after the sinks
//
// With a table, [Read] and [ReadBounded] write a position once the runner committed the
// bundle that read it. That is enough for a pipeline that writes what it reads without
// state, but not for one that keeps records in runner state before its sinks (a window, a
// GroupByKey, a combine): a job that dies without a savepoint or drain loses that state, and
// a new job on the table would start after the records its open windows held. Such
// pipelines give the read [WithCommitAfterSinks] and pass their sinks' outputs to
// [Commit.After]:
//
//	var commit kinesisio.Commit
//	recs := kinesisio.Read(s, "orders", kinesisio.WithCheckpointTable("orders-positions"),
//		kinesisio.WithCommitAfterSinks(&commit))
//	files := filesink.Write(s, lines(beam.WindowInto(s, window.NewFixedWindows(time.Minute), recs)), cfg)
//	commit.After(s, files) // a position is written once its window's file is
//
// After holds each reader call's commit token in a stateful step keyed by shard until the
// watermark of every sink output it was given passes the end of the last window holding the
// token's records (plus the allowed lateness; in the global window, just past the records),
// then writes the furthest position that is due. The sinks' outputs add no element, only
// their watermark (the tokens are flattened with an element-free signal of the sinks, so the
// step's input watermark is the earlier of both), and a window's output watermark passes its end only once the window
// fired and the sink's bundle that wrote it was committed. Readers end a token at the last
// record of each window, so a restart resumes a shard at the first record of a window not
// yet written. A shard read to SHARD_END first gets pendingCheckpoint = SHARD_END (the KCL's
// prepared checkpoint), so that its children are read while its last windows are open; the
// KCL and a new job resume from checkpoint, never from pendingCheckpoint.
//
// Nothing pins a shard for good: windows fire when the watermark passes their end, empty or
// not, an idle shard's watermark advances after [WithIdleThreshold], and at the end of a read
// (or a drain) the watermark goes to the end of time and every held position is written.
// Only a stalled watermark (an unreadable shard, a sink that keeps failing) holds the table,
// as it must. Positions are written once per window rather than once per commit bundle,
// and on a live stream a commit lags the read by the rest of its window plus the
// watermark's delay, up to one window (plus allowed lateness): the price of never being
// ahead of the sinks. Merging windows (sessions) are refused at construction.
//
// # Writing
//
// [Write] routes each [Message] by the MD5 of its partition key, or by its explicit hash
// key, to the shard whose hash key range holds it, using the stream's shard map (listed
// again every [WithShardMapRefreshInterval], and when a write shows a resharding). With
// aggregation ([WithAggregation], the default, as in the KPL) the records bound for one shard
// are packed into KPL aggregates of up to [WithMaxAggregateBytes] (51200 bytes), sent with an
// explicit hash key inside that shard's range; [WithoutAggregation] sends one Kinesis record
// per message, for consumers that cannot deaggregate. Records go out in PutRecords requests
// within the service's limits, up to [WithMaxConnections] (24) at once, and each worker keeps
// within every shard's 1000 records/s and 1 MiB/s ([WithRateLimit]). A message waits at most
// [WithRecordMaxBufferedTime] (100ms) for its aggregate or request to fill, every bundle is
// flushed at its end, and a worker holds at most [WithMaxBufferedBytes] (32 MiB) of
// unacknowledged messages.
//
// Entries the service fails are retried with backoff ([WithRetries]); what still fails goes
// to the failed output as a [FailedMessage] with its reason, error code and attempts, or
// fails the bundle with [WithFailOnError]. The failed output is a dead letter: the write
// never sends those messages again, so give the write a retry budget that covers the
// outages it should ride out, or fail the bundle instead (a Flink job then restarts from
// its checkpoint and writes them again). Messages the service would refuse (an empty or
// too long partition key, a bad explicit hash key, a record over the stream's record size
// limit) are never sent: they go to the failed output at once with
// [ErrorCodeInvalidMessage], except that with [WithFailOnError] a message over the size
// limit fails the bundle, since raising the limit can fix it. The limit (1 MiB unless
// raised, up to 10 MiB) is read from the stream when a writer starts; large records go out
// as plain records, never in aggregates, and still count against their shard's 1 MiB/s, so a
// 9 MiB record holds its shard back for about 9 seconds. See [Write].
//
// [MessagesFromBytes] and [MessagesFromStrings] key messages with a registered function;
// [MessagesWithRandomKeys] spreads them evenly over the shards.
//
// On an on-demand stream that distributes records itself (RecordDistributionStrategy AUTO),
// the service picks each record's shard and ignores keys: Write reads the strategy when a
// writer starts and never aggregates there (a KCL consumer would drop an aggregate's
// records on any shard but their own), does not route or pace by shard, and takes messages
// with an empty partition key. A switch of the strategy while the job runs is picked up
// with the next shard map or at once on evidence of it, without losing a message (see
// [Write]). The read gives records written without a key an empty PartitionKey and, on such
// a stream, keeps every user record of an aggregate whatever shard it landed on.
//
// # Delivery guarantees
//
// Guaranteed:
//
//   - Exactly-once read within a job. Every user record in the read's range enters the
//     pipeline once, across checkpoints, retried bundles, and shard splits and merges: a
//     shard's checkpoint is the position of the last record it emitted, a retried bundle's
//     outputs are discarded by the runner and the shard resumes from its committed position,
//     and discovery emits each shard once. This relies on the runner committing a bundle's
//     outputs and its checkpoint together, which Prism and Dataflow do, and Flink does with
//     checkpointing on.
//   - At-least-once across jobs, with a checkpoint table: see Checkpoint table above.
//   - At-least-once write. A [Write] bundle finishes only when every message is acknowledged
//     by Kinesis or emitted as a [FailedMessage] (or, with [WithFailOnError], the bundle
//     fails). No acknowledged message is lost and none vanishes silently.
//   - A read with an end reads every record that arrived before it (see Reading above).
//   - The watermark: under the arrival-time policy no record arrives behind it, and a window
//     fires once every shard has read past its end (see Reading above).
//
// Not guaranteed:
//
//   - Exactly-once across jobs. Without a table, positions are kept only in the runner's
//     state, and a new job starts at its starting position. A Dataflow update keeps the
//     running read's state; a drain ends it. With a table, what a job read after its last
//     commit is read again.
//   - Exactly-once writes to Kinesis. Kinesis has no idempotent producer: a retried bundle,
//     a lost PutRecords response or a resharding during a write can store a message twice,
//     each copy with its own sequence number. The transforms/dedup package's Records removes
//     re-reads of the same Kinesis record, not such producer duplicates; remove those on an
//     id in the payload (its PerKey).
//   - Order. Beam keeps no order between elements. Within a shard records are emitted in
//     sequence order, but downstream transforms may reorder them, and across shards there
//     is no order. After a split or merge a child shard may be read while its parent is
//     still draining, unless a checkpoint table is on.
//   - Producer time. Event time is the service's arrival time, not when the producer made
//     the record. [WithCustomWatermarkPolicy] can take a time from the payload, but then
//     records whose times are out of order can be late.
//   - Data beyond retention. Records trimmed before they are read are gone: the read fails
//     or skips them ([WithSkipOnDataLoss]).
//   - Write throughput per stream. [WithRateLimit] holds per worker; several workers
//     writing to one shard can still be throttled, and retries absorb that.
//
// # Metrics
//
// The read reports, in namespace "kinesisio" (counters unless marked):
//
//	records                     user records emitted
//	bytes                       their data bytes
//	getrecords_calls            GetRecords calls, retries included
//	records_per_getrecords      distribution: Kinesis records per GetRecords response or event
//	throttles                   throttled GetRecords and SubscribeToShard calls
//	retries                     retried Kinesis calls of the read
//	expired_iterators           shard iterators renewed after they expired
//	iterators_reused            calls that continued the iterator a previous call left
//	unavailable                 calls that gave up on Kinesis and resume later
//	millis_behind_latest        gauge: the last MillisBehindLatest
//	backlog_bytes               gauge: the estimated unread bytes of a shard
//	aggregates_passed_through   records that looked like KPL aggregates but were not valid
//	aggregates_outside_shard    aggregates dropped for user records outside the shard
//	aggregates_outside_shard_kept  such aggregates kept: the stream distributes records itself
//	checkpoints_inside_aggregates  checkpoints after a user record inside a KPL aggregate
//	data_loss_skips             trimmed positions skipped under WithSkipOnDataLoss
//	shards_discovered           shards discovery emitted
//	subscribe_calls             SubscribeToShard calls, refused ones included
//	resubscribes                subscriptions renewed before their shard ended
//	subscriptions_reused        calls that continued the subscription a previous call left
//
// With a checkpoint table, the commit step reports, in the same namespace:
//
//	checkpoint_commits                        positions written
//	checkpoint_dynamodb_calls                 DynamoDB calls
//	checkpoint_commit_latency_ms              distribution: time to write a position
//	checkpoint_commit_lag_ms                  distribution: end of the reader call to the written item
//	checkpoint_shard_ends                     SHARD_END positions written
//	checkpoint_leases_lost                    leases another owner took
//	checkpoint_lease_renewals                 lease renewals
//	checkpoint_table_unavailable              commits held while the table was unreachable
//	checkpoint_committed_records_<shard id>   user records the committed positions cover
//
// Commits per second are checkpoint_commits over the job's time. [Write] reports in
// namespace "kinesisio.Write":
//
//	user_records             messages acknowledged
//	kinesis_records          Kinesis records (aggregates or plain) acknowledged
//	bytes                    bytes of acknowledged Kinesis records (partition key + data)
//	putrecords_calls         PutRecords calls, retries included
//	throttled_entries        entries throttled (ProvisionedThroughputExceededException)
//	retries                  entry and request retries
//	failed_messages          messages given up on after sending
//	invalid_messages         messages never sent because the service would refuse them
//	wrong_shard_aggregates   aggregates that landed where some of their records do not belong
//	rerouted_messages        messages routed again after a resharding
//	service_distributed_messages  messages written unaggregated to an AUTO stream
//	distribution_switches    switches of the stream's distribution strategy adopted
//	aggregate_bytes          distribution: size of the aggregates sent
//
// # Runners
//
// Every DoFn and type is registered, so the pipelines run on Prism, Flink and Dataflow.
//
// Prism v2.77.0 takes a splittable DoFn stage's output watermark from the residuals of the
// last bundle it finished, not the minimum over all of them. So each shard reader reports
// the lowest watermark of the read's restrictions in its worker process (discovery's and
// the shards it just emitted included), and a caught-up shard does not carry the read's
// watermark past a shard still reading its backlog. On Flink and Dataflow, which take the
// minimum themselves, this changes nothing, except that a shard moved to another worker holds
// this worker's watermark back for up to a minute.
//
// Flink runs the pipelines through Beam's Flink job server; the pipelines/flinkrunner
// package sends the options a streaming read needs (checkpointing, finishing bundles before
// checkpoints). Portable Flink does not split splittable DoFn work on its own, so the readers
// checkpoint themselves after [WithMaxFetchTime] or [WithMaxRecordsPerFetch], and Flink
// truncates resume delays and watermark holds to whole seconds. Beam's Flink runner before
// 2.76 keeps every residual a splittable DoFn returns (Beam issue #27648), so the checkpoint
// and the TaskManagers' heap of a long streaming read grow for as long as it runs: use a
// 2.76 or later job server. Flink hands elements downstream at once and commits at its
// checkpoints, so a table written by [Read] can be ahead of Flink's last completed
// checkpoint. A job restored from its own checkpoint or savepoint is not affected, but a new
// job started from the table after a crash can skip what the crashed job read after that
// checkpoint: move a job with a savepoint, or read with [WithCommitAfterSinks], whose
// positions wait for the sinks. The parents-first order of a table holds on Flink too.
//
// Dataflow scales a streaming job on the readers' backlog (see Reading above), a drain ends
// the reads (TruncateRestriction), and an update keeps their state.
//
// Java runners (Flink, Dataflow) decode and re-encode values between stages with Beam
// Java's coders. The read's internal values (shard descriptors, restrictions) have coders
// of their own, which Beam sends length-prefixed under a Go-only URN, so a runner moves their
// bytes without looking inside. [Record], [Message] and [FailedMessage] keep Beam's schema
// (row) coder, with the schema Go infers from their fields, so they can cross to other SDKs.
// Go's row encoder writes a nil []byte as a null in a field the schema declares non-nullable,
// which Beam Java re-encodes without its null bit, so this package registers row encoders for
// Record and Message (and through it FailedMessage) that write a nil Data as an empty one,
// byte for byte the encoding of []byte{}. A Message with a nil Data may cross a GroupByKey on
// such a runner and comes out with an empty Data.
//
// # Spark connector options
//
// The Spark connectors of our seeds, qubole's kinesis-sql (source and sink) and awslabs'
// spark-sql-kinesis-connector (which prefixes every option with "kinesis.", as in
// kinesis.streamName), have these options; each maps to an option here (seed default, then
// ours):
//
//	streamName                                     the stream argument of Read, ReadBounded, Write
//	endpointUrl (us-east-1's)                      WithEndpoint (the region's)
//	kinesis.region (awslabs)                       WithRegion (the AWS SDK's resolution)
//	awsAccessKeyId, awsSecretKey                   WithStaticCredentials (+ WithSessionToken)
//	awsSTSRoleARN, awsSTSSessionName               WithAssumeRole (STS with the base credentials)
//	awsUseInstanceProfile (true)                   the default chain; no switch turns it off
//	startingPosition, startingposition (LATEST)    WithStartingPosition (Latest); ParseStartingPosition
//	failondataloss (true)                          failing by default; false is WithSkipOnDataLoss
//	kinesis.executor.maxFetchTimeInMs (1000)       WithMaxFetchTime (1s)
//	kinesis.executor.maxFetchRecordsPerShard       WithMaxRecordsPerFetch (100000)
//	  (100000)
//	kinesis.executor.maxRecordPerRead (10000)      WithMaxRecordsPerRead (10000; 1 to 10000)
//	kinesis.executor.addIdleTimeBetweenReads       WithIdleTimeBetweenReads (0, off), one option
//	  (false), ...idleTimeBetweenReadsInMs (1000)    for both
//	(none)                                         WithPollInterval (250ms)
//	kinesis.client.describeShardInterval (1s)      WithDescribeShardInterval (1s)
//	kinesis.client.numRetries (3),                 WithRetries (3, 1s, 10s), for reads and writes
//	  ...retryIntervalMs (1000),
//	  ...maxRetryIntervalMs (10000)
//	kinesis.client.avoidEmptyBatches (false)       not applicable
//	sink kinesis.executor.recordMaxBufferedTime    WithRecordMaxBufferedTime (100ms, the KPL's)
//	  (1000)
//	sink kinesis.executor.maxConnections (1)       WithMaxConnections (24, the KPL's; 1 to 256)
//	sink kinesis.executor.aggregationEnabled       WithAggregation (the default), WithoutAggregation
//	  (true)
//	sink kniesis.executor.flushwaittimemillis      WithFlushWaitTime (no bound)
//	  (100)
//	kinesis.consumerType (awslabs: GetRecords)     polling by default; SubscribeToShard is
//	                                                 WithEnhancedFanOut or WithEnhancedFanOutConsumerARN
//	kinesis.consumerName (awslabs)                 the consumer name of WithEnhancedFanOut
//	kinesis.metadataCommitterType = DYNAMODB,      WithCheckpointTable (+ WithCheckpointTableEndpoint)
//	  kinesis.dynamodb.tableName (awslabs)
//
// The seeds poll again after idleTimeBetweenReadsInMs or 1s; [WithPollInterval] is how long
// a caught-up shard waits after an empty answer, while a shard that is behind reads again at
// once. avoidEmptyBatches does not apply: Beam runs no micro-batches, so there is no empty
// batch to avoid, and a poll that finds nothing emits nothing. The seed's
// flushwaittimemillis (spelled kniesis.… in its source) was the polling interval of its
// flush loop; [Write] does not poll, since each acknowledgement wakes it, so
// [WithFlushWaitTime] bounds the end-of-bundle wait instead, failing the bundle (which the
// runner retries) when it runs out. The pipelines' flags for these options are listed in
// pipelines/README.md.
package kinesisio
