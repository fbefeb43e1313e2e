package kinesistest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The binary event-stream framing SubscribeToShard responses use
// (application/vnd.amazon.eventstream). Each message is
//
//	total length   uint32, the whole message including both CRCs
//	headers length uint32
//	prelude CRC    CRC-32 (IEEE) of the 8 bytes above
//	headers        name length (1 byte), name, value type (1 byte), value
//	payload
//	message CRC    CRC-32 (IEEE) of every byte before it
//
// The server only sends string headers (value type 7: uint16 length, bytes),
// so that is all this encoder writes.

const (
	eventStreamContentType = "application/vnd.amazon.eventstream"

	headerTypeString = 7
	// maxHeaderValueLen is the largest header value the SDKs accept.
	maxHeaderValueLen = 1<<15 - 1
)

// Header names and values of the frames the server sends.
const (
	hdrMessageType   = ":message-type"
	hdrEventType     = ":event-type"
	hdrExceptionType = ":exception-type"
	hdrContentType   = ":content-type"

	msgTypeEvent     = "event"
	msgTypeException = "exception"

	eventInitialResponse  = "initial-response"
	eventSubscribeToShard = "SubscribeToShardEvent"
)

// frameHeader is one string header of an event-stream message.
type frameHeader struct {
	name, value string
}

// appendFrame appends one encoded event-stream message to dst. It fails only
// on header names or values too long for the format, which would be a bug in
// the server.
func appendFrame(dst []byte, headers []frameHeader, payload []byte) ([]byte, error) {
	headersLen := 0
	for _, h := range headers {
		if len(h.name) == 0 || len(h.name) > 255 {
			return dst, fmt.Errorf("event-stream header name %q must have 1 to 255 bytes", h.name)
		}
		if len(h.value) > maxHeaderValueLen {
			return dst, fmt.Errorf("event-stream header %s: value of %d bytes exceeds %d", h.name, len(h.value), maxHeaderValueLen)
		}
		headersLen += 1 + len(h.name) + 1 + 2 + len(h.value)
	}
	total := 12 + headersLen + len(payload) + 4
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(total))
	dst = binary.BigEndian.AppendUint32(dst, uint32(headersLen))
	dst = binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:start+8]))
	for _, h := range headers {
		dst = append(dst, byte(len(h.name)))
		dst = append(dst, h.name...)
		dst = append(dst, headerTypeString)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.value)))
		dst = append(dst, h.value...)
	}
	dst = append(dst, payload...)
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:])), nil
}

// initialResponseFrame is the first message of every subscription. Since
// v1.55.0 aws-sdk-go-v2 fails the call unless the first frame's :event-type is
// initial-response; older releases also require :message-type, so both are
// sent. The payload is the (empty) SubscribeToShardOutput.
func initialResponseFrame(c codec) ([]byte, error) {
	payload := []byte("{}")
	if c.cbor {
		payload = []byte{0xa0} // an empty map
	}
	return appendFrame(nil, []frameHeader{
		{hdrMessageType, msgTypeEvent},
		{hdrEventType, eventInitialResponse},
		{hdrContentType, c.contentType()},
	}, payload)
}

// eventPayloadType is the :content-type of event and exception frames.
func eventPayloadType(c codec) string {
	if c.cbor {
		return cborContentType
	}
	return "application/json"
}

// eventFrame wraps the encoded payload of one SubscribeToShardEvent.
func eventFrame(dst, payload []byte, c codec) ([]byte, error) {
	return appendFrame(dst, []frameHeader{
		{hdrMessageType, msgTypeEvent},
		{hdrEventType, eventSubscribeToShard},
		{hdrContentType, eventPayloadType(c)},
	}, payload)
}

// exceptionFrame carries a modeled error of the event stream, such as
// ResourceInUseException; the SDK turns it into its typed error and ends the
// stream with it.
func exceptionFrame(c codec, code, message string) ([]byte, error) {
	payload, err := c.marshal(struct {
		Message string `json:"message"`
	}{message})
	if err != nil {
		return nil, fmt.Errorf("encoding the %s exception: %w", code, err)
	}
	return appendFrame(nil, []frameHeader{
		{hdrMessageType, msgTypeException},
		{hdrExceptionType, code},
		{hdrContentType, eventPayloadType(c)},
	}, payload)
}
