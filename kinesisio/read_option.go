package kinesisio

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
)

// Watermark policies. The values travel inside DoFns.
const (
	watermarkArrivalTime int64 = iota
	watermarkProcessingTime
	watermarkCustom
)

// maxGetRecordsLimit is the largest Limit GetRecords accepts.
const maxGetRecordsLimit = 10000

// readConfig holds the options of Read and ReadBounded. The package documentation maps
// the Spark Kinesis connectors' option names to them.
type readConfig struct {
	start                 StartingPosition
	failOnDataLoss        bool
	maxFetchTime          time.Duration
	maxRecordsPerFetch    int64
	maxRecordsPerRead     int32
	idleTimeBetweenReads  time.Duration
	pollInterval          time.Duration
	describeShardInterval time.Duration
	watermarkPolicy       int64
	timestampFn           EventTimeFn
	idleThreshold         time.Duration
	maxRecords            int64
	maxReadTime           time.Duration
	propagationDelay      time.Duration
	startupTimeout        time.Duration
	consumerName          string
	consumerARN           string
	// checkpointTable and checkpointEndpoint are WithCheckpointTable and
	// WithCheckpointTableEndpoint.
	checkpointTable    string
	checkpointEndpoint string
	// checkpointTakeover and leaseDuration are WithCheckpointTakeover and
	// WithCheckpointLeaseDuration (0: the default).
	checkpointTakeover bool
	leaseDuration      time.Duration
	// readAheadBytes is WithMaxReadAheadBytes; 0 with WithoutReadAhead.
	readAheadBytes int64
	// readID names the transform for pacing (worker_state.go); buildConfig sets it.
	readID string
}

// The defaults follow the Spark connectors' seeds where they have one.
func defaultReadConfig() readConfig {
	return readConfig{
		start:                 Latest(),
		failOnDataLoss:        true,
		maxFetchTime:          time.Second,
		maxRecordsPerFetch:    100000,
		maxRecordsPerRead:     maxGetRecordsLimit,
		pollInterval:          defaultPollInterval,
		describeShardInterval: time.Second,
		watermarkPolicy:       watermarkArrivalTime,
		idleThreshold:         5 * time.Second,
		propagationDelay:      defaultPropagationDelay,
		startupTimeout:        defaultStartupTimeout,
		readAheadBytes:        defaultReadAheadBytes,
	}
}

func (r *readConfig) validate() error {
	if err := r.start.validate(); err != nil {
		return fmt.Errorf("option WithStartingPosition: %w", err)
	}
	if r.checkpointEndpoint != "" && r.checkpointTable == "" {
		return fmt.Errorf("WithCheckpointTableEndpoint was given without WithCheckpointTable; name the table too")
	}
	if (r.checkpointTakeover || r.leaseDuration > 0) && r.checkpointTable == "" {
		return fmt.Errorf("WithCheckpointTakeover or WithCheckpointLeaseDuration was given without WithCheckpointTable; name the table too")
	}
	return nil
}

