package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func init() {
	register.DoFn3x0[kinesisio.Record, func(beam.Y), func(DeadLetter)](&jsonFn{})
	register.DoFn3x0[kinesisio.Record, func(string, beam.Y), func(DeadLetter)](&jsonByShardFn{})
	register.Emitter1[beam.Y]()
	register.Emitter2[string, beam.Y]()
}

// JSONOptions configures JSON. The zero value accepts any JSON object whose known fields
// decode into the schema type.
type JSONOptions struct {
	// DisallowUnknownFields rejects an object with a key that matches no field of the
	// schema type (encoding/json's Decoder.DisallowUnknownFields).
	DisallowUnknownFields bool
	// Required lists top-level JSON keys that must be present and not null. Keys are
	// matched exactly (encoding/json itself matches field names case-insensitively, a
	// required key does not). Each must name a field of the schema type.
	Required []string
}

// JSON decodes each record's Data as one JSON object into a value of schemaType, a struct
// type that the pipeline registered with beam.RegisterType in an init function (remote
// workers map elements back to Go types only through that registry). It returns the
// decoded values, in the records' windows and with their timestamps, and the records that
// failed as dead letters: Stage StageUTF8 for data that is not valid UTF-8 (encoding/json
// would silently replace such bytes), StageJSON for anything else — not a single JSON
// object, a value of the wrong type, an unknown field when DisallowUnknownFields is set, a
// missing or null required key.
//
// recs is a PCollection<kinesisio.Record>; the results are a PCollection of schemaType and
// a PCollection<DeadLetter>. JSON panics at construction if schemaType is not a registered
// struct type or a required key names no field.
func JSON(s beam.Scope, recs beam.PCollection, schemaType reflect.Type, opts JSONOptions) (values, deadLetters beam.PCollection) {
	s = s.Scope("decode.JSON")
	fn := &jsonFn{newJSONDecoder("decode.JSON", schemaType, opts)}
	return beam.ParDo2(s, fn, recs, beam.TypeDefinition{Var: beam.YType, T: schemaType})
}

// newJSONDecoder is the decoding set-up of JSON and JSONByShard; it panics, naming the
// transform, if schemaType or opts are invalid.
func newJSONDecoder(transform string, schemaType reflect.Type, opts JSONOptions) jsonDecoder {
	if err := validateSchema(schemaType, opts); err != nil {
		panic(fmt.Sprintf("%s: %v", transform, err))
	}
	return jsonDecoder{
		Type:                  beam.EncodedType{T: schemaType},
		DisallowUnknownFields: opts.DisallowUnknownFields,
		Required:              append([]string(nil), opts.Required...),
	}
}

// validateSchema checks what JSON needs to know about the schema type at construction.
func validateSchema(t reflect.Type, opts JSONOptions) error {
	if t == nil {
		return errors.New("schema type is nil; pass reflect.TypeOf(MyEvent{})")
	}
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("schema type %v is a %v, want a struct type (not a pointer)", t, t.Kind())
	}
	key, ok := runtime.TypeKey(t)
	if !ok {
		return fmt.Errorf("schema type %v must be a named struct type", t)
	}
	if _, ok := runtime.LookupType(key); !ok {
		return fmt.Errorf("schema type %v is not registered; call beam.RegisterType(reflect.TypeOf((*%s)(nil)).Elem()) in an init function", t, t.Name())
	}
	fields := jsonFieldNames(t)
	for _, k := range opts.Required {
		if !fields[k] {
			return fmt.Errorf("required key %q names no field of %v (JSON field names: %s)", k, t, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
		}
	}
	return nil
}

// jsonFieldNames returns the top-level JSON keys encoding/json maps to t's exported fields.
func jsonFieldNames(t reflect.Type) map[string]bool {
	names := make(map[string]bool)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names[name] = true
	}
	return names
}

// jsonDecoder decodes a record's data into a value of Type; the DoFns embed it.
type jsonDecoder struct {
	Type                  beam.EncodedType
	DisallowUnknownFields bool
	Required              []string
}

// decode decodes r's data, or sends r to dead with the reason.
func (d jsonDecoder) decode(r kinesisio.Record, dead func(DeadLetter)) (any, bool) {
	if err := checkUTF8(r.Data); err != nil {
		dead(DeadLetter{Record: r, Stage: StageUTF8, Error: err.Error()})
		return nil, false
	}
	v, err := decodeObject(r.Data, d.Type.T, d.DisallowUnknownFields, d.Required)
	if err != nil {
		dead(DeadLetter{Record: r, Stage: StageJSON, Error: err.Error()})
		return nil, false
	}
	return v, true
}

// jsonFn decodes a record's data into a value of Type.
type jsonFn struct {
	jsonDecoder
}

func (fn *jsonFn) ProcessElement(r kinesisio.Record, emit func(beam.Y), dead func(DeadLetter)) {
	if v, ok := fn.decode(r, dead); ok {
		emit(v)
	}
}

// JSONByShard is JSON with each decoded value keyed by the ID of the shard its record was
// read from: values is a PCollection<KV<string, schemaType>>. It is for sinks that keep
// each shard's records apart (filesink.WriteParquetPerKey), which a restart from a
// checkpoint table needs to rewrite a file exactly: the table resumes each shard on its own.
// Dead letters are as JSON's; their Record names the shard.
func JSONByShard(s beam.Scope, recs beam.PCollection, schemaType reflect.Type, opts JSONOptions) (values, deadLetters beam.PCollection) {
	s = s.Scope("decode.JSONByShard")
	fn := &jsonByShardFn{newJSONDecoder("decode.JSONByShard", schemaType, opts)}
	return beam.ParDo2(s, fn, recs, beam.TypeDefinition{Var: beam.YType, T: schemaType})
}

// jsonByShardFn decodes a record's data into a value of Type keyed by the record's shard.
type jsonByShardFn struct {
	jsonDecoder
}

func (fn *jsonByShardFn) ProcessElement(r kinesisio.Record, emit func(string, beam.Y), dead func(DeadLetter)) {
	if v, ok := fn.decode(r, dead); ok {
		emit(r.ShardID, v)
	}
}

// decodeObject decodes data, which must hold exactly one JSON object, into a new value of t.
func decodeObject(data []byte, t reflect.Type, disallowUnknown bool, required []string) (any, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, errors.New("empty payload, want a JSON object")
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("payload starts with %q, want a JSON object", trimmed[0])
	}
	if len(required) > 0 {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(data, &keys); err != nil {
			return nil, fmt.Errorf("decoding JSON object: %w", err)
		}
		for _, k := range required {
			raw, ok := keys[k]
			if !ok {
				return nil, fmt.Errorf("required key %q is missing", k)
			}
			if string(raw) == "null" {
				return nil, fmt.Errorf("required key %q is null", k)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if disallowUnknown {
		dec.DisallowUnknownFields()
	}
	ptr := reflect.New(t)
	if err := dec.Decode(ptr.Interface()); err != nil {
		return nil, fmt.Errorf("decoding JSON into %v: %w", t, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON object")
	}
	return ptr.Elem().Interface(), nil
}
