package kinesistest

import (
	"crypto/md5"
	"encoding/binary"
	"math/big"
	"regexp"
)

// uint128 is a hash key: the service maps every record to a point of the
// 128-bit key space, MD5(partition key) read as a big-endian unsigned number
// unless the producer gives an explicit hash key.
type uint128 struct{ hi, lo uint64 }

// maxHashKey is 2^128-1, the last key of the space.
var maxHashKey = uint128{hi: ^uint64(0), lo: ^uint64(0)}

// hashKeyPattern is the model's pattern for ExplicitHashKey and
// NewStartingHashKey.
var hashKeyPattern = regexp.MustCompile(`^(0|[1-9]\d{0,38})$`)

func (a uint128) cmp(b uint128) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

func (a uint128) add1() uint128 {
	lo := a.lo + 1
	hi := a.hi
	if lo == 0 {
		hi++
	}
	return uint128{hi: hi, lo: lo}
}

func (a uint128) sub1() uint128 {
	lo := a.lo - 1
	hi := a.hi
	if a.lo == 0 {
		hi--
	}
	return uint128{hi: hi, lo: lo}
}

func (a uint128) big() *big.Int {
	v := new(big.Int).SetUint64(a.hi)
	v.Lsh(v, 64)
	return v.Or(v, new(big.Int).SetUint64(a.lo))
}

// String returns the decimal form used on the wire.
func (a uint128) String() string { return a.big().String() }

func uint128FromBig(v *big.Int) uint128 {
	lo := new(big.Int).And(v, new(big.Int).SetUint64(^uint64(0)))
	hi := new(big.Int).Rsh(v, 64)
	return uint128{hi: hi.Uint64(), lo: lo.Uint64()}
}

// parseHashKey parses a decimal hash key; ok is false when s is not a number
// in [0, 2^128-1].
func parseHashKey(s string) (key uint128, ok bool) {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok || v.Sign() < 0 || v.BitLen() > 128 {
		return uint128{}, false
	}
	return uint128FromBig(v), true
}

// partitionHashKey is the key the service derives from a partition key.
func partitionHashKey(pk string) uint128 {
	sum := md5.Sum([]byte(pk))
	return uint128{hi: binary.BigEndian.Uint64(sum[:8]), lo: binary.BigEndian.Uint64(sum[8:])}
}

// evenSplit divides the key space into n contiguous ranges as the service does
// at stream creation and for UNIFORM_SCALING: range i starts at
// floor(i * 2^128 / n).
func evenSplit(n int) (starts []uint128) {
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	starts = make([]uint128, n)
	for i := range n {
		v := new(big.Int).Mul(space, big.NewInt(int64(i)))
		starts[i] = uint128FromBig(v.Div(v, big.NewInt(int64(n))))
	}
	return starts
}
