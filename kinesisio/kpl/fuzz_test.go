package kpl

import (
	"encoding/hex"
	"math"
	"testing"
)

// FuzzDeaggregate feeds arbitrary bytes to Deaggregate twice: as Kinesis
// record data, and as a protobuf body framed with magic and a correct MD5 (so
// the fuzzer explores the parser instead of the checksum). It checks that
// Deaggregate never panics, agrees with IsAggregated, decides "aggregated"
// exactly when the reference proto2 parser accepts the body, returns what
// that parser reads, and that the records it returns survive re-aggregation.
func FuzzDeaggregate(f *testing.F) {
	known, _ := hex.DecodeString(knownVector)
	f.Add(known)
	f.Add(known[4 : len(known)-16])
	f.Add([]byte{})
	f.Add([]byte("plain record"))
	f.Add(fBytes(fBytes(nil, 1, []byte("pk")), 3, rec(1, "d")))
	f.Add(fBytes(fBytes(nil, 1, []byte("pk")), 3, fBytes(rec(0, "d"), 4, fBytes(nil, 1, []byte("t")))))
	f.Add(fBytes(fBytes(fBytes(nil, 2, []byte("77")), 1, []byte("k")), 3,
		fBytes(fVarint(fVarint(nil, 1, 0), 2, 0), 3, []byte("x"))))
	a := NewAggregator(math.MaxInt, math.MaxInt)
	for i, pk := range []string{"a", "b", "a", "語"} {
		_ = a.Add(UserRecord{PartitionKey: pk, ExplicitHashKey: []string{"", "1", "", "340282366920938463463374607431768211455"}[i], Data: []byte{byte(i)}})
	}
	kr, _ := a.Build()
	f.Add(kr.Data)

	f.Fuzz(func(t *testing.T, data []byte) {
		checkDeaggregate(t, data)
		framed := frame(data)
		checkDeaggregate(t, framed)

		if len(data) == 0 {
			return // 16 bytes after the magic: too short to be an aggregate
		}
		recs, aggregated, err := Deaggregate(framed)
		ref, ok, indexOK := referenceParse(data)
		if aggregated != ok {
			t.Fatalf("Deaggregate aggregated = %v, proto2 parser ok = %v", aggregated, ok)
		}
		if ok && (err == nil) != indexOK {
			t.Fatalf("Deaggregate err = %v, reference indices ok = %v", err, indexOK)
		}
		if err == nil && aggregated {
			equalRecords(t, recs, ref)
		}
	})
}

// checkDeaggregate runs the invariants that hold for any input.
func checkDeaggregate(t *testing.T, data []byte) {
	recs, aggregated, err := Deaggregate(data)
	if IsAggregated(data) != aggregated {
		t.Fatalf("IsAggregated = %v, Deaggregate aggregated = %v", !aggregated, aggregated)
	}
	if !aggregated && (recs != nil || err != nil) {
		t.Fatalf("not aggregated but got records %v, err %v", recs, err)
	}
	if err != nil || len(recs) == 0 {
		return
	}
	a := NewAggregator(math.MaxInt, math.MaxInt)
	var kept []UserRecord
	for _, r := range recs {
		// A foreign producer may have written keys the service (and so Add)
		// would refuse; re-aggregate the rest.
		if a.Add(r) == nil {
			kept = append(kept, r)
		}
	}
	if len(kept) < 2 {
		return
	}
	kr, err := a.Build()
	if err != nil {
		t.Fatal(err)
	}
	if kr.Size() != a.Size() {
		t.Fatalf("built %d bytes, Size() = %d", kr.Size(), a.Size())
	}
	again, aggregated, err := Deaggregate(kr.Data)
	if err != nil || !aggregated {
		t.Fatalf("re-aggregated record: aggregated %v, %v", aggregated, err)
	}
	equalRecords(t, again, kept)
}
