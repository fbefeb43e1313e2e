// Package kinesisio is a native Apache Beam Go connector for Amazon Kinesis Data Streams.
//
// Read and ReadBounded turn a stream into a PCollection of Record: every shard is read by a
// splittable DoFn whose restriction is a range of (sequence number, sub-sequence number)
// positions, shards are discovered while the pipeline runs so that resharding loses nothing,
// and KPL-aggregated records are split into their user records. Shards are polled with
// GetRecords by default, or pushed through enhanced fan-out (SubscribeToShard) with
// WithEnhancedFanOut or WithEnhancedFanOutConsumerARN. Write sends a PCollection of
// Message, aggregated in the KPL format and routed by shard hash range, and returns the
// messages it could not write as a PCollection of FailedMessage.
//
// Configuration is by functional options validated when the pipeline is built: a bad option
// panics with a message naming the option and the fix. Options for the AWS client (WithRegion,
// WithEndpoint, WithStaticCredentials, WithAssumeRole, WithProfile) serve every transform; the
// others name the direction they belong to and are refused by the other one.
package kinesisio