// refuseReadNoOps refuses the read options that do nothing for the read they were given to
// (bounded for ReadBounded) or beside another option given, and two options that set one
// thing in two ways. Each rule is the code's: ReadBounded reads a shard to its end in one
// call (read_loop.go: no record limit or deadline), advances no watermark (it has no
// estimator) and lists the shards once (discoverBoundedFn); enhanced fan-out makes no
// GetRecords call (fetch_poll.go is polling's alone) and waits for a shard's parents, as
// polling does, only in Read with a table (read_table.go); the processing-time policy
// follows the clock (watermarkPolicy.afterRead).
func (c *config) refuseReadNoOps(bounded bool) error {
	if err := c.onlyOne("the watermark policy", "WithArrivalTimeWatermarkPolicy", "WithProcessingTimeWatermarkPolicy", "WithCustomWatermarkPolicy"); err != nil {
		return err
	}
	if err := c.onlyOne("the enhanced fan-out consumer", "WithEnhancedFanOut", "WithEnhancedFanOutConsumerARN"); err != nil {
		return err
	}
	if bounded {
		for _, name := range []string{"WithMaxFetchTime", "WithMaxRecordsPerFetch"} {
			if c.given[name] {
				return noOp(name, "it bounds one ProcessElement call of Read, and ReadBounded reads each shard to its end in one call", "remove it, or read with Read")
			}
		}
		if c.given["WithDescribeShardInterval"] {
			return noOp("WithDescribeShardInterval", "ReadBounded lists the stream's shards once, when it starts", "remove it, or read with Read")
		}
		if c.given["WithIdleThreshold"] {
			return noOp("WithIdleThreshold", "ReadBounded's output is bounded, and no shard holds its watermark back", "remove it, or read with Read")
		}
		if c.given["WithStartupTimeout"] {
			return noOp("WithStartupTimeout", "ReadBounded lists the shards once and fails when that listing fails", "remove it, or read with Read")
		}
	}
	if c.given["WithIdleThreshold"] && c.read.watermarkPolicy == watermarkProcessingTime {
		return noOp("WithIdleThreshold", "under WithProcessingTimeWatermarkPolicy the watermark follows the clock, idle shards or not", "remove one of them")
	}
	if err := c.onlyOne("the read-ahead", "WithMaxReadAheadBytes", "WithoutReadAhead"); err != nil {
		return err
	}
	if c.read.consumerName != "" || c.read.consumerARN != "" {
		const fix = "remove it, or read by polling (without the enhanced fan-out option)"
		for _, name := range []string{"WithMaxRecordsPerRead", "WithIdleTimeBetweenReads"} {
			if c.given[name] {
				return noOp(name, "it shapes GetRecords calls, and enhanced fan-out makes none (a subscription stays open between calls and the service pushes its events)", fix)
			}
		}
		if c.given["WithPollInterval"] && (bounded || c.read.checkpointTable == "") {
			return noOp("WithPollInterval", "with enhanced fan-out it sets only how often Read with a checkpoint table checks a child shard's parents", fix)
		}
	}
	return nil
}

// WithStartingPosition sets where each shard is first read from: Latest() (the default, as in
// the Spark connectors), TrimHorizon(), AtTimestamp(t) or ShardPositions(...).
// ParseStartingPosition reads the Spark connectors' string and JSON forms. With
// WithCheckpointTable it applies only to the shards the table has no position for.
func WithStartingPosition(p StartingPosition) ReadOption {
	return readOnly{option{name: "WithStartingPosition", apply: func(c *config) error {
		if err := p.validate(); err != nil {
			return err
		}
		c.read.start = p
		return nil
	}}}
}

// WithSkipOnDataLoss makes a read go on when a shard's starting or resume position has
// already been trimmed by the stream's retention (or the shard itself has expired): it
// continues from the oldest retained record (or with the shard's children), counting the
// event in the kinesisio/data_loss_skips metric and logging it. Without it the read fails
// with an error naming the shard and the position. It is the Spark connectors'
// failOnDataLoss = false.
func WithSkipOnDataLoss() ReadOption {
	return readOnly{option{name: "WithSkipOnDataLoss", apply: func(c *config) error {
		c.read.failOnDataLoss = false
		return nil
	}}}
}

// WithMaxFetchTime bounds how long one shard is read before the reader checkpoints and
// yields to the runner (default 1s; the Spark connectors' maxFetchTimeInMs). Short times
// checkpoint more often; long ones hold a worker thread longer. It applies to Read:
// ReadBounded reads each shard to its end in one call, and refuses it.
func WithMaxFetchTime(d time.Duration) ReadOption {
	return readOnly{option{name: "WithMaxFetchTime", apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("the fetch time %v must be positive", d)
		}
		c.read.maxFetchTime = d
		return nil
	}}}
}

// WithMaxRecordsPerFetch bounds how many records one shard emits before the reader
// checkpoints and yields to the runner (default 100000; the Spark connectors'
// maxFetchRecordsPerShard). It applies to Read: ReadBounded reads each shard to its end in
// one call, and refuses it.
func WithMaxRecordsPerFetch(n int) ReadOption {
	return readOnly{option{name: "WithMaxRecordsPerFetch", apply: func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("the record count %d must be positive", n)
		}
		c.read.maxRecordsPerFetch = int64(n)
		return nil
	}}}
}

