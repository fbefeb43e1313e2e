package kpl

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// Uint128 is an unsigned 128-bit integer: a Kinesis hash key (0 .. 2^128-1).
// It is a comparable value type, and much cheaper than math/big for the
// per-record routing work of the writer and the hash range checks of the
// reader.
type Uint128 struct {
	Hi, Lo uint64 // high and low 64 bits
}

// MaxUint128 is 2^128-1, the largest hash key and the end of the hash key space.
var MaxUint128 = Uint128{Hi: math.MaxUint64, Lo: math.MaxUint64}

// Cmp compares x and y and returns -1 if x < y, 0 if x == y, +1 if x > y.
func (x Uint128) Cmp(y Uint128) int {
	switch {
	case x.Hi < y.Hi:
		return -1
	case x.Hi > y.Hi:
		return 1
	case x.Lo < y.Lo:
		return -1
	case x.Lo > y.Lo:
		return 1
	}
	return 0
}

const (
	pow10_19       = 10_000_000_000_000_000_000 // largest power of 10 in a uint64
	maxUint128Dec  = 39                         // digits of 2^128-1
	digitsPerChunk = 19                         // digits of pow10_19 - 1
)

// String returns x in decimal, the form the Kinesis API uses for hash keys.
func (x Uint128) String() string {
	if x.Hi == 0 {
		return strconv.FormatUint(x.Lo, 10)
	}
	var buf [maxUint128Dec]byte
	i := len(buf)
	// Peel off 19-digit chunks from the right; at most two are needed before
	// the rest fits in a uint64.
	for x.Hi != 0 {
		var rem uint64
		x, rem = x.divmod1e19()
		for range digitsPerChunk {
			i--
			buf[i] = byte('0' + rem%10)
			rem /= 10
		}
	}
	// x >= 2^64 > 10^19 before the loop, so the quotient left here is >= 1.
	for v := x.Lo; v != 0; v /= 10 {
		i--
		buf[i] = byte('0' + v%10)
	}
	return string(buf[i:])
}

// divmod1e19 returns x / 10^19 and x % 10^19.
func (x Uint128) divmod1e19() (Uint128, uint64) {
	qHi, r := x.Hi/pow10_19, x.Hi%pow10_19
	qLo, rem := bits.Div64(r, x.Lo, pow10_19)
	return Uint128{Hi: qHi, Lo: qLo}, rem
}

// ParseUint128 parses a hash key written as the Kinesis API writes it: a
// decimal integer in 0 .. 2^128-1 without sign, spaces or leading zeros
// (the API pattern 0|([1-9]\d{0,38})). The error wraps [ErrInvalidHashKey]
// and quotes s.
func ParseUint128(s string) (Uint128, error) {
	if s == "" {
		return Uint128{}, fmt.Errorf("%w %q: empty", ErrInvalidHashKey, s)
	}
	var x Uint128
	overflow := false
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return Uint128{}, fmt.Errorf("%w %q: not a decimal integer (byte %d is %q)", ErrInvalidHashKey, truncate(s), i, s[i])
		}
		// Keep scanning after an overflow so that a non-digit further on is
		// reported as such.
		hi, lo := bits.Mul64(x.Lo, 10)
		top, hi10 := bits.Mul64(x.Hi, 10)
		hi, c := bits.Add64(hi, hi10, 0)
		lo, c2 := bits.Add64(lo, uint64(d), 0)
		hi, c3 := bits.Add64(hi, 0, c2)
		overflow = overflow || top != 0 || c != 0 || c3 != 0
		x = Uint128{Hi: hi, Lo: lo}
	}
	switch {
	case len(s) > 1 && s[0] == '0':
		return Uint128{}, fmt.Errorf("%w %q: leading zero", ErrInvalidHashKey, truncate(s))
	case overflow:
		return Uint128{}, fmt.Errorf("%w %q: greater than 2^128-1", ErrInvalidHashKey, truncate(s))
	}
	return x, nil
}

// HashPartitionKey returns the hash key the service routes a partition key
// to when no explicit hash key is given: the MD5 digest of the key's UTF-8
// bytes read as a big-endian unsigned 128-bit integer.
func HashPartitionKey(pk string) Uint128 {
	// Copying into a stack buffer keeps the []byte conversion from allocating
	// for every key the service accepts.
	var buf [3 * MaxPartitionKeyLength]byte
	sum := md5.Sum(append(buf[:0], pk...))
	return Uint128{Hi: binary.BigEndian.Uint64(sum[:8]), Lo: binary.BigEndian.Uint64(sum[8:])}
}
