package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/errkind"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/producer"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

func init() {
	register.DoFn4x1[context.Context, beam.EventTime, Message, func(beam.EventTime, FailedMessage), error](&writeFn{})
	register.Emitter2[beam.EventTime, FailedMessage]()
}

// Write writes a PCollection<Message> to the Kinesis stream named stream and returns the
// messages it could not write as a PCollection<FailedMessage>, each with the reason and
// the service's error code.
//
// Messages are routed by the MD5 of their partition key (or their explicit hash key) to
// the shard whose hash key range holds it, using the stream's shard map, and with
// aggregation (the default) packed per shard into KPL aggregated records. Records go out
// in PutRecords requests within the service's limits, up to WithMaxConnections at once,
// kept within each shard's write limits (WithRateLimit). Entries the service fails are
// retried with backoff (WithRetries); what still fails goes to the failed output, or fails
// the bundle with WithFailOnError. Messages the service would refuse (empty partition key,
// a key over 256 characters, a bad explicit hash key, a record over the stream's size
// limit) go to the failed output at once with ErrorCode ErrorCodeInvalidMessage; with
// WithFailOnError a message over the size limit fails the bundle instead (raising the
// stream's limit can fix it), while the others still go to the failed output.
//
// Record size: each worker reads the stream's record size limit (MaxRecordSizeInKiB, 1 MiB
// unless raised with UpdateMaxRecordSize or CreateStream, at most 10 MiB) with
// DescribeStreamSummary when it starts, so the writer's role needs
// kinesis:DescribeStreamSummary besides ListShards and PutRecords (without it the writer
// warns and keeps to 1 MiB). A message whose partition key plus data exceeds the limit
// fails with a reason naming its size, the limit and the remedy; a writer started before
// the limit was raised keeps the old one until it restarts. Messages over the aggregate
// size (WithMaxAggregateBytes) go out as plain records of their own. PutRecords requests
// stay within 5 MiB for a stream at 1 MiB and use the service's 10 MiB otherwise. Large
// records still count against a shard's 1 MiB/s: one larger than a shard's budget is sent
// when the budget is full and holds the shard's next records back until it is paid off,
// so large records are for intermittent use, as the service intends.
//
// Streams that distribute records themselves: on an on-demand stream whose
// RecordDistributionStrategy is AUTO the service picks each record's shard and ignores
// partition keys and explicit hash keys. Write reads the strategy with the record size
// limit; on such a stream it never aggregates (KCL consumers drop the user records of an
// aggregate that lands outside their shard's range, and on AUTO an aggregate lands on any
// shard), does not route or pace by shard, and takes messages without a partition key. It
// logs this once and counts the messages in service_distributed_messages. A switch of the
// strategy while the job runs is picked up with the next shard map (every
// WithShardMapRefreshInterval) or at once on evidence of it: an aggregate that lands
// outside its shard (it is written again as records of their own, so nothing is lost; a
// reader that kept the first copy sees its records twice), or a request refused for a
// message without a partition key once the stream routes by key again (such messages then
// go to the failed output as invalid, with the reason).
//
// A bundle finishes only when all its messages are acknowledged or failed, so the write is
// at-least-once: a retried bundle, a lost response or a resharding (see Delivery guarantees
// in the package documentation) can write a message twice. Failed messages keep their event
// time and are in the global window.
//
// Metrics (namespace "kinesisio.Write"): user_records, kinesis_records, bytes,
// putrecords_calls, throttled_entries, retries, failed_messages, invalid_messages,
// wrong_shard_aggregates, rerouted_messages, service_distributed_messages,
// distribution_switches, and the distribution aggregate_bytes.
func Write(s beam.Scope, stream string, msgs beam.PCollection, opts ...WriteOption) beam.PCollection {
	transform := targetWrite.String()
	s = s.Scope(transform)
	validateStreamName(transform, stream)
	cfg := buildConfig(targetWrite, opts)
	regionFromStreamARN(transform, stream, &cfg)
	if t := msgs.Type().Type(); t != reflect.TypeOf(Message{}) {
		panic(fmt.Sprintf("%s: the input must be a PCollection of kinesisio.Message, got %v; build messages with MessagesFromBytes, MessagesFromStrings or MessagesWithRandomKeys", transform, t))
	}
	return beam.ParDo(s, &writeFn{Stream: stream, Client: cfg.client, Retry: cfg.retry, Write: cfg.write}, msgs)
}

// errWriteFailedRecord is the error of a bundle failed by WithFailOnError.
var errWriteFailedRecord = errors.New("kinesisio.Write: a message could not be written and WithFailOnError is set")