// WithMaxRecordsPerRead sets the Limit of each GetRecords call, 1 to 10000 (default 10000;
// the Spark connectors' maxRecordPerRead). It applies to polling: a read with enhanced
// fan-out makes no GetRecords call, and refuses it.
func WithMaxRecordsPerRead(n int) ReadOption {
	return readOnly{option{name: "WithMaxRecordsPerRead", apply: func(c *config) error {
		if n < 1 || n > maxGetRecordsLimit {
			return fmt.Errorf("the limit %d is outside 1..%d, the range GetRecords accepts", n, maxGetRecordsLimit)
		}
		c.read.maxRecordsPerRead = int32(n)
		return nil
	}}}
}

// WithIdleTimeBetweenReads makes a shard reader wait at least d between two GetRecords calls
// even when records keep coming (the Spark connectors' addIdleTimeBetweenReads and
// idleTimeBetweenReadsInMs), e.g. to leave read capacity to other consumers. Off by default.
// It applies to polling: a read with enhanced fan-out makes no GetRecords call, and refuses
// it.
func WithIdleTimeBetweenReads(d time.Duration) ReadOption {
	return readOnly{option{name: "WithIdleTimeBetweenReads", apply: func(c *config) error {
		if d < 0 {
			return fmt.Errorf("the idle time %v is negative", d)
		}
		c.read.idleTimeBetweenReads = d
		return nil
	}}}
}

// defaultPollInterval is WithPollInterval's default: what Flink's source waits after an
// empty fetch and KCL's low-latency guidance suggests. An idle shard then makes 4 of the 5
// reads per second Kinesis allows a shard (worker_state.go's caught-up budget).
const defaultPollInterval = 250 * time.Millisecond

// WithPollInterval sets how long a caught-up shard waits after a GetRecords call that
// returned nothing before it polls again (default 250ms). While the shard is behind
// (MillisBehindLatest > 0) it reads again at once, and backs off when throttled. At the tip
// of the shard, reads are at least 250 ms apart whatever the interval: Kinesis allows 5
// GetRecords calls per second per shard, shared by all consumers of the stream, and this
// leaves at least one to another consumer. Longer intervals leave more to other consumers.
//
// With WithCheckpointTable, Read also checks this often whether a child shard's parents
// have been read to their end. With enhanced fan-out that check is all it sets: a
// ReadBounded, or a Read without a checkpoint table, with enhanced fan-out refuses it.
func WithPollInterval(d time.Duration) ReadOption {
	return readOnly{option{name: "WithPollInterval", apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("the poll interval %v must be positive", d)
		}
		c.read.pollInterval = d
		return nil
	}}}
}

// WithDescribeShardInterval sets how often Read lists the stream's shards to find shards
// created by resharding (default 1s; the Spark connectors' describeShardInterval). It
// applies to Read: ReadBounded lists the shards once, when it starts, and refuses it.
func WithDescribeShardInterval(d time.Duration) ReadOption {
	return readOnly{option{name: "WithDescribeShardInterval", apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("the interval %v must be positive", d)
		}
		c.read.describeShardInterval = d
		return nil
	}}}
}

// consumerARNPattern is the service's pattern for stream consumer ARNs.
var consumerARNPattern = regexp.MustCompile(`^arn:aws[a-z0-9-]*:kinesis:[a-z0-9-]*:\d{12}:stream/[a-zA-Z0-9_.-]+/consumer/[a-zA-Z0-9_.-]+:[0-9]+$`)

