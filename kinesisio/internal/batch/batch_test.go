package batch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

func limits(aggBytes int) Limits {
	return Limits{Aggregate: true, MaxAggregateBytes: aggBytes, MaxAggregateRecords: 1 << 30,
		MaxRecordBytes: DefaultMaxRecordBytes, MaxRequestEntries: MaxRequestEntries, MaxRequestBytes: DefaultMaxRequestBytes}
}

func item(pk string, ehk string, n int, seq int) *Item {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(seq + i)
	}
	r := kpl.UserRecord{PartitionKey: pk, ExplicitHashKey: ehk, Data: data}
	h, err := r.HashKey()
	if err != nil {
		panic(err)
	}
	return &Item{Record: r, Hash: h, Added: time.Unix(int64(seq), 0), Meta: seq}
}

// checkEntry asserts what must hold of every entry the packer emits: within the limits,
// the advertised record count, and (for an aggregate) a body that deaggregates to exactly
// its items, with the explicit hash key of the first.
func checkEntry(t *testing.T, l Limits, e *Entry) {
	t.Helper()
	if e.Size() > l.MaxRecordBytes {
		t.Fatalf("entry of %d bytes over the record limit %d", e.Size(), l.MaxRecordBytes)
	}
	if e.Record.UserRecords != len(e.Items) {
		t.Fatalf("entry says %d user records, carries %d items", e.Record.UserRecords, len(e.Items))
	}
	if !e.Aggregated() {
		it := e.Items[0]
		if e.Record.PartitionKey != it.Record.PartitionKey || !bytes.Equal(e.Record.Data, it.Record.Data) || e.Record.ExplicitHashKey != it.Record.ExplicitHashKey {
			t.Fatalf("raw entry %+v does not carry its item %+v", e.Record, it.Record)
		}
		return
	}
	if e.Size() > l.MaxAggregateBytes {
		t.Fatalf("aggregate of %d bytes over the aggregate limit %d", e.Size(), l.MaxAggregateBytes)
	}
	if e.Record.ExplicitHashKey != e.Items[0].Hash.String() {
		t.Fatalf("aggregate hash key %s, want the first record's %s", e.Record.ExplicitHashKey, e.Items[0].Hash)
	}
	recs, ok, err := kpl.Deaggregate(e.Record.Data)
	if !ok || err != nil || len(recs) != len(e.Items) {
		t.Fatalf("deaggregate: %d records, %v, %v; want %d", len(recs), ok, err, len(e.Items))
	}
	for i, r := range recs {
		want := e.Items[i].Record
		if r.PartitionKey != want.PartitionKey || r.ExplicitHashKey != want.ExplicitHashKey || !bytes.Equal(r.Data, want.Data) {
			t.Fatalf("record %d = %q/%q, want %q/%q", i, r.PartitionKey, r.ExplicitHashKey, want.PartitionKey, want.ExplicitHashKey)
		}
	}
}

// TestAggregatesNeverExceedTheLimitsAtAnySize feeds records of every size around the
// aggregate limit (raw-vs-aggregated boundary, exact fits, one byte over) and long keys,
// and checks every entry produced.
func TestAggregatesNeverExceedTheLimitsAtAnySize(t *testing.T) {
	for _, aggBytes := range []int{64, 100, 1000, 51200} {
		t.Run(fmt.Sprint(aggBytes), func(t *testing.T) {
			l := limits(aggBytes)
			a := NewAggregates(l)
			var out []*Entry
			seq := 0
			keys := []string{"k", "key-two", string(bytes.Repeat([]byte("p"), 256))}
			// Every size from 0 to 300 bytes and every size within 300 bytes of the
			// limit, where the raw/aggregated and fits/full decisions flip.
			var sizes []int
			for n := 0; n <= aggBytes+300; n++ {
				if n <= 300 || n >= aggBytes-300 {
					sizes = append(sizes, n)
				}
			}
			for _, size := range sizes {
				for _, pk := range keys {
					seq++
					out = append(out, a.Add("s", item(pk, "", size, seq))...)
				}
			}
			out = append(out, a.SealAll()...)
			total := 0
			for _, e := range out {
				checkEntry(t, l, e)
				total += len(e.Items)
			}
			if total != seq {
				t.Fatalf("entries carry %d items, %d were added", total, seq)
			}
		})
	}
}

