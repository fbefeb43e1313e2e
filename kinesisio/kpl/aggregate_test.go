package kpl

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// knownVector is the two-record aggregate of the protocol notes §1.2:
// "hello" and "world" under partition key "pk", no explicit hash key.
const knownVector = "f3899ac2" +
	"0a02706b" + "1a0908001a0568656c6c6f" + "1a0908001a05776f726c64" +
	"4747b0d63591c416fdae617529bdda27"

func mustAdd(t *testing.T, a *Aggregator, r UserRecord) {
	t.Helper()
	if err := a.Add(r); err != nil {
		t.Fatalf("Add(%q): %v", r.PartitionKey, err)
	}
}

func mustBuild(t *testing.T, a *Aggregator) KinesisRecord {
	t.Helper()
	kr, err := a.Build()
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func TestAggregatorBuildsTheKnownVector(t *testing.T) {
	a := NewAggregator(1<<20, math.MaxInt)
	mustAdd(t, a, UserRecord{PartitionKey: "pk", Data: []byte("hello")})
	mustAdd(t, a, UserRecord{PartitionKey: "pk", Data: []byte("world")})
	kr := mustBuild(t, a)

	if got := hex.EncodeToString(kr.Data); got != knownVector {
		t.Fatalf("Data = %s\nwant   %s", got, knownVector)
	}
	if len(kr.Data) != 46 {
		t.Fatalf("len(Data) = %d, want 46", len(kr.Data))
	}
	if kr.PartitionKey != "a" || kr.ExplicitHashKey != "38317986088707300215492326132921849533" {
		t.Fatalf("outer keys = %q, %q; want \"a\" and MD5(\"pk\")", kr.PartitionKey, kr.ExplicitHashKey)
	}
	if kr.UserRecords != 2 || !kr.Aggregated() {
		t.Fatalf("UserRecords = %d, Aggregated = %v; want 2, true", kr.UserRecords, kr.Aggregated())
	}
	if a.Size() != 47 || kr.Size() != 47 {
		t.Fatalf("Size() = %d, KinesisRecord.Size() = %d; want 47 (1-byte key + 46)", a.Size(), kr.Size())
	}
}

func TestAggregatorSendsASingleRecordRaw(t *testing.T) {
	a := NewAggregator(1<<20, math.MaxInt)
	data := []byte("only")
	mustAdd(t, a, UserRecord{PartitionKey: "key", ExplicitHashKey: "7", Data: data})
	kr := mustBuild(t, a)
	if kr.PartitionKey != "key" || kr.ExplicitHashKey != "7" || !bytes.Equal(kr.Data, data) || kr.UserRecords != 1 || kr.Aggregated() {
		t.Fatalf("Build() = %+v, want the user record itself", kr)
	}
	if a.Size() != len("key")+len(data) {
		t.Fatalf("Size() = %d, want %d", a.Size(), len("key")+len(data))
	}
	if _, aggregated, _ := Deaggregate(kr.Data); aggregated {
		t.Fatal("a raw record must not deaggregate")
	}
}

func TestAggregatorOuterHashKeyIsTheFirstRecords(t *testing.T) {
	a := NewAggregator(1<<20, math.MaxInt)
	mustAdd(t, a, UserRecord{PartitionKey: "x", ExplicitHashKey: "12345", Data: []byte("1")})
	mustAdd(t, a, UserRecord{PartitionKey: "y", ExplicitHashKey: "99", Data: []byte("2")})
	if kr := mustBuild(t, a); kr.ExplicitHashKey != "12345" {
		t.Fatalf("outer EHK = %q, want the first record's \"12345\"", kr.ExplicitHashKey)
	}
	a.Reset()
	mustAdd(t, a, UserRecord{PartitionKey: "x", Data: []byte("1")})
	mustAdd(t, a, UserRecord{PartitionKey: "y", ExplicitHashKey: "99", Data: []byte("2")})
	if kr := mustBuild(t, a); kr.ExplicitHashKey != HashPartitionKey("x").String() {
		t.Fatalf("outer EHK = %q, want MD5 of the first record's key %s", kr.ExplicitHashKey, HashPartitionKey("x"))
	}
}

func TestAggregatorStoresEachKeyOnce(t *testing.T) {
	a := NewAggregator(1<<20, math.MaxInt)
	for i, pk := range []string{"a", "b", "a", "c", "b"} {
		mustAdd(t, a, UserRecord{PartitionKey: pk, ExplicitHashKey: []string{"", "5", "5", "", "6"}[i], Data: []byte{byte(i)}})
	}
	kr := mustBuild(t, a)
	body := kr.Data[len(Magic) : len(kr.Data)-16]
	l, ok := scan(body)
	if !ok || l.pks != 3 || l.ehks != 2 || l.records != 5 {
		t.Fatalf("tables: %d partition keys, %d hash keys, %d records; want 3, 2, 5", l.pks, l.ehks, l.records)
	}
	got, _, err := Deaggregate(kr.Data)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, []UserRecord{
		{PartitionKey: "a", Data: []byte{0}},
		{PartitionKey: "b", ExplicitHashKey: "5", Data: []byte{1}},
		{PartitionKey: "a", ExplicitHashKey: "5", Data: []byte{2}},
		{PartitionKey: "c", Data: []byte{3}},
		{PartitionKey: "b", ExplicitHashKey: "6", Data: []byte{4}},
	})
}

