// Package kinesistest runs a Kinesis Data Streams compatible server inside a
// test process, so code under test uses the real aws-sdk-go-v2 client over
// real HTTP against a server the test controls.
//
// The server speaks the JSON 1.1 protocol as aws-sdk-go-v2 does (POST / with
// X-Amz-Target Kinesis_20131202.<Operation>). It implements CreateStream,
// DeleteStream, DescribeStream, DescribeStreamSummary, ListStreams,
// ListShards (every ShardFilter type, NextToken paging), PutRecord,
// PutRecords (per-entry failures), GetShardIterator (all five types),
// GetRecords (MillisBehindLatest, ChildShards at the end of a closed shard),
// SplitShard, MergeShards, UpdateShardCount, IncreaseStreamRetentionPeriod,
// DecreaseStreamRetentionPeriod and UpdateMaxRecordSize, addressing streams by
// StreamName or StreamARN. Validation and errors follow the service: the same error types,
// HTTP statuses and, as far as known, messages.
//
// What a test controls:
//
//   - time, with WithClock(NewManualClock(t)): arrival timestamps, iterator
//     and paging-token expiry, retention and throughput windows follow it;
//   - throughput limits, with WithLimits or SetLimits: per-shard write and
//     read rates and control-plane rates, as the service enforces them;
//   - faults, with WithFaults or SetFaults: throttled or failed PutRecords
//     entries, 5xx responses, throttled GetRecords, expired iterators,
//     dropped connections and latency, drawn from a seeded generator;
//   - inspection: StreamRecords, ShardRecords and CallCount tell what the
//     server stored and received.
//
// Typical use:
//
//	srv, err := kinesistest.Start()
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { srv.Close() })
//	if err := srv.CreateStream("orders", 2); err != nil {
//		t.Fatal(err)
//	}
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
// the shards change immediately); stream consumers and SubscribeToShard,
// tagging, encryption and CBOR are not implemented; every stream belongs to
// account 123456789012 and one namespace whatever the region; the request
// signature is not checked.
package kinesistest