// WithEnhancedFanOut reads each shard with enhanced fan-out (SubscribeToShard) as the stream
// consumer named consumerName instead of polling GetRecords. The consumer gets its own
// 2 MiB/s per shard and records are pushed as they arrive. The readers register the consumer
// if the stream has none of that name, reuse it if it exists, and wait until it is ACTIVE;
// they never deregister it. This is the Spark connectors' kinesis.consumerType =
// SubscribeToShard with kinesis.consumerName. Restrictions, checkpoints, deaggregation,
// watermarks and metrics are the same as with polling. The options of polling
// (WithMaxRecordsPerRead, WithIdleTimeBetweenReads, and WithPollInterval but for Read's
// parent check with a checkpoint table) are refused beside it, and so is
// WithEnhancedFanOutConsumerARN, which names the consumer another way. A shard's subscription stays
// open from one ProcessElement call to the next on the same worker, and a caught-up reader
// returns to the runner between events, so that it does not hold the other shards a runner
// put in the same bundle.
//
// A stream has at most 20 registered consumers (50 for an on-demand stream under the
// On-demand Advantage minimum throughput billing commitment): a read that would register
// one more fails when it starts, saying which limit it met and how to raise it.
func WithEnhancedFanOut(consumerName string) ReadOption {
	return readOnly{option{name: "WithEnhancedFanOut", apply: func(c *config) error {
		if !streamNamePattern.MatchString(consumerName) {
			return fmt.Errorf("consumer name %q is invalid: consumer names are 1 to 128 characters of a-z, A-Z, 0-9, '_', '.' and '-'", consumerName)
		}
		c.read.consumerName, c.read.consumerARN = consumerName, ""
		return nil
	}}}
}

// WithEnhancedFanOutConsumerARN is WithEnhancedFanOut with a stream consumer registered
// beforehand, named by its ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/STREAM/consumer/NAME:EPOCH).
// The readers subscribe with it as it is and register nothing. It is refused beside
// WithEnhancedFanOut.
func WithEnhancedFanOutConsumerARN(arn string) ReadOption {
	return readOnly{option{name: "WithEnhancedFanOutConsumerARN", apply: func(c *config) error {
		if !consumerARNPattern.MatchString(arn) {
			return fmt.Errorf("%q is not a stream consumer ARN like arn:aws:kinesis:us-east-1:123456789012:stream/NAME/consumer/CONSUMER:1700000000", arn)
		}
		c.read.consumerARN, c.read.consumerName = arn, ""
		return nil
	}}}
}

// WithArrivalTimeWatermarkPolicy makes each record's event time its approximate arrival
// timestamp, and a shard's watermark the latest arrival time it has read. This is the
// default. The three watermark policies exclude each other: give at most one.
func WithArrivalTimeWatermarkPolicy() ReadOption {
	return readOnly{option{name: "WithArrivalTimeWatermarkPolicy", apply: func(c *config) error {
		c.read.watermarkPolicy, c.read.timestampFn = watermarkArrivalTime, nil
		return nil
	}}}
}

// WithProcessingTimeWatermarkPolicy makes each record's event time the time it is read, and
// the watermark the time of the last successful GetRecords call. The watermark then follows
// the clock, idle shards or not, so WithIdleThreshold is refused beside it.
func WithProcessingTimeWatermarkPolicy() ReadOption {
	return readOnly{option{name: "WithProcessingTimeWatermarkPolicy", apply: func(c *config) error {
		c.read.watermarkPolicy, c.read.timestampFn = watermarkProcessingTime, nil
		return nil
	}}}
}

// WithCustomWatermarkPolicy makes fn assign each record's event time; a shard's watermark is
// the largest event time fn has returned for it. fn's type must be registered with
// beam.RegisterType and its state JSON-serialisable. Only one watermark policy may be given.
func WithCustomWatermarkPolicy(fn EventTimeFn) ReadOption {
	return readOnly{option{name: "WithCustomWatermarkPolicy", apply: func(c *config) error {
		if fn == nil {
			return fmt.Errorf("the EventTimeFn is nil")
		}
		if _, err := encodeEventTimeFn(fn); err != nil {
			return err
		}
		c.read.watermarkPolicy, c.read.timestampFn = watermarkCustom, fn
		return nil
	}}}
}

