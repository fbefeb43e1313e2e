package main

import (
	"crypto/sha256"
	"encoding/binary"
)

// multiset is a count and an order-independent checksum of (partition key, data) pairs: the
// sum modulo 2^64 of the first 8 bytes, big-endian, of SHA-256(key, 0x00, data), as
// Anchor.java computes it.
type multiset struct {
	Count int64
	Sum   uint64
}

func recordSum(key string, data []byte) uint64 {
	h := sha256.New()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(data)
	return binary.BigEndian.Uint64(h.Sum(nil))
}

func (m *multiset) add(key string, data []byte) {
	m.Count++
	m.Sum += recordSum(key, data)
}

// expected is the multiset of bench records from..to-1.
func expected(from, to int) multiset {
	var m multiset
	for i := from; i < to; i++ {
		m.add(benchKey(i), benchData(i))
	}
	return m
}
