package kpl

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Deaggregate splits Kinesis record data into the user records of a KPL
// aggregate, in order; a user record's position in the result is its
// sub-sequence number.
//
// It follows the Kinesis Client Library (KCL 2.x AggregatorUtil): data is
// "not aggregated" — Deaggregate returns (nil, false, nil) and the caller
// passes the Kinesis record through as one user record — when it is shorter
// than 4 bytes, does not start with [Magic], has 16 bytes or fewer after the
// magic, fails the MD5 check, or its body does not parse as the KPL's proto2
// AggregatedRecord. As in proto2, parsing fails when a Record lacks its
// required partition_key_index or data, or a Tag lacks its key; a known field
// with an unexpected wire type and unknown fields are skipped, and tags are
// ignored.
//
// A body that parses but names a key outside its table is an aggregate that
// cannot be split: Deaggregate returns (nil, true, err) with err wrapping
// [ErrMalformed]. (KCL logs this case and keeps the records before the bad
// one; dropping the whole aggregate is more predictable for a caller that
// counts it.) A valid aggregate holding no records yields (empty, true, nil).
//
// Explicit hash keys are returned as written, unvalidated;
// [UserRecord.HashKey] reports a bad one. The Data of each user record
// aliases data (capacity clipped to its length, so appending copies): the
// caller must not modify data while the records are in use. The keys are
// copied into one string per call.
func Deaggregate(data []byte) ([]UserRecord, bool, error) {
	pb, ok := protobufBody(data)
	if !ok {
		return nil, false, nil
	}
	l, ok := scan(pb)
	if !ok {
		return nil, false, nil
	}
	// Small tables, the common case, live on the stack.
	var pkBuf, ehkBuf [16]string
	pks, ehks := pkBuf[:0], ehkBuf[:0]
	if l.pks > len(pkBuf) {
		pks = make([]string, 0, l.pks)
	}
	if l.ehks > len(ehkBuf) {
		ehks = make([]string, 0, l.ehks)
	}
	pks, ehks = readTables(pb, l.keyBytes, pks, ehks)

	out := make([]UserRecord, 0, l.records)
	var indexErr error
	for b := pb; len(b) > 0; {
		num, typ, v, rest, ok := nextField(b)
		if !ok {
			return nil, false, nil
		}
		b = rest
		if num != fieldRecords || typ != protowire.BytesType {
			continue
		}
		r, ok := parseRecord(v)
		if !ok {
			return nil, false, nil
		}
		if indexErr != nil {
			// Keep parsing: a later parse failure makes the whole body "not
			// aggregated", which takes precedence, as in KCL.
			continue
		}
		if r.pk >= uint64(len(pks)) {
			indexErr = fmt.Errorf("%w: user record %d: partition key index %d out of range (table has %d)",
				ErrMalformed, len(out), r.pk, len(pks))
			continue
		}
		u := UserRecord{PartitionKey: pks[r.pk], Data: r.data}
		if r.hasEHK {
			if r.ehk >= uint64(len(ehks)) {
				indexErr = fmt.Errorf("%w: user record %d: explicit hash key index %d out of range (table has %d)",
					ErrMalformed, len(out), r.ehk, len(ehks))
				continue
			}
			u.ExplicitHashKey = ehks[r.ehk]
		}
		out = append(out, u)
	}
	if indexErr != nil {
		return nil, true, indexErr
	}
	return out, true, nil
}

// IsAggregated reports whether [Deaggregate] would treat data as a KPL
// aggregate: magic, length, MD5 and protobuf body all valid. Deaggregate may
// still reject such data with [ErrMalformed]. It does not allocate.
func IsAggregated(data []byte) bool {
	pb, ok := protobufBody(data)
	if !ok {
		return false
	}
	for b := pb; len(b) > 0; {
		num, typ, v, rest, ok := nextField(b)
		if !ok {
			return false
		}
		b = rest
		if num == fieldRecords && typ == protowire.BytesType {
			if _, ok := parseRecord(v); !ok {
				return false
			}
		}
	}
	return true
}

// protobufBody returns the protobuf body of data if the framing (magic,
// length) and the MD5 trailer are those of an aggregate.
func protobufBody(data []byte) ([]byte, bool) {
	if len(data) <= Overhead || !bytes.Equal(data[:len(Magic)], Magic[:]) {
		return nil, false
	}
	pb := data[len(Magic) : len(data)-digestLen]
	sum := md5.Sum(pb)
	if !bytes.Equal(sum[:], data[len(data)-digestLen:]) {
		return nil, false
	}
	return pb, true
}

