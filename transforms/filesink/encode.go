package filesink

import (
	"encoding/json"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.Function1x2(encodeJSON)
	register.Function2x3(EncodeJSONValue)
}

// EncodeJSON encodes each element of col with encoding/json into one line, a
// PCollection<string> ready for Write, in the same windows and with the same timestamps.
// encoding/json escapes line breaks inside strings, so a line never holds one. A nil
// pointer field is written as null: give a nullable field a pointer type (*string) so that
// an absent value stays distinct from an empty one. A value
// encoding/json rejects (e.g. a NaN float, a channel) fails the bundle.
func EncodeJSON(s beam.Scope, col beam.PCollection) beam.PCollection {
	s = s.Scope("filesink.EncodeJSON")
	return beam.ParDo(s, encodeJSON, col)
}

func encodeJSON(v beam.T) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("filesink: encoding %T as JSON: %w", v, err)
	}
	return string(b), nil
}

// EncodeJSONValue encodes the value of a key-value pair as EncodeJSON does, keeping the
// key: with beam.ParDo it turns a PCollection<KV<K, T>> into the PCollection<KV<K, string>>
// WritePerKey takes.
func EncodeJSONValue(k beam.X, v beam.T) (beam.X, string, error) {
	line, err := encodeJSON(v)
	return k, line, err
}