// writeFn is the batching ParDo behind Write. Its producer lives across bundles (it holds
// the shard map and rate limiter state) and is empty between them.
type writeFn struct {
	Stream string
	Client clientConfig
	Retry  retryConfig
	Write  writeConfig

	p       *producer.Producer
	pending int // messages seen since the last metrics report
	// serviceDistributed is what the writer last said of the stream's distribution.
	serviceDistributed bool
}

func (fn *writeFn) Setup(ctx context.Context) error {
	return errkind.Classify(fn.start(ctx), true)
}

func (fn *writeFn) start(ctx context.Context) error {
	client, err := newClient(ctx, fn.Client)
	if err != nil {
		return fmt.Errorf("kinesisio.Write to %q: %w", fn.Stream, err)
	}
	policy := fn.Retry.policy()
	settings, err := writerStreamSettings(ctx, client, fn.Stream, policy)
	if err != nil {
		return fmt.Errorf("kinesisio.Write to %q: %w", fn.Stream, err)
	}
	maxRecord := settings.MaxRecordBytes
	p, err := producer.New(client, producer.Config{
		Stream:             fn.Stream,
		Limits:             fn.Write.limits(maxRecord),
		MaxBufferedTime:    fn.Write.RecordMaxBufferedTime,
		MaxConnections:     fn.Write.MaxConnections,
		MaxBufferedBytes:   fn.Write.MaxBufferedBytes,
		RateLimitPercent:   fn.Write.RateLimitPercent,
		Retry:              policy,
		ShardMapRefresh:    fn.Write.ShardMapRefresh,
		ShardMapMinGap:     shardMapMinGap,
		ServiceDistributed: settings.ServiceDistributed,
	})
	if err != nil {
		return fmt.Errorf("kinesisio.Write to %q: %w", fn.Stream, err)
	}
	fn.p, fn.serviceDistributed = p, false
	fn.noteDistribution(ctx)
	log.Debugf(ctx, "kinesisio.Write to %q: started with %s, aggregation %v, record size limit %d bytes, the service distributing records %v", fn.Stream, fn.Client.credentialsSource(), fn.Write.Aggregate, maxRecord, settings.ServiceDistributed)
	return nil
}

// writerStreamSettings returns the settings a writer to stream works by: the stream's
// record size limit (MaxRecordSizeInKiB) and whether it distributes records itself
// (RecordDistributionStrategy AUTO). A writer that may not describe the stream (a role
// that allows only ListShards and PutRecords) warns and keeps to 1 MiB, routing by key.
func writerStreamSettings(ctx context.Context, api producer.Describer, stream string, policy backoff.Policy) (producer.StreamSettings, error) {
	s, err := producer.DescribeStream(ctx, api, stream, policy)
	if err == nil {
		return s, nil
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "AccessDeniedException" {
		return s, fmt.Errorf("describing the stream for its record size limit and distribution strategy: %w", err)
	}
	log.Warnf(ctx, "kinesisio.Write to %q: cannot describe the stream (%v); assuming the default record size limit of 1 MiB and keyed distribution. Allow kinesis:DescribeStreamSummary to write larger records to a stream that takes them, and to write to a stream that distributes records itself (AUTO) without KPL aggregation.", stream, err)
	return producer.StreamSettings{MaxRecordBytes: batch.DefaultMaxRecordBytes}, nil
}

// noteDistribution logs, once per writer and switch, that the stream distributes records
// itself (or no longer does), and what the writer does about it.
func (fn *writeFn) noteDistribution(ctx context.Context) {
	auto := fn.p.ServiceDistributed()
	if auto == fn.serviceDistributed {
		return
	}
	fn.serviceDistributed = auto
	switch {
	case auto && fn.Write.Aggregate:
		log.Infof(ctx, "kinesisio.Write to %q: the stream distributes records itself (RecordDistributionStrategy AUTO): messages are written as records of their own, without KPL aggregation (KCL consumers would drop an aggregate's records on any shard but their own), and need no partition key", fn.Stream)
	case auto:
		log.Infof(ctx, "kinesisio.Write to %q: the stream distributes records itself (RecordDistributionStrategy AUTO): messages need no partition key", fn.Stream)
	default:
		log.Infof(ctx, "kinesisio.Write to %q: the stream routes records by partition key again (RecordDistributionStrategy USER_PARTITION_KEY): messages without a partition key are invalid", fn.Stream)
	}
}

// StartBundle takes the emitter only because Beam requires every method to declare the
// emitters ProcessElement declares; nothing is output here.
func (fn *writeFn) StartBundle(ctx context.Context, _ func(beam.EventTime, FailedMessage)) error {
	if fn.p == nil { // a previous bundle failed and dropped its producer
		return errkind.Classify(fn.start(ctx), true)
	}
	return nil
}

func (fn *writeFn) ProcessElement(ctx context.Context, et beam.EventTime, m Message, emit func(beam.EventTime, FailedMessage)) error {
	rec := kpl.UserRecord{PartitionKey: m.PartitionKey, ExplicitHashKey: m.ExplicitHashKey, Data: m.Data}
	if err := fn.p.Put(ctx, rec, et); err != nil {
		var invalid *producer.InvalidError
		if !errors.As(err, &invalid) {
			fn.abandon()
			return errkind.Classify(fmt.Errorf("kinesisio.Write to %q: %w", fn.Stream, err), true)
		}
		writeInvalid.Inc(ctx, 1)
		if invalid.TooLarge && fn.Write.FailOnError {
			// Unlike a bad key, a message too large can be written once the stream's limit
			// is raised; the retried bundle's writer reads the limit again.
			fn.report(ctx)
			fn.abandon()
			return fmt.Errorf("%w: partition key %q: %s", errWriteFailedRecord, m.PartitionKey, invalid.Reason)
		}
		emit(et, FailedMessage{Message: m, Reason: "invalid message: " + invalid.Reason, ErrorCode: ErrorCodeInvalidMessage})
	}
	if err := fn.emitFailures(ctx, emit); err != nil {
		return err
	}
	if fn.pending++; fn.pending >= 1000 {
		fn.report(ctx)
	}
	return nil
}

// FinishBundle sends what is buffered and waits for every message of the bundle to be
// acknowledged or failed: the bundle commits only then.
func (fn *writeFn) FinishBundle(ctx context.Context, emit func(beam.EventTime, FailedMessage)) error {
	wait := ctx
	if fn.Write.FlushWaitTime > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, fn.Write.FlushWaitTime)
		defer cancel()
	}
	if err := fn.p.Flush(wait); err != nil {
		fn.report(ctx)
		fn.abandon()
		return errkind.Classify(fmt.Errorf("kinesisio.Write to %q: flushing at the end of the bundle: %w", fn.Stream, err), true)
	}
	err := fn.emitFailures(ctx, emit)
	fn.report(ctx)
	return err
}

