package kpl

import (
	"encoding/hex"
	"math"
	"math/rand"
	"runtime"
	"testing"
)

// benchRecords returns n user records of 100 data bytes with 36-character
// partition keys (UUID-sized), distinct or all the same.
func benchRecords(n int, distinctKeys bool) []UserRecord {
	rng := rand.New(rand.NewSource(7))
	recs := make([]UserRecord, n)
	shared := "00000000-0000-0000-0000-000000000000"
	for i := range recs {
		data := make([]byte, 100)
		rng.Read(data)
		pk := shared
		if distinctKeys {
			k := make([]byte, 18)
			rng.Read(k)
			pk = hex.EncodeToString(k)
		}
		recs[i] = UserRecord{PartitionKey: pk, Data: data}
	}
	return recs
}

// reportPerRecord adds records/s, ns/record and allocs/record for a loop that
// handled records user records in total.
func reportPerRecord(b *testing.B, records int, mallocs uint64) {
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(records)/sec, "records/s")
	b.ReportMetric(sec*1e9/float64(records), "ns/record")
	b.ReportMetric(float64(mallocs)/float64(records), "allocs/record")
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// BenchmarkAggregate measures the writer's work per user record: Add, and a
// Build + Reset each time a 51200-byte aggregate (the KPL default) fills.
func BenchmarkAggregate(b *testing.B) {
	for _, bc := range []struct {
		name     string
		distinct bool
	}{{"keys=distinct", true}, {"keys=one", false}} {
		b.Run(bc.name, func(b *testing.B) {
			recs := benchRecords(4096, bc.distinct)
			a := NewAggregator(51200, math.MaxInt)
			var sink int
			b.ReportAllocs()
			m0 := mallocs()
			b.ResetTimer()
			for i := range b.N {
				r := recs[i%len(recs)]
				if err := a.Add(r); err != nil {
					kr, _ := a.Build()
					sink += len(kr.Data)
					a.Reset()
					if err := a.Add(r); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			reportPerRecord(b, b.N, mallocs()-m0)
			_ = sink
		})
	}
}

// BenchmarkDeaggregate measures the reader's work per user record, splitting
// 51200-byte aggregates of 100-byte records.
func BenchmarkDeaggregate(b *testing.B) {
	for _, bc := range []struct {
		name     string
		distinct bool
	}{{"keys=distinct", true}, {"keys=one", false}} {
		b.Run(bc.name, func(b *testing.B) {
			a := NewAggregator(51200, math.MaxInt)
			for _, r := range benchRecords(4096, bc.distinct) {
				if a.Add(r) != nil {
					break
				}
			}
			kr, _ := a.Build()
			n := kr.UserRecords
			b.SetBytes(int64(len(kr.Data)))
			b.ReportAllocs()
			m0 := mallocs()
			b.ResetTimer()
			for range b.N {
				recs, aggregated, err := Deaggregate(kr.Data)
				if err != nil || !aggregated || len(recs) != n {
					b.Fatal(aggregated, err, len(recs))
				}
			}
			b.StopTimer()
			reportPerRecord(b, b.N*n, mallocs()-m0)
		})
	}
}

// BenchmarkHashPartitionKey measures routing a UUID-sized partition key.
func BenchmarkHashPartitionKey(b *testing.B) {
	recs := benchRecords(1024, true)
	var sink uint64
	b.ReportAllocs()
	m0 := mallocs()
	b.ResetTimer()
	for i := range b.N {
		sink += HashPartitionKey(recs[i%len(recs)].PartitionKey).Lo
	}
	b.StopTimer()
	reportPerRecord(b, b.N, mallocs()-m0)
	_ = sink
}
