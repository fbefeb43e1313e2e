// Package wire is the binary encoding of the connector's internal values that cross a
// runner (shard descriptors, restrictions): fields in a fixed order, strings and lists
// length-prefixed, integers as zig-zag varints. The connector registers coders built on it,
// so runners see those values as opaque length-prefixed bytes and never re-encode them
// (Java runners re-encode Beam row-coded values, and get nil slices wrong).
//
// A Reader keeps the first error it meets and returns zero values after it, so a decoder
// reads every field and checks Err once.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxLen bounds a decoded string or list length, so corrupt input fails instead of
// allocating without limit.
const maxLen = 1 << 24

// Writer appends encoded fields to a byte slice.
type Writer struct {
	b []byte
}

// NewWriter starts an encoding with the format version v of the value's type.
func NewWriter(v byte) *Writer { return &Writer{b: []byte{v}} }

// Bytes returns the encoding.
func (w *Writer) Bytes() []byte { return w.b }

// Int writes a signed integer.
func (w *Writer) Int(v int64) { w.b = binary.AppendVarint(w.b, v) }

// Bool writes a boolean.
func (w *Writer) Bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// String writes a string.
func (w *Writer) String(s string) {
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}

// Strings writes a list of strings; nil and empty lists encode alike.
func (w *Writer) Strings(ss []string) {
	w.b = binary.AppendUvarint(w.b, uint64(len(ss)))
	for _, s := range ss {
		w.String(s)
	}
}

// Reader decodes fields written by a Writer.
type Reader struct {
	what string
	b    []byte
	err  error
}

// NewReader starts decoding b, the encoding of a what (named in errors), and checks that its
// format version is one of versions. Version returns the one found.
func NewReader(what string, b []byte, versions ...byte) *Reader {
	r := &Reader{what: what, b: b}
	if len(b) == 0 {
		r.fail(errors.New("empty encoding"))
		return r
	}
	for _, v := range versions {
		if b[0] == v {
			r.b = b[1:]
			return r
		}
	}
	r.fail(fmt.Errorf("unknown format version %d (this build reads %v); was it written by a newer beamkinesis?", b[0], versions))
	return r
}

func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("kinesisio: decoding a %s: %w", r.what, err)
		r.b = nil
	}
}

// Int reads a signed integer.
func (r *Reader) Int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errors.New("truncated or overlong integer"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Bool reads a boolean.
func (r *Reader) Bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) == 0 || r.b[0] > 1 {
		r.fail(errors.New("truncated or invalid boolean"))
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

func (r *Reader) length() int {
	if r.err != nil {
		return 0
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > maxLen {
		r.fail(errors.New("truncated or invalid length"))
		return 0
	}
	r.b = r.b[k:]
	return int(n)
}

// String reads a string.
func (r *Reader) String() string {
	n := r.length()
	if r.err != nil {
		return ""
	}
	if n > len(r.b) {
		r.fail(fmt.Errorf("string of %d bytes truncated to %d", n, len(r.b)))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// Strings reads a list of strings. It never returns nil: an empty list decodes as an empty,
// non-nil slice.
func (r *Reader) Strings() []string {
	n := r.length()
	if r.err != nil {
		return []string{}
	}
	if n > len(r.b) { // every string takes at least one byte
		r.fail(fmt.Errorf("list of %d strings truncated to %d bytes", n, len(r.b)))
		return []string{}
	}
	ss := make([]string, 0, n)
	for range n {
		ss = append(ss, r.String())
	}
	if r.err != nil {
		return []string{}
	}
	return ss
}

// Err returns the first decoding error, or an error if bytes are left over after the last
// field.
func (r *Reader) Err() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Errorf("%d bytes left after the last field", len(r.b)))
	}
	return r.err
}