// WithIdleThreshold sets how long a shard must have been caught up with no new records
// (GetRecords returning nothing with MillisBehindLatest 0) before its watermark advances on
// its own, to the time of the last poll minus d (default 5s). Without this, one idle shard
// would hold back every event-time window downstream. The watermark never advances while
// reads fail. It applies to Read under the arrival-time (default) or a custom watermark
// policy: ReadBounded's output is bounded, its watermark held by no shard, and under
// WithProcessingTimeWatermarkPolicy the watermark follows the clock; both refuse it.
func WithIdleThreshold(d time.Duration) ReadOption {
	return readOnly{option{name: "WithIdleThreshold", apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("the idle threshold %v must be positive", d)
		}
		c.read.idleThreshold = d
		return nil
	}}}
}

// WithoutDeaggregation emits KPL-aggregated records whole instead of splitting them into
// their user records, as the reads do by default. When deaggregating, a record that looks
// like an aggregate but fails its checksum or does not parse is passed through whole, as the
// KCL does, and counted; an aggregate holding user records outside its shard's hash range is
// dropped and counted.
func WithoutDeaggregation() SourceOption {
	return SourceOption{option{name: "WithoutDeaggregation", apply: func(c *config) error {
		c.source.deaggregate = false
		return nil
	}}}
}

// WithMaxRecords stops reading each shard after n user records (for tests and bounded
// backfills). A shard's children are separate shards with their own count. Read keeps
// discovering new shards until WithMaxReadTime ends it; use both to end a streaming read.
func WithMaxRecords(n int) ReadOption {
	return readOnly{option{name: "WithMaxRecords", apply: func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("the record count %d must be positive", n)
		}
		c.read.maxRecords = int64(n)
		return nil
	}}}
}

// WithMaxReadTime ends the read once it has read every record that arrived within d of the
// read's start: each shard stops at its first record that arrived later, or when it is caught
// up past that time (plus WithPropagationDelay), and discovery stops looking for new shards.
// This makes a streaming Read finish, with output that depends only on the records' arrival
// times.
//
// The read starts at the first successful shard listing on a worker, measured on that
// worker's clock, and is logged there ("kinesisio: reading stream S: the records that arrived
// from ... to ..."): not when Read is called or the job is submitted, which on Flink or
// Dataflow can be minutes earlier. Arrival times are the service's clock, so clock skew
// between the worker and Kinesis moves the window too. To read everything a producer wrote,
// read with ReadBounded after the producer has finished, or give the window a margin.
func WithMaxReadTime(d time.Duration) ReadOption {
	return readOnly{option{name: "WithMaxReadTime", apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("the read time %v must be positive", d)
		}
		c.read.maxReadTime = d
		return nil
	}}}
}

// defaultPropagationDelay is WithPropagationDelay's default: several times the put-to-get
// delay AWS gives for shared polling (about 200 ms) and enhanced fan-out (about 70 ms).
const defaultPropagationDelay = time.Second

// WithPropagationDelay sets how long Kinesis may take to make a stored record readable
// (default 1s). A read with an end (ReadBounded, WithMaxReadTime) finishes a shard only on a
// caught-up read sent at least d after the end, so that a record that arrived just before
// the end, and was not readable yet when the shard first looked caught up, is still read.
// Each shard of such a read runs d longer than its end; 0 ends it on the first caught-up
// read after the end. Every read uses it, ends or not: a caught-up read at t shows that the
// records that arrived before t minus d were read, which the retention check relies on.
func WithPropagationDelay(d time.Duration) ReadOption {
	return readOnly{option{name: "WithPropagationDelay", apply: func(c *config) error {
		if d < 0 {
			return fmt.Errorf("the propagation delay %v must not be negative", d)
		}
		c.read.propagationDelay = d
		return nil
	}}}
}

