package kinesistest

import (
	"math/big"
	"math/bits"
	"regexp"
)

// Sequence numbers are shaped like the service's "v2" numbers: a 186-bit
// integer with version 2 in the nibble at bit 184 and the shard's number in
// bits 4..35, which KCL-based tools check. Bits 36 and up carry a per-stream
// counter, so numbers grow strictly within a shard (and across the shards of a
// stream in the order records were stored). Every such value has exactly 56
// decimal digits.
const (
	seqShardShift   = 4
	seqCounterShift = 36
)

// seqNumberPattern is the model's pattern for sequence numbers.
var seqNumberPattern = regexp.MustCompile(`^(0|[1-9]\d{0,128})$`)

// formatSeq returns the decimal sequence number for a counter value of shard
// shardNum. It avoids math/big because PutRecords formats one per record.
func formatSeq(counter uint64, shardNum uint32) string {
	// The value as three 64-bit words, least significant first.
	w := [3]uint64{
		counter<<seqCounterShift | uint64(shardNum)<<seqShardShift,
		counter >> (64 - seqCounterShift),
		1 << (185 - 128), // version 2 at bit 184 is bit 185 set
	}
	const chunk = 10000000000000000000 // 1e19, the largest power of ten in a word
	var parts [3]uint64
	for i := range parts {
		var rem uint64
		for j := 2; j >= 0; j-- {
			w[j], rem = bits.Div64(rem, w[j], chunk)
		}
		parts[i] = rem
	}
	// 2^185 <= value < 2^186 has 56 digits: 18 in the top chunk, 19 + 19 below.
	var buf [57]byte
	pos := len(buf)
	for i := range parts {
		v := parts[i]
		digits := 19
		for d := 0; d < digits && (i < 2 || v > 0); d++ {
			pos--
			buf[pos] = byte('0' + v%10)
			v /= 10
		}
	}
	return string(buf[pos:])
}

// seqCounterMask keeps the 148 bits above the shard number.
var seqCounterMask = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 148), big.NewInt(1))

// parsedSeq is a client-supplied sequence number taken apart.
type parsedSeq struct {
	counter  uint64 // meaningful when !beyond
	beyond   bool   // the counter is larger than any this server issues
	shardNum uint32
}

// parseSeq takes apart a sequence number in this server's format. ok is false
// for numbers that are not v2-shaped.
func parseSeq(s string) (p parsedSeq, ok bool) {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok || v.Sign() <= 0 {
		return parsedSeq{}, false
	}
	if new(big.Int).Rsh(v, 184).Cmp(big.NewInt(2)) != 0 {
		return parsedSeq{}, false
	}
	shard := new(big.Int).Rsh(v, seqShardShift)
	p.shardNum = uint32(shard.Uint64())
	counter := new(big.Int).Rsh(v, seqCounterShift)
	counter.And(counter, seqCounterMask)
	if counter.IsUint64() {
		p.counter = counter.Uint64()
	} else {
		p.beyond = true
	}
	return p, true
}