// TestAggregatorSizeIsExact checks Size and SizeWith against the built bytes
// while the body crosses the varint length boundaries (data of 127/128 and
// 16383/16384 bytes, table indices past 127, records past 16 KiB).
func TestAggregatorSizeIsExact(t *testing.T) {
	dataLens := []int{0, 1, 2, 100, 113, 114, 115, 116, 117, 125, 126, 127, 128, 129, 255, 256,
		16370, 16371, 16372, 16373, 16374, 16375, 16380, 16383, 16384, 16385, 2097150, 2097152}
	check := func(t *testing.T, a *Aggregator, r UserRecord) {
		t.Helper()
		predicted := a.SizeWith(r)
		mustAdd(t, a, r)
		if a.Size() != predicted {
			t.Fatalf("after Add, Size() = %d, SizeWith predicted %d", a.Size(), predicted)
		}
		kr := mustBuild(t, a)
		if got := len(kr.PartitionKey) + len(kr.Data); got != a.Size() {
			t.Fatalf("%d records: built %d bytes (key+data), Size() = %d", a.Len(), got, a.Size())
		}
	}
	t.Run("data lengths", func(t *testing.T) {
		for _, n := range dataLens {
			a := NewAggregator(math.MaxInt, math.MaxInt)
			check(t, a, UserRecord{PartitionKey: "k", Data: make([]byte, n)})
			check(t, a, UserRecord{PartitionKey: "k", Data: make([]byte, n)})
			check(t, a, UserRecord{PartitionKey: "other", ExplicitHashKey: "1", Data: make([]byte, n)})
		}
	})
	t.Run("key lengths", func(t *testing.T) {
		for _, n := range []int{1, 126, 127, 128, 256} {
			a := NewAggregator(math.MaxInt, math.MaxInt)
			check(t, a, UserRecord{PartitionKey: strings.Repeat("p", n), Data: []byte("x")})
			check(t, a, UserRecord{PartitionKey: strings.Repeat("q", n), ExplicitHashKey: MaxUint128.String(), Data: []byte("y")})
		}
	})
	t.Run("table indices", func(t *testing.T) {
		a := NewAggregator(math.MaxInt, math.MaxInt)
		for i := range 300 { // indices 127→128 take a second varint byte
			check(t, a, UserRecord{PartitionKey: "pk" + strconv.Itoa(i), ExplicitHashKey: strconv.Itoa(i), Data: []byte("d")})
		}
	})
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewSource(4))
		a := NewAggregator(math.MaxInt, math.MaxInt)
		for range 500 {
			check(t, a, randomRecord(rng, 300))
		}
	})
}

func TestAggregatorNeverExceedsMaxBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for _, maxBytes := range []int{1, 30, 64, 100, 200, 1000, 4096, 51200} {
		a := NewAggregator(maxBytes, math.MaxInt)
		var sent []UserRecord
		var want []UserRecord
		flush := func() {
			if a.Len() == 0 {
				return
			}
			kr := mustBuild(t, a)
			if kr.Size() > maxBytes || a.Size() > maxBytes {
				t.Fatalf("maxBytes %d: built a %d-byte record", maxBytes, kr.Size())
			}
			sent = append(sent, deaggregateOrRaw(t, kr)...)
			a.Reset()
		}
		for range 2000 {
			r := randomRecord(rng, 150)
			fits := a.WouldFit(r)
			err := a.Add(r)
			switch {
			case err == nil:
				if !fits {
					t.Fatalf("maxBytes %d: Add accepted a record WouldFit refused", maxBytes)
				}
				want = append(want, r)
			case errors.Is(err, ErrFull):
				if fits || a.SizeWith(r) <= maxBytes {
					t.Fatalf("maxBytes %d: ErrFull although SizeWith = %d fits", maxBytes, a.SizeWith(r))
				}
				flush()
				if err := a.Add(r); err == nil {
					want = append(want, r)
				} else if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("maxBytes %d: Add to an empty aggregator: %v", maxBytes, err)
				}
			case errors.Is(err, ErrTooLarge):
				if a.Len() != 0 || len(r.PartitionKey)+len(r.Data) <= maxBytes {
					t.Fatalf("maxBytes %d: ErrTooLarge for a %d-byte record with %d records held", maxBytes, len(r.PartitionKey)+len(r.Data), a.Len())
				}
			default:
				t.Fatal(err)
			}
			if a.Size() > maxBytes {
				t.Fatalf("maxBytes %d: Size() = %d", maxBytes, a.Size())
			}
		}
		flush()
		equalRecords(t, sent, want)
	}
}

func TestAggregatorRespectsMaxRecords(t *testing.T) {
	a := NewAggregator(math.MaxInt, 3)
	for i := range 3 {
		mustAdd(t, a, UserRecord{PartitionKey: "k", Data: []byte{byte(i)}})
	}
	r := UserRecord{PartitionKey: "k"}
	if a.WouldFit(r) {
		t.Fatal("WouldFit = true with 3 of 3 records")
	}
	if err := a.Add(r); err != ErrFull {
		t.Fatalf("Add = %v, want ErrFull", err)
	}
	if a.Len() != 3 {
		t.Fatalf("Len() = %d after a refused Add, want 3", a.Len())
	}
}

func TestAggregatorRejectsInvalidRecordsAndStaysUnchanged(t *testing.T) {
	a := NewAggregator(1<<20, math.MaxInt)
	mustAdd(t, a, UserRecord{PartitionKey: "ok", Data: []byte("x")})
	size := a.Size()
	for _, tc := range []struct {
		r    UserRecord
		want error
	}{
		{UserRecord{PartitionKey: "", Data: []byte("x")}, ErrInvalidPartitionKey},
		{UserRecord{PartitionKey: strings.Repeat("k", 257)}, ErrInvalidPartitionKey},
		{UserRecord{PartitionKey: "k", ExplicitHashKey: "340282366920938463463374607431768211456"}, ErrInvalidHashKey},
		{UserRecord{PartitionKey: "k", ExplicitHashKey: "-1"}, ErrInvalidHashKey},
	} {
		if err := a.Add(tc.r); !errors.Is(err, tc.want) {
			t.Errorf("Add(%+v) = %v, want %v", tc.r, err, tc.want)
		}
	}
	if a.Len() != 1 || a.Size() != size {
		t.Fatalf("after refused Adds: Len %d Size %d, want 1 and %d", a.Len(), a.Size(), size)
	}
}

func TestAggregatorTooLargeRecordNamesItsSize(t *testing.T) {
	a := NewAggregator(10, math.MaxInt)
	err := a.Add(UserRecord{PartitionKey: "key", Data: make([]byte, 8)})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "11 bytes") {
		t.Fatalf("Add = %v, want ErrTooLarge naming 11 bytes", err)
	}
}

