package kinesistest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
)

// Wire constants of the JSON 1.1 protocol as aws-sdk-go-v2 speaks it.
const (
	jsonContentType = "application/x-amz-json-1.1"
	targetPrefix    = "Kinesis_20131202."
	headerRequestID = "x-amzn-RequestId" // set verbatim, as the service spells it
	headerErrorType = "X-Amzn-ErrorType"

	// maxBodyBytes bounds what the server reads of a request body: a 10 MiB
	// PutRecords request is about 13.4 MiB once its blobs are base64-encoded.
	maxBodyBytes = 16 << 20
)

// bufPool recycles request and response buffers; a PutRecords body is tens of
// kilobytes and the hot path handles thousands per second.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuf() *bytes.Buffer {
	b := bufPool.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuf(b *bytes.Buffer) {
	// Do not keep huge buffers (10 MiB GetRecords pages) alive in the pool.
	if b.Cap() > 4<<20 {
		return
	}
	bufPool.Put(b)
}

// decodeInput reads a request body into v. Operations without input send "{}"
// and an empty body is accepted too.
func decodeInput(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errorf(codeSerialization, "could not read the request body as JSON 1.1: %v", err)
	}
	return nil
}

// epochMillis is a timestamp in Unix milliseconds. On the wire it is a JSON
// number of epoch seconds with a millisecond fraction, e.g. 1700000000.123.
type epochMillis int64

// MarshalJSON writes the timestamp as epoch seconds with three decimals.
func (t epochMillis) MarshalJSON() ([]byte, error) {
	ms := int64(t)
	b := make([]byte, 0, 24)
	if ms < 0 {
		b = append(b, '-')
		ms = -ms
	}
	b = strconv.AppendInt(b, ms/1000, 10)
	frac := ms % 1000
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return b, nil
}

// UnmarshalJSON reads epoch seconds, integral or fractional, rounding to the
// millisecond, the precision the service keeps.
func (t *epochMillis) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("timestamp %s is not a number of epoch seconds", b)
	}
	*t = epochMillis(math.Round(f * 1000))
	return nil
}

// regionFromAuthorization returns the region of a SigV4 Authorization header's
// credential scope (Credential=AKID/date/REGION/service/aws4_request), so ARNs
// in responses carry the region the client believes it talks to.
func regionFromAuthorization(h string) string {
	_, rest, ok := strings.Cut(h, "Credential=")
	if !ok {
		return ""
	}
	scope, _, _ := strings.Cut(rest, ",")
	parts := strings.Split(scope, "/")
	if len(parts) < 3 || parts[2] == "" {
		return ""
	}
	return parts[2]
}

// newRequestID returns a random UUID-shaped request id. The ids only need to
// be distinct in logs, so math/rand is enough.
func newRequestID() string {
	var b [16]byte
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := 0; i < 8; i++ {
		b[i] = byte(hi >> (56 - 8*i))
		b[8+i] = byte(lo >> (56 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hexDigits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexDigits[c>>4], hexDigits[c&0x0f])
	}
	return string(out)
}

// Shapes shared by several operations' output. Member names are the model's.

type hashKeyRangeJSON struct {
	StartingHashKey string
	EndingHashKey   string
}

type sequenceNumberRangeJSON struct {
	StartingSequenceNumber string
	EndingSequenceNumber   string `json:",omitempty"`
}

type shardJSON struct {
	ShardId               string //nolint:revive // the model's member name
	ParentShardId         string `json:",omitempty"` //nolint:revive
	AdjacentParentShardId string `json:",omitempty"` //nolint:revive
	HashKeyRange          hashKeyRangeJSON
	SequenceNumberRange   sequenceNumberRangeJSON
}

type streamModeDetailsJSON struct {
	StreamMode string
}

type enhancedMetricsJSON struct {
	ShardLevelMetrics []string
}

// shardShape is sh as the service describes it. Caller holds the stream's
// read lock.
func shardShape(sh *shard) shardJSON {
	return shardJSON{
		ShardId:               sh.id,
		ParentShardId:         sh.parentID,
		AdjacentParentShardId: sh.adjacentParentID,
		HashKeyRange:          hashKeyRangeJSON{StartingHashKey: sh.startKey, EndingHashKey: sh.endKey},
		SequenceNumberRange:   sequenceNumberRangeJSON{StartingSequenceNumber: sh.startSeq, EndingSequenceNumber: sh.endSeq},
	}
}