// TestAggregateFillsExactlyToTheLimit builds an aggregate that lands on the limit to the
// byte and checks that the next record opens a new one.
func TestAggregateFillsExactlyToTheLimit(t *testing.T) {
	probe := kpl.NewAggregator(1<<20, 1<<20)
	for i := 0; i < 10; i++ {
		if err := probe.Add(kpl.UserRecord{PartitionKey: "k", Data: make([]byte, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	exact := probe.Size()
	l := limits(exact)
	a := NewAggregates(l)
	var out []*Entry
	for i := 0; i < 10; i++ {
		out = append(out, a.Add("s", item("k", "", 100, i))...)
	}
	if len(out) != 0 {
		t.Fatalf("%d entries sealed before the aggregate reached its limit", len(out))
	}
	out = a.Add("s", item("k", "", 100, 11))
	if len(out) != 1 || out[0].Size() != exact || len(out[0].Items) != 10 {
		t.Fatalf("sealed %d entries, first of %d bytes; want one of exactly %d bytes with 10 records", len(out), out[0].Size(), exact)
	}
	checkEntry(t, l, out[0])
}

func TestRecordCountLimitSealsAggregates(t *testing.T) {
	l := limits(51200)
	l.MaxAggregateRecords = 3
	a := NewAggregates(l)
	var out []*Entry
	for i := 0; i < 10; i++ {
		out = append(out, a.Add("s", item(fmt.Sprint(i), "", 10, i))...)
	}
	out = append(out, a.SealAll()...)
	want := []int{3, 3, 3, 1}
	if len(out) != len(want) {
		t.Fatalf("%d entries, want %d", len(out), len(want))
	}
	for i, e := range out {
		checkEntry(t, l, e)
		if len(e.Items) != want[i] {
			t.Errorf("entry %d holds %d records, want %d", i, len(e.Items), want[i])
		}
	}
}

func TestAggregatesAreKeptPerShard(t *testing.T) {
	l := limits(51200)
	a := NewAggregates(l)
	for i := 0; i < 30; i++ {
		a.Add(fmt.Sprint("shard-", i%3), item(fmt.Sprint(i), "", 10, i))
	}
	out := a.SealAll()
	if len(out) != 3 {
		t.Fatalf("%d aggregates, want one per shard (3)", len(out))
	}
	for _, e := range out {
		if len(e.Items) != 10 {
			t.Errorf("shard %s aggregate holds %d records, want 10", e.Shard, len(e.Items))
		}
		for _, it := range e.Items {
			if fmt.Sprint("shard-", it.Meta.(int)%3) != e.Shard {
				t.Fatalf("record %d in the aggregate of %s", it.Meta, e.Shard)
			}
		}
	}
}

func TestOversizedRecordGoesRawWithoutSealingTheOpenAggregate(t *testing.T) {
	l := limits(1000)
	a := NewAggregates(l)
	a.Add("s", item("a", "", 10, 1))
	a.Add("s", item("b", "", 10, 2))
	out := a.Add("s", item("big", "", 5000, 3))
	if len(out) != 1 || out[0].Aggregated() || out[0].Items[0].Meta != 3 {
		t.Fatalf("got %d entries, want the oversized record alone and raw", len(out))
	}
	if rest := a.SealAll(); len(rest) != 1 || len(rest[0].Items) != 2 {
		t.Fatal("the open aggregate was disturbed by the oversized record")
	}
}

func TestWithoutAggregationEveryRecordIsRaw(t *testing.T) {
	l := limits(51200)
	l.Aggregate = false
	a := NewAggregates(l)
	for i := 0; i < 5; i++ {
		out := a.Add("s", item("k", "123", 10, i))
		if len(out) != 1 || out[0].Aggregated() || out[0].Record.ExplicitHashKey != "123" {
			t.Fatalf("record %d: %d entries; want one raw entry keeping its explicit hash key", i, len(out))
		}
		checkEntry(t, l, out[0])
	}
	if a.Len() != 0 {
		t.Error("open aggregates without aggregation")
	}
}

func TestSealDueAndDissolve(t *testing.T) {
	l := limits(51200)
	a := NewAggregates(l)
	a.Add("old", item("a", "", 1, 10)) // added at t=10s
	a.Add("new", item("b", "", 1, 20)) // added at t=20s
	if oldest, ok := a.Oldest(); !ok || oldest.Unix() != 10 {
		t.Fatalf("Oldest = %v, %v; want 10s", oldest, ok)
	}
	due := a.SealDue(time.Unix(15, 0))
	if len(due) != 1 || due[0].Shard != "old" {
		t.Fatalf("SealDue(15s) = %d entries, want the one of shard old", len(due))
	}
	items := a.Dissolve(func(s string) bool { return s == "new" })
	if len(items) != 1 || items[0].Meta != 20 || a.Len() != 0 {
		t.Fatalf("Dissolve returned %d items, %d aggregates left; want 1 and 0", len(items), a.Len())
	}
}

// TestRequestsNeverExceedTheLimits packs random entries of sizes around the request byte
// limit's divisors and checks count and bytes, and that Fits admits an entry that fits
// exactly.
func TestRequestsNeverExceedTheLimits(t *testing.T) {
	l := limits(51200)
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1, 2, 10485, 10486, 51200, 1 << 20, (1 << 20) - 1, DefaultMaxRequestBytes / 5, DefaultMaxRequestBytes/5 + 1}
	for round := 0; round < 200; round++ {
		var req Request
		for {
			n := sizes[rng.IntN(len(sizes))]
			e := &Entry{Record: kpl.KinesisRecord{PartitionKey: "a", Data: make([]byte, n-1), UserRecords: 1}}
			if !req.Fits(e, l) {
				if len(req.Entries) < l.MaxRequestEntries && req.Bytes+e.Size() <= l.MaxRequestBytes {
					t.Fatalf("Fits refused an entry of %d bytes into %d entries / %d bytes", e.Size(), len(req.Entries), req.Bytes)
				}
				break
			}
			req.Add(e)
			if len(req.Entries) > l.MaxRequestEntries || req.Bytes > l.MaxRequestBytes {
				t.Fatalf("request of %d entries / %d bytes over the limits", len(req.Entries), req.Bytes)
			}
		}
	}
	// Exact fits at both limits.
	var req Request
	for i := 0; i < MaxRequestEntries; i++ {
		req.Add(&Entry{Record: kpl.KinesisRecord{PartitionKey: "a", UserRecords: 1}})
	}
	if req.Fits(&Entry{Record: kpl.KinesisRecord{PartitionKey: "a"}}, l) || !req.Full(l) {
		t.Error("a request of 500 entries accepts a 501st")
	}
	req = Request{}
	e := &Entry{Record: kpl.KinesisRecord{PartitionKey: "a", Data: make([]byte, DefaultMaxRequestBytes/5-1)}}
	for i := 0; i < 5; i++ {
		if !req.Fits(e, l) {
			t.Fatalf("entry %d of exactly a fifth of the byte limit refused", i)
		}
		req.Add(e)
	}
	if req.Bytes != DefaultMaxRequestBytes || req.Fits(&Entry{Record: kpl.KinesisRecord{PartitionKey: "a"}}, l) {
		t.Errorf("request at %d bytes accepts more", req.Bytes)
	}
}

func TestLimitsValidate(t *testing.T) {
	good := limits(51200)
	if err := good.Validate(); err != nil {
		t.Fatalf("default limits: %v", err)
	}
	for name, mutate := range map[string]func(*Limits){
		"aggregate over record limit": func(l *Limits) { l.MaxAggregateBytes = l.MaxRecordBytes + 1 },
		"501 entries":                 func(l *Limits) { l.MaxRequestEntries = 501 },
		"request below a record":      func(l *Limits) { l.MaxRequestBytes = l.MaxRecordBytes - 1 },
		"zero aggregate records":      func(l *Limits) { l.MaxAggregateRecords = 0 },
		"record over 10 MiB":          func(l *Limits) { l.MaxRecordBytes, l.MaxRequestBytes = MaxRecordBytes+1, MaxRecordBytes+1 },
		"request over 10 MiB":         func(l *Limits) { l.MaxRequestBytes = LargeMaxRequestBytes + 1 },
	} {
		l := good
		mutate(&l)
		if l.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, l)
		}
	}
}

// The request size rule: a stream at the default 1 MiB keeps the conservative 5 MiB per
// request; a stream that allows larger records gets the service's 10 MiB, so that any
// record it allows fits in a request.
func TestRequestBytesFollowTheStreamsRecordLimit(t *testing.T) {
	for _, tc := range []struct{ record, request int }{
		{DefaultMaxRecordBytes, 5 << 20},
		{DefaultMaxRecordBytes + 1024, 10 << 20},
		{5 << 20, 10 << 20},
		{6 << 20, 10 << 20},
		{MaxRecordBytes, 10 << 20},
	} {
		if got := RequestBytesFor(tc.record); got != tc.request {
			t.Errorf("RequestBytesFor(%d) = %d, want %d", tc.record, got, tc.request)
		}
		l := limits(51200)
		l.MaxRecordBytes, l.MaxRequestBytes = tc.record, RequestBytesFor(tc.record)
		if err := l.Validate(); err != nil {
			t.Errorf("limits for a record limit of %d: %v", tc.record, err)
		}
	}
}

// Requests to a 10 MiB stream: a record of the maximum size fits alone, records of 9 and
// 3 MiB never share a request, and no request goes over 10 MiB with the partition keys.
func TestLargeRecordsFitRequestsOfTenMiB(t *testing.T) {
	l := limits(51200)
	l.MaxRecordBytes, l.MaxRequestBytes = MaxRecordBytes, RequestBytesFor(MaxRecordBytes)
	entry := func(n int) *Entry {
		return &Entry{Record: kpl.KinesisRecord{PartitionKey: "pk", Data: make([]byte, n-2)}} // size n with the key
	}
	var req Request
	if !req.Fits(entry(MaxRecordBytes), l) {
		t.Fatal("a 10 MiB record (key included) does not fit an empty request")
	}
	if req.Fits(entry(MaxRecordBytes+1), l) {
		t.Fatal("a record one byte over 10 MiB fits a request")
	}
	// Pack a mix the way the producer does: a new request when the next entry does not fit.
	sizes := []int{9 << 20, 3 << 20, 100, 100, 3 << 20, 3 << 20, 9 << 20, 51200, 3 << 20, 1 << 20}
	var reqs []*Request
	cur := &Request{}
	for _, n := range sizes {
		e := entry(n)
		if !cur.Fits(e, l) {
			reqs = append(reqs, cur)
			cur = &Request{}
		}
		if !cur.Fits(e, l) {
			t.Fatalf("a %d-byte entry does not fit an empty request", n)
		}
		cur.Add(e)
	}
	reqs = append(reqs, cur)
	for i, r := range reqs {
		if r.Bytes > 10<<20 {
			t.Errorf("request %d holds %d bytes, over 10 MiB", i, r.Bytes)
		}
		nine, three := 0, 0
		for _, e := range r.Entries {
			switch e.Size() {
			case 9 << 20:
				nine++
			case 3 << 20:
				three++
			}
		}
		if nine > 1 || (nine == 1 && three > 0) {
			t.Errorf("request %d holds %d records of 9 MiB and %d of 3 MiB", i, nine, three)
		}
	}
	// The same mix for a 1 MiB stream would be refused record by record; its requests
	// stay within 5 MiB.
	d := limits(51200)
	var small Request
	for !small.Full(d) && small.Fits(entry(1<<20), d) {
		small.Add(entry(1 << 20))
	}
	if small.Bytes != 5<<20 {
		t.Errorf("a 1 MiB stream's request took %d bytes of 1 MiB records, want 5 MiB", small.Bytes)
	}
}
