package kinesistest

import (
	"math/big"
	"testing"
)

func TestFormatSeqMatchesBigIntegerLayout(t *testing.T) {
	for _, tc := range []struct {
		counter uint64
		shard   uint32
	}{{0, 0}, {1, 0}, {1, 6}, {12345678901234, 4095}, {^uint64(0), ^uint32(0)}} {
		want := new(big.Int).Lsh(big.NewInt(1), 185)
		want.Add(want, new(big.Int).Lsh(new(big.Int).SetUint64(tc.counter), seqCounterShift))
		want.Add(want, new(big.Int).Lsh(big.NewInt(int64(tc.shard)), seqShardShift))
		got := formatSeq(tc.counter, tc.shard)
		if got != want.String() {
			t.Errorf("formatSeq(%d, %d) = %s, want %s", tc.counter, tc.shard, got, want)
		}
		if len(got) != 56 {
			t.Errorf("formatSeq(%d, %d) has %d digits, want 56", tc.counter, tc.shard, len(got))
		}
		p, ok := parseSeq(got)
		if !ok || p.counter != tc.counter || p.shardNum != tc.shard || p.beyond {
			t.Errorf("parseSeq(%s) = %+v, %v; want counter %d shard %d", got, p, ok, tc.counter, tc.shard)
		}
	}
}

func TestParseSeqRejectsOtherShapes(t *testing.T) {
	for _, s := range []string{"0", "1", "123456789", "not-a-number", "-5"} {
		if _, ok := parseSeq(s); ok {
			t.Errorf("parseSeq(%q) accepted a number that is not v2-shaped", s)
		}
	}
	// A real service number (version 2, shard 6) parses and names its shard.
	p, ok := parseSeq("49590338271490256608559692538361571095921575989136588898")
	if !ok || p.shardNum != 6 {
		t.Errorf("parseSeq(real v2 number) = %+v, %v; want shard 6", p, ok)
	}
}

func TestEvenSplitMatchesServiceBoundaries(t *testing.T) {
	starts := evenSplit(3)
	want := []string{"0", "113427455640312821154458202477256070485", "226854911280625642308916404954512140970"}
	for i, s := range starts {
		if s.String() != want[i] {
			t.Errorf("evenSplit(3)[%d] = %s, want %s", i, s, want[i])
		}
	}
	if got := maxHashKey.String(); got != "340282366920938463463374607431768211455" {
		t.Errorf("maxHashKey = %s", got)
	}
}
