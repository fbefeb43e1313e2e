package kinesistest

import "encoding/binary"

// shardIterator is the position a shard iterator stands for.
type shardIterator struct {
	streamUID uint64
	stream    string
	shardNum  uint32
	pos       uint64 // the next record to return is the first with counter >= pos
	issuedMs  int64  // server clock; the iterator expires TTL after this
}

const (
	iteratorVersion    = 1
	iteratorHeaderSize = 1 + 8 + 4 + 8 + 8
)

func (s *Server) encodeIterator(it shardIterator) string {
	b := make([]byte, 0, iteratorHeaderSize+len(it.stream)+macSize)
	b = append(b, iteratorVersion)
	b = binary.BigEndian.AppendUint64(b, it.streamUID)
	b = binary.BigEndian.AppendUint32(b, it.shardNum)
	b = binary.BigEndian.AppendUint64(b, it.pos)
	b = binary.BigEndian.AppendUint64(b, uint64(it.issuedMs))
	b = append(b, it.stream...)
	return s.seal(b)
}

func (s *Server) decodeIterator(token string) (shardIterator, bool) {
	b, ok := s.open(token)
	if !ok || len(b) <= iteratorHeaderSize || b[0] != iteratorVersion {
		return shardIterator{}, false
	}
	return shardIterator{
		streamUID: binary.BigEndian.Uint64(b[1:]),
		shardNum:  binary.BigEndian.Uint32(b[9:]),
		pos:       binary.BigEndian.Uint64(b[13:]),
		issuedMs:  int64(binary.BigEndian.Uint64(b[21:])),
		stream:    string(b[iteratorHeaderSize:]),
	}, true
}