func TestAggregatorBuildOnEmptyFails(t *testing.T) {
	if _, err := NewAggregator(100, 10).Build(); err == nil {
		t.Fatal("Build on an empty aggregator succeeded")
	}
}

func TestNewAggregatorPanicsOnBadLimits(t *testing.T) {
	for _, lim := range [][2]int{{0, 1}, {1, 0}, {-1, 5}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewAggregator(%d, %d) did not panic", lim[0], lim[1])
				}
			}()
			NewAggregator(lim[0], lim[1])
		}()
	}
}

func TestAggregatorResetStartsAfresh(t *testing.T) {
	a := NewAggregator(1<<20, math.MaxInt)
	mustAdd(t, a, UserRecord{PartitionKey: "a", Data: []byte("1")})
	mustAdd(t, a, UserRecord{PartitionKey: "b", Data: []byte("2")})
	first := mustBuild(t, a)
	kept := bytes.Clone(first.Data)
	a.Reset()
	if a.Len() != 0 || a.Size() != 0 {
		t.Fatalf("after Reset: Len %d Size %d", a.Len(), a.Size())
	}
	mustAdd(t, a, UserRecord{PartitionKey: "pk", Data: []byte("hello")})
	mustAdd(t, a, UserRecord{PartitionKey: "pk", Data: []byte("world")})
	if got := hex.EncodeToString(mustBuild(t, a).Data); got != knownVector {
		t.Fatalf("after Reset built %s, want %s", got, knownVector)
	}
	if !bytes.Equal(first.Data, kept) {
		t.Fatal("Reset and reuse changed a record built before")
	}
}

// TestAggregatorRoundTripsRandomRecords is the property test: whatever valid
// records go in come out of Deaggregate unchanged and in order, and the
// reference protobuf runtime reads the same records.
func TestAggregatorRoundTripsRandomRecords(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	for range 300 {
		a := NewAggregator(math.MaxInt, math.MaxInt)
		var want []UserRecord
		for range 2 + rng.Intn(60) {
			r := randomRecord(rng, 200)
			mustAdd(t, a, r)
			want = append(want, r)
		}
		kr := mustBuild(t, a)
		got, aggregated, err := Deaggregate(kr.Data)
		if err != nil || !aggregated {
			t.Fatalf("Deaggregate = aggregated %v, %v", aggregated, err)
		}
		equalRecords(t, got, want)
		ref, ok, indexOK := referenceParse(kr.Data[len(Magic) : len(kr.Data)-16])
		if !ok || !indexOK {
			t.Fatal("the protobuf runtime cannot parse the aggregate")
		}
		equalRecords(t, ref, want)
	}
}

// randomRecord returns a valid record: keys drawn from a small pool so tables
// get shared entries, an explicit hash key half the time.
func randomRecord(rng *rand.Rand, maxData int) UserRecord {
	r := UserRecord{PartitionKey: randomKey(rng)}
	if rng.Intn(3) == 0 {
		r.PartitionKey = "shared-" + strconv.Itoa(rng.Intn(4))
	}
	switch rng.Intn(4) {
	case 0:
		r.ExplicitHashKey = Uint128{Hi: rng.Uint64(), Lo: rng.Uint64()}.String()
	case 1:
		r.ExplicitHashKey = strconv.Itoa(rng.Intn(3))
	}
	r.Data = make([]byte, rng.Intn(maxData+1))
	rng.Read(r.Data)
	return r
}

// deaggregateOrRaw returns the user records a reader would see in kr.
func deaggregateOrRaw(t *testing.T, kr KinesisRecord) []UserRecord {
	t.Helper()
	recs, aggregated, err := Deaggregate(kr.Data)
	if err != nil {
		t.Fatal(err)
	}
	if aggregated != kr.Aggregated() {
		t.Fatalf("Deaggregate says aggregated=%v for a record built with %d user records", aggregated, kr.UserRecords)
	}
	if !aggregated {
		return []UserRecord{{PartitionKey: kr.PartitionKey, ExplicitHashKey: kr.ExplicitHashKey, Data: kr.Data}}
	}
	return recs
}
