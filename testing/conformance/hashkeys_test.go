package conformance

import (
	"math/big"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// maxHashKey is 2^128-1, the end of the hash key space.
var maxHashKey = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

func bigDec(t *testing.T, s string) *big.Int {
	t.Helper()
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("%q is not a decimal integer", s)
	}
	return n
}

// checkCoverage fails t unless the shards' hash key ranges are contiguous,
// sorted as given, and cover the whole hash key space.
func checkCoverage(t *testing.T, shards []types.Shard) {
	t.Helper()
	next := big.NewInt(0)
	for _, s := range shards {
		start := bigDec(t, aws.ToString(s.HashKeyRange.StartingHashKey))
		end := bigDec(t, aws.ToString(s.HashKeyRange.EndingHashKey))
		if start.Cmp(next) != 0 {
			t.Fatalf("shard %s starts at %v, want %v", aws.ToString(s.ShardId), start, next)
		}
		next = new(big.Int).Add(end, big.NewInt(1))
	}
	if want := new(big.Int).Add(maxHashKey, big.NewInt(1)); next.Cmp(want) != 0 {
		t.Fatalf("shards end at %v, want 2^128-1", new(big.Int).Sub(next, big.NewInt(1)))
	}
}

// routeShard returns the id of the shard whose hash key range holds key.
func routeShard(t *testing.T, shards []types.Shard, key *big.Int) string {
	t.Helper()
	for _, s := range shards {
		if s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil {
			continue // closed
		}
		lo := bigDec(t, aws.ToString(s.HashKeyRange.StartingHashKey))
		hi := bigDec(t, aws.ToString(s.HashKeyRange.EndingHashKey))
		if key.Cmp(lo) >= 0 && key.Cmp(hi) <= 0 {
			return aws.ToString(s.ShardId)
		}
	}
	t.Fatalf("no open shard holds hash key %v", key)
	return ""
}

// md5Key is the hash key the service routes partition key pk to.
func md5Key(pk string) *big.Int {
	k := kpl.HashPartitionKey(pk)
	n := new(big.Int).SetUint64(k.Hi)
	n.Lsh(n, 64)
	return n.Or(n, new(big.Int).SetUint64(k.Lo))
}
