// Package kinesistest runs a Kinesis Data Streams compatible server inside a
// test process, so code under test uses the real aws-sdk-go-v2 client over
// real HTTP against a server the test controls.
//
// The server speaks the JSON 1.1 protocol as aws-sdk-go-v2 does (POST / with
// X-Amz-Target Kinesis_20131202.<Operation>), and CBOR (application/x-amz-
// cbor-1.1, the Java SDKs' default; cbor.go), over HTTP/1.1 and cleartext
// HTTP/2 on its plain port and, with WithTLS, over TLS with h2 or http/1.1
// (transport.go). WithCredentials turns on SigV4 checking (sigv4.go), and a
// minimal STS AssumeRole on the same ports issues temporary credentials
// (sts.go). It implements CreateStream,
// DeleteStream, DescribeStream, DescribeStreamSummary, ListStreams,
// ListShards (every ShardFilter type, NextToken paging), PutRecord,
// PutRecords (per-entry failures), GetShardIterator (all five types),
// GetRecords (MillisBehindLatest, ChildShards at the end of a closed shard),
// SplitShard, MergeShards, UpdateShardCount, IncreaseStreamRetentionPeriod,
// DecreaseStreamRetentionPeriod, UpdateMaxRecordSize,
// UpdateStreamRecordDistributionStrategy, UpdateStreamWarmThroughput,
// UpdateStreamMode, DescribeAccountSettings and UpdateAccountSettings,
// addressing streams by StreamName or StreamARN, and the twelve queue
// operations (below). Validation and errors follow the service: the same error types,
// HTTP statuses and, as far as known, messages.
//
// Service-managed record distribution: an ON_DEMAND stream created with, or
// switched to, RecordDistributionStrategy AUTO places records itself. Its
// puts may leave out the partition key, and any key or ExplicitHashKey sent
// is ignored for placement; records go to the open shards in turn, in hash
// key order, one counter per stream for every producer (distribution.go), so
// N records spread over k shards N/k rounded down or up each. PutRecord with
// SequenceNumberForOrdering fails with InvalidArgumentException there, and
// GetRecords and SubscribeToShard leave PartitionKey out of records written
// without one. A switch applies to the next record stored. AUTO on a
// PROVISIONED stream, at creation or by the update, is an
// InvalidArgumentException; DescribeStreamSummary reports the strategy of
// ON_DEMAND streams only (DescribeStream's model has no such member). Streams
// with the default, USER_PARTITION_KEY, need a key as before.
//
// On-demand Advantage (account.go): UpdateAccountSettings turns the account's
// MinimumThroughputBillingCommitment on for at least 24 hours of server clock
// (disabling it earlier leaves it ENABLED_UNTIL_EARLIEST_ALLOWED_END until
// then). While it is on, ON_DEMAND streams take UpdateStreamWarmThroughput and
// CreateStream's WarmThroughputMiBps (up to 10 GiB/s), report WarmThroughput in
// DescribeStreamSummary (the target at once, the current value once the
// stream's UPDATING period of WithTransitionDelay is over; 1 MiB/s per shard
// before any update), and take 50 registered consumers instead of 20.
//
// Enhanced fan-out: RegisterStreamConsumer, DescribeStreamConsumer,
// ListStreamConsumers (NextToken paging) and DeregisterStreamConsumer manage
// consumers (CREATING, then ACTIVE after WithConsumerActivationDelay; DELETING,
// then gone; at most 20 per stream, 50 on On-demand Advantage streams, and 5
// CREATING at once). SubscribeToShard
// answers errors found before streaming as ordinary JSON errors, then streams
// application/vnd.amazon.eventstream: an initial-response frame, then
// SubscribeToShardEvent frames. The first event goes out at once, events with
// records as soon as records are stored, and empty events (heartbeats, with an
// up-to-date ContinuationSequenceNumber) every WithSubscriptionHeartbeat of
// real time while nothing arrives. A closed shard ends with an event carrying
// ChildShards and no ContinuationSequenceNumber, then the body ends. A
// subscription lasts WithSubscriptionLifetime on the server clock (5 minutes)
// and then ends normally. Subscribing again to the same shard with the same
// consumer within 5 seconds (WithResubscribeWindow) of the last successful call
// fails with ResourceInUseException; later, the new subscription takes over and the old
// one ends with a ResourceInUseException exception frame. A subscription also
// ends with ResourceNotFoundException when its consumer is deregistered or its
// stream deleted, and normally when the server shuts down. In limits mode
// events are paced to 2 MiB/s per consumer per shard, in real time.
// Subscriptions lists the open subscriptions and WaitSubscriptions waits for
// them to change.
//
// Kinesis queues (queue.go): CreateQueue, UpdateQueue, DeleteQueue,
// DescribeQueue and ListQueues (StreamFilter, NextToken paging) manage queues
// on ON_DEMAND streams (CREATING, UPDATING and DELETING last
// WithQueueTransitionDelay; a queue takes one of the stream's registered-
// consumer slots; a stream with queues can be neither deleted nor switched to
// PROVISIONED). ReceiveQueueRecords long-polls (WaitTimeSeconds, ended early by
// records becoming visible, the server clock passing the wait, the client
// leaving or the server shutting down) and returns up to 10 records in a
// deliberately shuffled order (WithQueueSeed), each with a new receipt handle
// and a RecordId that is the same in every queue on the stream;
// AcknowledgeQueueRecords and UpdateQueueRecordsVisibility answer per entry.
// Visibility timeouts run on the server clock; after MaxReceiveCount receives
// an unacknowledged record becomes a dead letter, which
// ReceiveDeadLetterQueueRecords, AcknowledgeDeadLetterQueueRecords,
// UpdateDeadLetterQueueRecordsVisibility and RestoreDeadLetterQueueRecords
// handle. A record leaves every queue with the stream's retention; at most
// WithQueueInFlightLimit (120,000) records are in flight per queue. A stream
// record is delivered whole, so a KPL aggregate is one queue record. The
// service's behaviours this server assumes where the documentation is silent
// are listed in testing/README.md. QueueStats, QueueRecords,
// QueueAckedRecordIDs, WaitQueue and ExpireQueueInFlight let a test inspect a
// queue and simulate the death of a consumer.
//
// aws-sdk-go-v2 sends queue operations to {queueId}.data-kinesis-queues.
// {region}.amazonaws.com (and control-kinesis-queues) unless an endpoint is
// configured: a client of this server must set BaseEndpoint (or
// AWS_ENDPOINT_URL_KINESIS), as Client does; the account-ID endpoint mode
// then does not matter.
//
// Clients with more than one subscription open should give each
// SubscribeToShard call its own protocol, as in
//
//	out, err := client.SubscribeToShard(ctx, in, func(o *kinesis.Options) {
//		o.Protocol = awsjson.New11(schemas.Kinesis_20131202)
//	})
//
// (awsjson from github.com/aws/smithy-go/transport/http/protocol/awsjson,
// schemas from github.com/aws/aws-sdk-go-v2/service/kinesis/schemas): the
// client's protocol holds one event-stream decoder that all its streams share
// without synchronisation (aws/smithy-go#714), a data race that -race reports
// against this server as it would against the service. Note also that
// aws-sdk-go-v2 reports a connection closed between or even inside frames as a
// normal end of the stream (Err() == nil); only the missing final event tells
// a reader that such a stream did not reach the shard's end.
//
// What a test controls:
//
//   - time, with WithClock(NewManualClock(t)): arrival timestamps, iterator
//     and paging-token expiry, retention and throughput windows follow it;
//   - throughput limits, with WithLimits or SetLimits: per-shard write and
//     read rates and control-plane rates, as the service enforces them;
//   - the pause after large reads, with WithLargeReadThrottle or
//     SetLargeReadThrottle: a GetRecords page of B bytes over 2 MiB throttles
//     its shard's reads for B / (2 MiB/s), 5 s after 10 MiB;
//   - faults, with WithFaults or SetFaults: throttled or failed PutRecords
//     entries, 5xx responses, throttled GetRecords, expired iterators,
//     dropped connections and latency, subscriptions reset mid-stream and
//     delayed events, throttled queue requests, throttled or failed queue
//     entries and acknowledgements the queue loses, drawn from a seeded
//     generator;
//   - inspection: StreamRecords, ShardRecords and CallCount tell what the
//     server stored and received.
//
// Typical use in a test (StartT fails the test if the server does not start and closes it
// when the test ends; outside tests, Start returns an error instead):
//
//	srv := kinesistest.StartT(t, kinesistest.WithStream("orders", 2))
//	client := srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
//	// ... run the code under test with client, or with srv.URL() as endpoint
//	records, err := srv.StreamRecords("orders")
//
// Clients built elsewhere should set kinesis.Options.HTTPClient to
// HTTPClient(): it avoids an aws-sdk-go-v2 race that a local server makes
// frequent (see HTTPClient).
//
// MillisBehindLatest is 0 exactly when a page leaves nothing unread, and at
// least 1 otherwise, even when the unread records arrived at the current
// instant of a manual clock.
//
// Sequence numbers are 56-digit decimals shaped like the service's (version 2,
// shard number in bits 4..35) and grow strictly within a shard; compare them
// as big integers. Shard ids are "shardId-000000000000" and onwards, and
// children of a split or merge get higher numbers than their parents.
//
// Known differences from the service: status transitions and resharding take
// effect at once (WithTransitionDelay shows CREATING/UPDATING for a while but
// the shards change immediately); warm throughput is reported, not enforced,
// and changes no shards; UpdateStreamMode changes the mode and not the
// shards; channels are not implemented; tagging and encryption are not
// implemented; every stream belongs to account 123456789012 and one namespace
// whatever the region; signatures are checked only with WithCredentials, and
// there is no IAM (any valid key may call any operation, and STS assumes any
// role). For enhanced fan-out: SubscribeToShard is served over HTTP/1.1
// chunked bodies or HTTP/2, as the client asks; the consumer control-plane rates of limits mode are counted per
// account; the size of an event (at most 10,000 records and 1 MiB beyond its
// first record) and the heartbeat cadence are this server's choices, the
// service documents neither; the last records of a closed shard come in the
// same event as its ChildShards, as GetRecords returns them.
package kinesistest
