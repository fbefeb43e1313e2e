package kinesistest

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/fxamacker/cbor/v2"
)

// The CBOR protocol (application/x-amz-cbor-1.1) the Java SDKs use by
// default: the JSON 1.1 protocol's envelope (POST /, X-Amz-Target, the same
// member names and error codes) with the bodies in CBOR instead of JSON.
// Blobs are byte strings and timestamps are tag 1 (epoch) wrapping an
// integer number of milliseconds, as the Java SDKs write them (their CBOR
// generator writes the tag over Instant.toEpochMilli()); a floating-point
// value under the tag is read as seconds, as RFC 8949 defines tag 1.

const cborContentType = "application/x-amz-cbor-1.1"

// cborTagEpoch is CBOR tag 1, epoch-based date/time.
const cborTagEpoch = 1

var (
	cborEnc cbor.EncMode
	cborDec cbor.DecMode
)

func init() {
	var err error
	// Shortest float encoding keeps 0.5 and friends small; maps keep the
	// struct's field order, which is what the service's JSON looks like too.
	cborEnc, err = cbor.EncOptions{ShortestFloat: cbor.ShortestFloat16}.EncMode()
	if err != nil {
		panic("kinesistest: CBOR encoder options: " + err.Error())
	}
	cborDec, err = cbor.DecOptions{
		MaxArrayElements: 1 << 20,
		MaxMapPairs:      1 << 20,
		// Strings must arrive as text strings, which the decoder checks are
		// valid UTF-8 (as the service, whose members are Unicode strings,
		// requires). The Java SDKs write them so; a byte string where a string
		// is expected could carry any bytes into stream names, partition keys
		// and the messages that echo them, so it is a SerializationException.
		ByteStringToString: cbor.ByteStringToStringForbidden,
	}.DecMode()
	if err != nil {
		panic("kinesistest: CBOR decoder options: " + err.Error())
	}
}

// codec encodes and decodes the bodies of one request's protocol.
type codec struct{ cbor bool }

// codecFor returns the codec a request's Content-Type asks for.
func codecFor(contentType string) codec {
	return codec{cbor: strings.HasPrefix(strings.TrimSpace(strings.ToLower(contentType)), cborContentType)}
}

// contentType is the media type of bodies in this protocol.
func (c codec) contentType() string {
	if c.cbor {
		return cborContentType
	}
	return jsonContentType
}

// decode reads a request body into v. Operations without input send "{}" (or
// an empty CBOR map) and an empty body is accepted too.
func (c codec) decode(body []byte, v any) error {
	if !c.cbor {
		return decodeInput(body, v)
	}
	if len(body) == 0 {
		return nil
	}
	if err := cborDec.Unmarshal(body, v); err != nil {
		return errorf(codeSerialization, "could not read the request body as CBOR (%s): %v", cborContentType, err)
	}
	return nil
}

// encode appends v's encoding to buf.
func (c codec) encode(buf *bytes.Buffer, v any) error {
	if !c.cbor {
		enc := newJSONEncoder(buf)
		return enc.Encode(v)
	}
	return cborEnc.NewEncoder(buf).Encode(v)
}

// marshal returns v's encoding, without JSON's trailing newline.
func (c codec) marshal(v any) ([]byte, error) {
	if !c.cbor {
		return jsonMarshal(v)
	}
	return cborEnc.Marshal(v)
}

// MarshalCBOR writes the timestamp as tag 1 over epoch milliseconds, as the
// Java SDKs expect it.
func (t epochMillis) MarshalCBOR() ([]byte, error) {
	return cborEnc.Marshal(cbor.Tag{Number: cborTagEpoch, Content: int64(t)})
}

// UnmarshalCBOR reads a timestamp: tag 1 over an integer (milliseconds, the
// Java SDKs' convention) or a float (seconds), or the number alone.
func (t *epochMillis) UnmarshalCBOR(b []byte) error {
	var raw cbor.RawTag
	content := cbor.RawMessage(b)
	if len(b) > 0 && b[0]>>5 == 6 { // major type 6: a tag
		if err := cborDec.Unmarshal(b, &raw); err != nil {
			return fmt.Errorf("reading a timestamp: %w", err)
		}
		if raw.Number != cborTagEpoch {
			return fmt.Errorf("timestamp has CBOR tag %d, want 1 (epoch)", raw.Number)
		}
		content = raw.Content
	}
	var v any
	if err := cborDec.Unmarshal(content, &v); err != nil {
		return fmt.Errorf("reading a timestamp: %w", err)
	}
	switch n := v.(type) {
	case nil:
	case uint64:
		if n > math.MaxInt64 {
			return fmt.Errorf("timestamp %d is out of range", n)
		}
		*t = epochMillis(n)
	case int64:
		*t = epochMillis(n)
	case float64:
		*t = epochMillis(math.Round(n * 1000))
	default:
		return fmt.Errorf("timestamp is a CBOR %T, want an epoch number", v)
	}
	return nil
}