// WithMaxReadAheadBytes bounds the memory a worker holds for one read's read-ahead (default
// 64 MiB; a shard holds at most a quarter of it). While the runner works on one shard, every
// other polling shard the worker holds (a restriction it checkpointed, or one the runner
// sized before reading it) keeps fetching its next pages within the shard's read budget,
// stopping at the tip of the shard; the call that resumes the shard exactly where those
// pages start reads them without waiting, and any other call drops them (the
// readahead_dropped_* metrics count what that cost). Positions, the checkpoint table and the
// watermark are the same with or without it; the backlog adds the bytes held to the newest
// answer's MillisBehindLatest. The memory is estimated from the records (their data, keys,
// sequence numbers and about 120 bytes each beside); the Go heap may grow to about twice
// what is held before the collector runs (GOGC=100), so a worker short of memory sets
// GOMEMLIMIT or a smaller bound. The default's quarter per shard, 16 MiB, holds up to eight
// seconds of a shard's 2 MiB/s (about three for records of 100 B, whose keys and sequence
// numbers count too): a parked shard keeps its full rate while the runner spends that long
// on others. A restriction that a runner moves to another worker leaves its pages to expire
// unread after two minutes (readahead_expired); the new worker reads as it would without a
// read-ahead. With enhanced fan-out the same bound holds the events of the subscriptions a
// worker left open between calls: a parked subscription that nobody reads fills its
// connection's buffers (about 5 MiB) and the service stops sending, so its events are read
// into memory instead, and the call that continues the subscription reads them first.
func WithMaxReadAheadBytes(n int) ReadOption {
	return readOnly{option{name: "WithMaxReadAheadBytes", apply: func(c *config) error {
		if n < 1<<20 {
			return fmt.Errorf("the read-ahead bound %d is under 1 MiB (1048576), less than a GetRecords answer may hold; use WithoutReadAhead to turn it off", n)
		}
		c.read.readAheadBytes = int64(n)
		return nil
	}}}
}

// WithoutReadAhead turns the read-ahead off (see WithMaxReadAheadBytes): a shard fetches only
// while a call reads it, one answer ahead of the one being emitted, and keeps only its
// iterator between calls; with enhanced fan-out a parked subscription's events wait in its
// connection.
func WithoutReadAhead() ReadOption {
	return readOnly{option{name: "WithoutReadAhead", apply: func(c *config) error {
		c.read.readAheadBytes = 0
		return nil
	}}}
}

// eventTimeSpec is an EventTimeFn in a form that travels with a DoFn: its registered type
// key and its JSON encoding.
type eventTimeSpec struct {
	Type string
	JSON string
}

func encodeEventTimeFn(fn EventTimeFn) (eventTimeSpec, error) {
	t := reflect.TypeOf(fn)
	elem := t
	if elem.Kind() == reflect.Pointer {
		elem = elem.Elem()
	}
	key, ok := runtime.TypeKey(elem)
	if !ok {
		return eventTimeSpec{}, fmt.Errorf("type %v has no name; use a named struct type", t)
	}
	if _, ok := runtime.LookupType(key); !ok {
		return eventTimeSpec{}, fmt.Errorf("type %v is not registered; call beam.RegisterType(reflect.TypeOf((*%s)(nil)).Elem()) in an init function", elem, elem.Name())
	}
	b, err := json.Marshal(fn)
	if err != nil {
		return eventTimeSpec{}, fmt.Errorf("type %v does not serialise as JSON: %w", t, err)
	}
	if t.Kind() == reflect.Pointer {
		key = "*" + key
	}
	return eventTimeSpec{Type: key, JSON: string(b)}, nil
}

func (s eventTimeSpec) decode() (EventTimeFn, error) {
	key, ptr := s.Type, false
	if len(key) > 0 && key[0] == '*' {
		key, ptr = key[1:], true
	}
	t, ok := runtime.LookupType(key)
	if !ok {
		return nil, fmt.Errorf("kinesisio: event time function type %s is not registered in this binary", key)
	}
	v := reflect.New(t)
	if err := json.Unmarshal([]byte(s.JSON), v.Interface()); err != nil {
		return nil, fmt.Errorf("kinesisio: decoding event time function %s: %w", key, err)
	}
	if !ptr {
		v = v.Elem()
	}
	fn, ok := v.Interface().(EventTimeFn)
	if !ok {
		return nil, fmt.Errorf("kinesisio: type %s does not implement EventTimeFn", s.Type)
	}
	return fn, nil
}
