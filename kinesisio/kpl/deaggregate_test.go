package kpl

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDeaggregateReadsTheKnownVector(t *testing.T) {
	data := mustHex(t, knownVector)
	got, aggregated, err := Deaggregate(data)
	if err != nil || !aggregated {
		t.Fatalf("Deaggregate = aggregated %v, err %v; want true, nil", aggregated, err)
	}
	equalRecords(t, got, []UserRecord{
		{PartitionKey: "pk", Data: []byte("hello")},
		{PartitionKey: "pk", Data: []byte("world")},
	})
	if !IsAggregated(data) {
		t.Fatal("IsAggregated = false")
	}
}

// TestDeaggregatePassesThroughWhatKCLPassesThrough lists the KCL rules under
// which a Kinesis record is not an aggregate and is delivered as it is.
func TestDeaggregatePassesThroughWhatKCLPassesThrough(t *testing.T) {
	valid := mustHex(t, knownVector)
	body := valid[4 : len(valid)-16]
	flip := func(b []byte, i int) []byte {
		c := bytes.Clone(b)
		c[i] ^= 0x01
		return c
	}
	cases := map[string][]byte{
		"nil":                            nil,
		"shorter than the magic":         Magic[:3],
		"magic only":                     Magic[:],
		"16 bytes after the magic":       append(Magic[:4:4], make([]byte, 16)...),
		"bad magic":                      flip(valid, 0),
		"MD5 mismatch in the body":       flip(valid, 10),
		"MD5 mismatch in the digest":     flip(valid, len(valid)-1),
		"plain text":                     []byte("just a normal record with no aggregation at all"),
		"garbage body":                   frame([]byte{0xff, 0xff, 0xff, 0xff}),
		"truncated body":                 frame(body[:len(body)-1]),
		"field number zero":              frame([]byte{0x00, 0x01}),
		"stray end group":                frame([]byte{0x0c}),
		"record without partition index": frame(fBytes(fBytes(nil, 1, []byte("pk")), 3, fBytes(nil, 3, []byte("d")))),
		"record without data":            frame(fBytes(fBytes(nil, 1, []byte("pk")), 3, fVarint(nil, 1, 0))),
		"record index with wrong wire type": frame(fBytes(fBytes(nil, 1, []byte("pk")), 3,
			fBytes(fBytes(nil, 1, []byte{0}), 3, []byte("d")))),
		"record that is not a message": frame(fBytes(fBytes(nil, 1, []byte("pk")), 3, []byte{0xff})),
		"tag without key": frame(fBytes(fBytes(nil, 1, []byte("pk")), 3,
			fBytes(rec(0, "d"), 4, fBytes(nil, 2, []byte("v"))))),
		"malformed tag": frame(fBytes(fBytes(nil, 1, []byte("pk")), 3,
			fBytes(rec(0, "d"), 4, []byte{0x0a, 0x05}))),
		"bad record after good ones": frame(append(body, fBytes(nil, 3, fVarint(nil, 1, 0))...)),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			recs, aggregated, err := Deaggregate(data)
			if recs != nil || aggregated || err != nil {
				t.Fatalf("Deaggregate = %v, %v, %v; want nil, false, nil", recs, aggregated, err)
			}
			if IsAggregated(data) {
				t.Fatal("IsAggregated = true")
			}
			// Where the framing holds, a proto2 parser must reject the body too.
			if b, ok := protobufBody(data); ok {
				if _, ok, _ := referenceParse(b); ok {
					t.Fatal("the protobuf runtime parses this body")
				}
			}
		})
	}
}

func TestDeaggregateReportsIndexOutOfRange(t *testing.T) {
	pkTable := fBytes(nil, 1, []byte("pk"))
	cases := map[string][]byte{
		"partition key index":           frame(fBytes(pkTable, 3, rec(1, "d"))),
		"partition key index, no table": frame(fBytes(nil, 3, rec(0, "d"))),
		"explicit hash key index": frame(fBytes(pkTable, 3,
			fBytes(fVarint(fVarint(nil, 1, 0), 2, 0), 3, []byte("d")))),
		"huge index": frame(fBytes(pkTable, 3, rec(1<<63, "d"))),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			recs, aggregated, err := Deaggregate(data)
			if recs != nil || !aggregated || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Deaggregate = %v, %v, %v; want nil, true, ErrMalformed", recs, aggregated, err)
			}
			if !IsAggregated(data) {
				t.Fatal("IsAggregated = false for a parsable body")
			}
		})
	}
}

