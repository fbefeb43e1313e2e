// Package decode turns Kinesis records into strings and typed values. A record that cannot
// be decoded goes, unchanged, to a dead-letter output with the reason; nothing is dropped
// silently and nothing is repaired (invalid UTF-8 is never replaced by U+FFFD).
package decode

import (
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*DeadLetter)(nil)).Elem())
	register.DoFn3x0[kinesisio.Record, func(string), func(DeadLetter)](&stringFn{})
	register.Emitter1[string]()
	register.Emitter1[DeadLetter]()
}

// Stages name the step that rejected a record, in DeadLetter.Stage.
const (
	// StageUTF8 means the record's data is not valid UTF-8.
	StageUTF8 = "utf8"
	// StageJSON means the record's data is valid UTF-8 but not a JSON object matching the
	// declared schema.
	StageJSON = "json"
)

// DeadLetter is a record that could not be decoded, with the step that rejected it and why.
// All fields are exported so that Beam's schema coder encodes it; the JSON tags let a
// pipeline write dead letters as JSON lines (Data is then base64, as encoding/json does
// for []byte).
type DeadLetter struct {
	// Record is the record exactly as read, identity and data included.
	Record kinesisio.Record `json:"record"`
	// Stage is the step that rejected the record: StageUTF8 or StageJSON.
	Stage string `json:"stage"`
	// Error says why the record was rejected.
	Error string `json:"error"`
}

// String decodes each record's Data as UTF-8 text. It returns the strings, in the records'
// windows and with their timestamps, and the records whose data is not valid UTF-8 as
// dead letters with Stage StageUTF8.
//
// recs is a PCollection<kinesisio.Record>; the results are a PCollection<string> and a
// PCollection<DeadLetter>.
func String(s beam.Scope, recs beam.PCollection) (texts, deadLetters beam.PCollection) {
	s = s.Scope("decode.String")
	return beam.ParDo2(s, &stringFn{}, recs)
}

// stringFn emits a record's data as a string when it is valid UTF-8.
type stringFn struct{}

func (fn *stringFn) ProcessElement(r kinesisio.Record, emit func(string), dead func(DeadLetter)) {
	if err := checkUTF8(r.Data); err != nil {
		dead(DeadLetter{Record: r, Stage: StageUTF8, Error: err.Error()})
		return
	}
	emit(string(r.Data))
}

// checkUTF8 reports the offset of the first byte that is not part of a valid UTF-8 sequence.
func checkUTF8(b []byte) error {
	if utf8.Valid(b) {
		return nil
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Errorf("invalid UTF-8 at byte %d of %d", i, len(b))
		}
		i += size
	}
	return fmt.Errorf("invalid UTF-8 in %d bytes", len(b)) // unreachable: utf8.Valid disagreed
}
