package kinesisio

import (
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
)

// Record, Message and FailedMessage keep Beam's schema (row) coder, with the schema Go
// infers from their fields, so that other SDKs can read them. But Go's row encoder writes a
// nil []byte as a null field of a schema that declares it non-nullable, and Beam Java's
// RowCoder re-encodes that null without its null bit: a Java runner (Flink, Dataflow) that
// transcodes the value between stages hands the next Go stage bytes it cannot decode. So the
// row encoders registered here write a nil Data as an empty one, byte for byte what the
// default encoder writes for []byte{}; every other value is encoded exactly as before. A
// value decodes with an empty, non-nil Data. FailedMessage needs nothing of its own: the row
// encoder uses Message's for its embedded Message.
func init() {
	registerRowCoder(func(r Record) recordRow { r.Data = orEmpty(r.Data); return recordRow(r) }, func(w recordRow) Record { return Record(w) })
	registerRowCoder(func(m Message) messageRow { m.Data = orEmpty(m.Data); return messageRow(m) }, func(w messageRow) Message { return Message(w) })
}

// recordRow and messageRow have the fields of Record and Message, so their default row
// encoding is the schema Go infers for those types; they exist only to reach that encoding
// from inside the encoders registered for the types themselves.
type (
	recordRow struct {
		StreamName                  string
		ShardID                     string
		PartitionKey                string
		ExplicitHashKey             string
		SequenceNumber              string
		SubSequenceNumber           int64
		ApproximateArrivalTimestamp time.Time
		Data                        []byte
		Aggregated                  bool
	}
	messageRow struct {
		PartitionKey    string
		ExplicitHashKey string
		Data            []byte
	}
)

// registerRowCoder makes Beam's row coder encode a T as its row twin W, converted by toRow,
// and decode W back with fromRow.
func registerRowCoder[T, W any](toRow func(T) W, fromRow func(W) T) {
	rowType := reflect.TypeFor[W]()
	enc := func(rt reflect.Type) (func(any, io.Writer) error, error) {
		encode, err := coder.RowEncoderForStruct(rowType)
		if err != nil {
			return nil, fmt.Errorf("kinesisio: the row encoder of %v: %w", rt, err)
		}
		return func(v any, w io.Writer) error { return encode(toRow(v.(T)), w) }, nil
	}
	dec := func(rt reflect.Type) (func(io.Reader) (any, error), error) {
		decode, err := coder.RowDecoderForStruct(rowType)
		if err != nil {
			return nil, fmt.Errorf("kinesisio: the row decoder of %v: %w", rt, err)
		}
		return func(r io.Reader) (any, error) {
			v, err := decode(r)
			if err != nil {
				return nil, err
			}
			return fromRow(v.(W)), nil
		}, nil
	}
	coder.RegisterSchemaProviders(reflect.TypeFor[T](), enc, dec)
}
