package kinesisio

import (
	"math/rand/v2"
	"reflect"
	"strconv"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Message)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*FailedMessage)(nil)).Elem())
	register.DoFn2x0[[]byte, func(Message)](&bytesToMessageFn{})
	register.DoFn2x0[string, func(Message)](&stringToMessageFn{})
	register.DoFn2x0[[]byte, func(Message)](&bytesRandomKeyFn{})
	register.DoFn2x0[string, func(Message)](&stringRandomKeyFn{})
	register.Emitter1[Message]()
}

// Message is one record to write with Write. All fields are exported so that Beam's schema
// coder encodes them.
type Message struct {
	// PartitionKey decides the shard (by its MD5 hash) unless ExplicitHashKey is set, and
	// groups records for ordering. 1 to 256 characters; it may be empty only on a stream
	// that distributes records itself (RecordDistributionStrategy AUTO), which ignores it.
	PartitionKey string
	// ExplicitHashKey, when set, is the decimal 128-bit hash key that decides the shard
	// instead of the partition key's hash.
	ExplicitHashKey string
	// Data is the payload. Partition key plus data must fit in the stream's record size
	// limit: 1 MiB unless raised with UpdateMaxRecordSize (up to 10 MiB), as Write reads it
	// from DescribeStreamSummary's MaxRecordSizeInKiB. Empty data is allowed, nil or not: a
	// nil Data crosses a Java runner (Flink, Dataflow) as an empty one (rowcoder.go).
	Data []byte
}

// FailedMessage is a message Write could not write, with why.
type FailedMessage struct {
	Message
	// Reason says what went wrong, for people.
	Reason string
	// ErrorCode is the service's error code for the last attempt (for example
	// "ProvisionedThroughputExceededException" or "InternalFailure"), or "InvalidMessage"
	// for a message the service would refuse, which is never sent.
	ErrorCode string
	// Attempts is how many PutRecords calls carried the message (0 for an invalid one).
	Attempts int
}

// ErrorCodeInvalidMessage is the ErrorCode of a FailedMessage that was never sent because
// the service would refuse it: an empty or too long partition key, a malformed explicit hash
// key, or a record over the stream's record size limit (see Write).
const ErrorCodeInvalidMessage = "InvalidMessage"

// MessagesFromBytes turns a PCollection<[]byte> into a PCollection<Message> keyed by keyFn.
// keyFn is serialised into the pipeline by name, so it must be a top-level function
// registered in an init function with register.Function1x1[[]byte, string](keyFn); closures
// cannot cross Beam's boundaries.
func MessagesFromBytes(s beam.Scope, col beam.PCollection, keyFn func([]byte) string) beam.PCollection {
	s = s.Scope("kinesisio.MessagesFromBytes")
	return beam.ParDo(s, &bytesToMessageFn{KeyFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(keyFn)}}, col)
}

// MessagesFromStrings turns a PCollection<string> into a PCollection<Message> whose data
// is each string's bytes, keyed by keyFn. keyFn must be a top-level function registered
// with register.Function1x1[string, string](keyFn) (see MessagesFromBytes).
func MessagesFromStrings(s beam.Scope, col beam.PCollection, keyFn func(string) string) beam.PCollection {
	s = s.Scope("kinesisio.MessagesFromStrings")
	return beam.ParDo(s, &stringToMessageFn{KeyFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(keyFn)}}, col)
}

// MessagesWithRandomKeys turns a PCollection<[]byte> or PCollection<string> into a
// PCollection<Message> with a random partition key per element, spreading records evenly
// over the shards without any ordering (the Spark connectors' CAST(rand() AS STRING)).
func MessagesWithRandomKeys(s beam.Scope, col beam.PCollection) beam.PCollection {
	s = s.Scope("kinesisio.MessagesWithRandomKeys")
	switch t := col.Type().Type(); t {
	case reflectx.ByteSlice:
		return beam.ParDo(s, &bytesRandomKeyFn{}, col)
	case reflectx.String:
		return beam.ParDo(s, &stringRandomKeyFn{}, col)
	default:
		panic("kinesisio.MessagesWithRandomKeys: the input must be a PCollection of []byte or string, got " + t.String())
	}
}

// randomKey is a random partition key: 64 random bits in decimal, so MD5 spreads keys
// uniformly over the hash key space while keys stay short (they count against throughput).
func randomKey() string { return strconv.FormatUint(rand.Uint64(), 10) }

type bytesToMessageFn struct {
	KeyFn beam.EncodedFunc `json:"keyFn"`
	fn    reflectx.Func1x1
}

func (f *bytesToMessageFn) Setup() { f.fn = reflectx.ToFunc1x1(f.KeyFn.Fn) }

func (f *bytesToMessageFn) ProcessElement(data []byte, emit func(Message)) {
	emit(Message{PartitionKey: f.fn.Call1x1(data).(string), Data: orEmpty(data)})
}

type stringToMessageFn struct {
	KeyFn beam.EncodedFunc `json:"keyFn"`
	fn    reflectx.Func1x1
}

func (f *stringToMessageFn) Setup() { f.fn = reflectx.ToFunc1x1(f.KeyFn.Fn) }

func (f *stringToMessageFn) ProcessElement(data string, emit func(Message)) {
	emit(Message{PartitionKey: f.fn.Call1x1(data).(string), Data: orEmpty([]byte(data))})
}

type bytesRandomKeyFn struct{}

func (bytesRandomKeyFn) ProcessElement(data []byte, emit func(Message)) {
	emit(Message{PartitionKey: randomKey(), Data: orEmpty(data)})
}

type stringRandomKeyFn struct{}

func (stringRandomKeyFn) ProcessElement(data string, emit func(Message)) {
	emit(Message{PartitionKey: randomKey(), Data: orEmpty([]byte(data))})
}
