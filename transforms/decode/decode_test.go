package decode

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*event)(nil)).Elem())
	register.Function2x1(formatKeyed)
}

// event is the seed's staging schema: {"id": ..., "ts": ..., "v": ...}.
type event struct {
	ID string `json:"id"`
	TS int64  `json:"ts"`
	V  string `json:"v"`
}

// unregistered is a struct type that is deliberately never registered with Beam.
type unregistered struct {
	A string `json:"a"`
}

// TestMain runs the package's pipeline tests on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	ptest.Main(m)
}

var arrival = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func rec(seq string, data string) kinesisio.Record {
	return kinesisio.Record{
		StreamName:                  "events",
		ShardID:                     "shardId-000000000000",
		PartitionKey:                "pk",
		SequenceNumber:              seq,
		ApproximateArrivalTimestamp: arrival,
		Data:                        []byte(data),
	}
}

func TestStringDecodesValidUTF8AndDeadLettersInvalid(t *testing.T) {
	good1 := rec("1", "Kinesis Connector")
	good2 := rec("2", "héllo ✓ \uFFFD") // a literal U+FFFD is valid UTF-8
	empty := rec("3", "")
	bad := rec("4", "ab\xffcd")
	truncated := rec("5", "x\xe2\x9c") // first two bytes of ✓

	p, s := beam.NewPipelineWithRoot()
	texts, dead := String(s, beam.Create(s, good1, good2, empty, bad, truncated))
	passert.Equals(s, texts, "Kinesis Connector", "héllo ✓ \uFFFD", "")
	passert.Equals(s, dead,
		DeadLetter{Record: bad, Stage: StageUTF8, Error: "invalid UTF-8 at byte 2 of 5"},
		DeadLetter{Record: truncated, Stage: StageUTF8, Error: "invalid UTF-8 at byte 1 of 3"},
	)
	ptest.RunAndValidate(t, p)
}

func TestJSONDecodesSchemaAndDeadLettersMalformed(t *testing.T) {
	ok := rec("1", `{"id":"a","ts":1700000000000,"v":"x"}`)
	okSpaces := rec("2", " \n{\"id\":\"b\",\"ts\":2}\n")
	extraField := rec("3", `{"id":"c","ts":3,"v":"y","extra":true}`)
	wrongType := rec("4", `{"id":"d","ts":"soon"}`)
	notObject := rec("5", `["id","e"]`)
	null := rec("6", `null`)
	empty := rec("7", ``)
	trailing := rec("8", `{"id":"f"} {"id":"g"}`)
	truncated := rec("9", `{"id":"h"`)
	badUTF8 := rec("10", "{\"id\":\"\xff\"}")

	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, ok, okSpaces, extraField, wrongType, notObject, null, empty, trailing, truncated, badUTF8)
	values, dead := JSON(s, in, reflect.TypeOf(event{}), JSONOptions{})
	passert.Equals(s, values,
		event{ID: "a", TS: 1700000000000, V: "x"},
		event{ID: "b", TS: 2},
		event{ID: "c", TS: 3, V: "y"},
	)
	passert.Equals(s, dead,
		DeadLetter{Record: wrongType, Stage: StageJSON, Error: "decoding JSON into decode.event: json: cannot unmarshal string into Go struct field event.ts of type int64"},
		DeadLetter{Record: notObject, Stage: StageJSON, Error: `payload starts with '[', want a JSON object`},
		DeadLetter{Record: null, Stage: StageJSON, Error: `payload starts with 'n', want a JSON object`},
		DeadLetter{Record: empty, Stage: StageJSON, Error: "empty payload, want a JSON object"},
		DeadLetter{Record: trailing, Stage: StageJSON, Error: "trailing data after the JSON object"},
		DeadLetter{Record: truncated, Stage: StageJSON, Error: "decoding JSON into decode.event: unexpected EOF"},
		DeadLetter{Record: badUTF8, Stage: StageUTF8, Error: "invalid UTF-8 at byte 7 of 10"},
	)
	ptest.RunAndValidate(t, p)
}

func TestJSONStrictOptionsRejectUnknownAndMissingFields(t *testing.T) {
	ok := rec("1", `{"id":"a","ts":1,"v":"x"}`)
	noV := rec("2", `{"id":"b","ts":2}`) // v is optional
	extraField := rec("3", `{"id":"c","ts":3,"extra":1}`)
	missingID := rec("4", `{"ts":4}`)
	nullTS := rec("5", `{"id":"e","ts":null}`)
	wrongCase := rec("6", `{"ID":"f","ts":6}`)

	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, ok, noV, extraField, missingID, nullTS, wrongCase)
	values, dead := JSON(s, in, reflect.TypeOf(event{}), JSONOptions{
		DisallowUnknownFields: true,
		Required:              []string{"id", "ts"},
	})
	passert.Equals(s, values, event{ID: "a", TS: 1, V: "x"}, event{ID: "b", TS: 2})
	passert.Equals(s, dead,
		DeadLetter{Record: extraField, Stage: StageJSON, Error: `decoding JSON into decode.event: json: unknown field "extra"`},
		DeadLetter{Record: missingID, Stage: StageJSON, Error: `required key "id" is missing`},
		DeadLetter{Record: nullTS, Stage: StageJSON, Error: `required key "ts" is null`},
		DeadLetter{Record: wrongCase, Stage: StageJSON, Error: `required key "id" is missing`},
	)
	ptest.RunAndValidate(t, p)
}

func TestJSONPanicsAtConstructionOnBadSchema(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		opts JSONOptions
		want string
	}{
		{"nil type", nil, JSONOptions{}, "schema type is nil"},
		{"pointer", reflect.TypeOf(&event{}), JSONOptions{}, "want a struct type (not a pointer)"},
		{"not registered", reflect.TypeOf(unregistered{}), JSONOptions{}, "is not registered; call beam.RegisterType"},
		{"unknown required key", reflect.TypeOf(event{}), JSONOptions{Required: []string{"ID"}}, `required key "ID" names no field of decode.event (JSON field names: id, ts, v)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.HasPrefix(msg, "decode.JSON: ") || !strings.Contains(msg, tc.want) {
					t.Errorf("panic = %v, want a decode.JSON panic containing %q", r, tc.want)
				}
			}()
			_, s := beam.NewPipelineWithRoot()
			JSON(s, beam.Create(s, rec("1", "{}")), tc.typ, tc.opts)
		})
	}
}

func TestJSONByShardKeysValuesByTheirRecordsShard(t *testing.T) {
	a := rec("1", `{"id":"a","ts":1}`)
	b := rec("2", `{"id":"b","ts":2}`)
	b.ShardID = "shardId-000000000003"
	bad := rec("3", `{"id":`)
	bad.ShardID = "shardId-000000000003"

	p, s := beam.NewPipelineWithRoot()
	values, dead := JSONByShard(s, beam.Create(s, a, b, bad), reflect.TypeOf(event{}), JSONOptions{Required: []string{"ts"}})
	passert.Equals(s, beam.ParDo(s, formatKeyed, values), "shardId-000000000000 a", "shardId-000000000003 b")
	passert.Equals(s, dead, DeadLetter{Record: bad, Stage: StageJSON, Error: "decoding JSON object: unexpected end of JSON input"})
	ptest.RunAndValidate(t, p)
}

// formatKeyed is a keyed event as "<key> <id>".
func formatKeyed(k string, e event) string { return k + " " + e.ID }