func (fn *writeFn) Teardown() {
	if fn.p != nil {
		fn.p.Close()
		fn.p = nil
	}
}

// abandon drops the producer after a failed bundle: its buffered messages belong to the
// bundle the runner will retry.
func (fn *writeFn) abandon() {
	fn.p.Close()
	fn.p = nil
}

// emitFailures outputs the messages the producer gave up on, or fails the bundle when
// WithFailOnError is set.
func (fn *writeFn) emitFailures(ctx context.Context, emit func(beam.EventTime, FailedMessage)) error {
	failures := fn.p.Failures()
	if len(failures) == 0 {
		return nil
	}
	if fn.Write.FailOnError {
		f := failures[0]
		fn.report(ctx)
		fn.abandon()
		return fmt.Errorf("%w: %d failed, the first (partition key %q) with %s: %s", errWriteFailedRecord, len(failures), f.Record.PartitionKey, f.ErrorCode, f.Reason)
	}
	for _, f := range failures {
		emit(f.Meta.(beam.EventTime), FailedMessage{
			Message:   Message{PartitionKey: f.Record.PartitionKey, ExplicitHashKey: f.Record.ExplicitHashKey, Data: orEmpty(f.Record.Data)},
			Reason:    f.Reason,
			ErrorCode: f.ErrorCode,
			Attempts:  f.Attempts,
		})
	}
	return nil
}

// report adds what the producer did since the last report to the Beam metrics. Metrics are
// updated here, on the bundle's goroutine, because the producer's goroutines outlive any
// one bundle's context.
func (fn *writeFn) report(ctx context.Context) {
	fn.pending = 0
	if fn.p == nil {
		return
	}
	s := fn.p.TakeStats()
	inc(ctx, writeUserRecords, s.UserRecords)
	inc(ctx, writeKinesisRecords, s.KinesisRecords)
	inc(ctx, writeBytes, s.Bytes)
	inc(ctx, writeCalls, s.PutRecordsCalls)
	inc(ctx, writeThrottled, s.ThrottledEntries)
	inc(ctx, writeRetries, s.Retries)
	inc(ctx, writeFailures, s.Failures)
	inc(ctx, writeWrongShard, s.WrongShard)
	inc(ctx, writeRerouted, s.Rerouted)
	inc(ctx, writeServiceDistributed, s.Unaggregated)
	inc(ctx, writeDistributionSwitches, s.DistributionSwitches)
	fn.noteDistribution(ctx)
	for _, size := range fn.p.AggregateSizes() {
		writeAggregateSizes.Update(ctx, int64(size))
	}
}