// layout counts what the top level of an AggregatedRecord body holds.
type layout struct {
	pks, ehks int // key table entries
	keyBytes  int // total length of the key table entries
	records   int // records fields
}

// scan checks the top level of the body and counts its tables and records,
// so that the decoder can allocate each of its buffers once. Record contents
// are checked by parseRecord.
func scan(pb []byte) (layout, bool) {
	var l layout
	for b := pb; len(b) > 0; {
		num, typ, v, rest, ok := nextField(b)
		if !ok {
			return layout{}, false
		}
		b = rest
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case fieldPartitionKeyTable:
			l.pks++
			l.keyBytes += len(v)
		case fieldExplicitHashKeyTable:
			l.ehks++
			l.keyBytes += len(v)
		case fieldRecords:
			l.records++
		}
	}
	return l, true
}

// readTables appends the key tables of a scanned body to pks and ehks. All
// keys share one string (one allocation); the entries are substrings of it.
func readTables(pb []byte, keyBytes int, pks, ehks []string) ([]string, []string) {
	var kb strings.Builder
	kb.Grow(keyBytes)
	for b := pb; len(b) > 0; {
		num, typ, v, rest, _ := nextField(b)
		b = rest
		if typ == protowire.BytesType && (num == fieldPartitionKeyTable || num == fieldExplicitHashKeyTable) {
			kb.Write(v)
		}
	}
	keys, off := kb.String(), 0
	for b := pb; len(b) > 0; {
		num, typ, v, rest, _ := nextField(b)
		b = rest
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case fieldPartitionKeyTable:
			pks = append(pks, keys[off:off+len(v)])
			off += len(v)
		case fieldExplicitHashKeyTable:
			ehks = append(ehks, keys[off:off+len(v)])
			off += len(v)
		}
	}
	return pks, ehks
}

// nextField splits the first field off b: its number, its wire type, its
// value when length-delimited, and the fields after it. ok is false when b
// does not start with a well-formed field.
func nextField(b []byte) (num protowire.Number, typ protowire.Type, v, rest []byte, ok bool) {
	num, typ, n := consumeTag(b)
	if n < 0 {
		return 0, 0, nil, nil, false
	}
	b = b[n:]
	if typ == protowire.BytesType {
		v, n = protowire.ConsumeBytes(b)
	} else {
		n = protowire.ConsumeFieldValue(num, typ, b)
	}
	if n < 0 {
		return 0, 0, nil, nil, false
	}
	return num, typ, v, b[n:], true
}

// record is a parsed Record message.
type record struct {
	pk, ehk uint64
	hasEHK  bool
	data    []byte
}

// parseRecord parses a Record message with proto2 semantics: the last value
// of a field wins, fields with an unexpected wire type count as unknown, and
// the required fields (partition_key_index, data, and Tag.key in each tag)
// must be present.
func parseRecord(b []byte) (record, bool) {
	var r record
	var hasPK, hasData bool
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return record{}, false
		}
		b = b[n:]
		switch {
		case num == fieldPartitionKeyIndex && typ == protowire.VarintType:
			r.pk, n = protowire.ConsumeVarint(b)
			hasPK = true
		case num == fieldExplicitHashKeyIndex && typ == protowire.VarintType:
			r.ehk, n = protowire.ConsumeVarint(b)
			r.hasEHK = true
		case num == fieldData && typ == protowire.BytesType:
			r.data, n = protowire.ConsumeBytes(b)
			r.data = r.data[:len(r.data):len(r.data)]
			hasData = true
		case num == fieldTags && typ == protowire.BytesType:
			var tag []byte
			tag, n = protowire.ConsumeBytes(b)
			if n >= 0 && !validTag(tag) {
				return record{}, false
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return record{}, false
		}
		b = b[n:]
	}
	return r, hasPK && hasData
}

// validTag reports whether b parses as a Tag message with its required key.
// Tags carry nothing we use, but a malformed one fails the KCL's parse.
func validTag(b []byte) bool {
	hasKey := false
	for len(b) > 0 {
		num, typ, _, rest, ok := nextField(b)
		if !ok {
			return false
		}
		b = rest
		hasKey = hasKey || (num == fieldTagKey && typ == protowire.BytesType)
	}
	return hasKey
}

// consumeTag is protowire.ConsumeTag restricted to the field numbers the
// protobuf spec allows (protowire also admits MessageSet's larger ones), as
// the protobuf runtime's parser does. Java's parser (KCL) is laxer with
// over-long tag varints; no producer writes them.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, typ, n
}