func TestDeaggregateErrorNamesTheRecordAndIndex(t *testing.T) {
	data := frame(fBytes(fBytes(fBytes(nil, 1, []byte("pk")), 3, rec(0, "a")), 3, rec(5, "b")))
	_, _, err := Deaggregate(data)
	want := "kpl: malformed aggregated record: user record 1: partition key index 5 out of range (table has 1)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

func TestDeaggregateIgnoresTagsAndUnknownFields(t *testing.T) {
	var r []byte
	r = fVarint(r, 9, 77) // unknown varint
	r = fVarint(r, 1, 0)
	r = fBytes(r, 4, fBytes(fBytes(nil, 1, []byte("tagkey")), 2, []byte("tagvalue")))
	r = fBytes(r, 4, fBytes(nil, 1, []byte("key-only")))
	r = protowire.AppendTag(r, 10, protowire.Fixed32Type)
	r = protowire.AppendFixed32(r, 1)
	r = fBytes(r, 3, []byte("payload"))
	r = protowire.AppendTag(r, 11, protowire.StartGroupType)
	r = fVarint(r, 1, 5)
	r = protowire.AppendTag(r, 11, protowire.EndGroupType)

	var body []byte
	body = protowire.AppendTag(body, 7, protowire.Fixed64Type)
	body = protowire.AppendFixed64(body, 42)
	body = fVarint(body, 1, 3) // known number, wrong wire type: unknown
	body = fBytes(body, 3, r)
	body = fBytes(body, 1, []byte("late-table")) // tables may follow the records
	got, aggregated, err := Deaggregate(frame(body))
	if err != nil || !aggregated {
		t.Fatalf("Deaggregate = aggregated %v, %v", aggregated, err)
	}
	equalRecords(t, got, []UserRecord{{PartitionKey: "late-table", Data: []byte("payload")}})
}

func TestDeaggregateLastValueOfAFieldWins(t *testing.T) {
	r := fBytes(fVarint(fBytes(fVarint(nil, 1, 0), 3, []byte("first")), 1, 1), 3, []byte("second"))
	body := fBytes(fBytes(fBytes(nil, 1, []byte("a")), 1, []byte("b")), 3, r)
	got, _, err := Deaggregate(frame(body))
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, []UserRecord{{PartitionKey: "b", Data: []byte("second")}})
}

func TestDeaggregateOfAnAggregateWithoutRecordsIsEmpty(t *testing.T) {
	got, aggregated, err := Deaggregate(frame(fBytes(nil, 1, []byte("pk"))))
	if got == nil || len(got) != 0 || !aggregated || err != nil {
		t.Fatalf("Deaggregate = %v, %v, %v; want empty, true, nil", got, aggregated, err)
	}
}

func TestDeaggregateDataAliasesTheInput(t *testing.T) {
	data := mustHex(t, knownVector)
	got, _, err := Deaggregate(data)
	if err != nil {
		t.Fatal(err)
	}
	start := uintptr(unsafe.Pointer(&data[0]))
	for i, r := range got {
		p := uintptr(unsafe.Pointer(&r.Data[0]))
		if p < start || p >= start+uintptr(len(data)) {
			t.Fatalf("record %d: Data is a copy, want a sub-slice of the input", i)
		}
		if cap(r.Data) != len(r.Data) {
			t.Fatalf("record %d: cap %d > len %d: an append would overwrite the next record", i, cap(r.Data), len(r.Data))
		}
	}
	// The keys must not alias: the caller may reuse the input buffer once it
	// has copied the data it keeps, and strings must never change.
	for i := range data {
		data[i] = 0
	}
	if got[0].PartitionKey != "pk" {
		t.Fatalf("PartitionKey changed to %q with the input buffer", got[0].PartitionKey)
	}
}

func TestDeaggregateManyKeysBeyondTheStackTables(t *testing.T) {
	a := NewAggregator(1<<30, 1<<30)
	var want []UserRecord
	for i := range 1000 {
		r := UserRecord{PartitionKey: "key-" + string(rune('a'+i%26)) + hex.EncodeToString([]byte{byte(i), byte(i >> 8)}),
			ExplicitHashKey: Uint128{Lo: uint64(i)}.String(), Data: []byte{byte(i)}}
		mustAdd(t, a, r)
		want = append(want, r)
	}
	kr := mustBuild(t, a)
	got, _, err := Deaggregate(kr.Data)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, want)
}

func TestIsAggregatedDoesNotAllocate(t *testing.T) {
	data := mustHex(t, knownVector)
	if n := testing.AllocsPerRun(100, func() { IsAggregated(data) }); n != 0 {
		t.Fatalf("IsAggregated allocates %v times", n)
	}
}
