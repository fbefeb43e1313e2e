package kpl_test

import (
	"errors"
	"fmt"
	"math"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// A writer packs the user records bound for one shard into aggregates no
// larger than its limit; a reader splits each Kinesis record it gets back.
func Example() {
	agg := kpl.NewAggregator(51200, math.MaxInt) // the KPL's default size limit
	var out []kpl.KinesisRecord
	flush := func() {
		if agg.Len() == 0 {
			return
		}
		kr, err := agg.Build()
		if err != nil {
			panic(err)
		}
		out = append(out, kr) // send with PutRecords: PartitionKey, ExplicitHashKey, Data
		agg.Reset()
	}
	for _, r := range []kpl.UserRecord{
		{PartitionKey: "user-1", Data: []byte("signed up")},
		{PartitionKey: "user-2", Data: []byte("logged in")},
		{PartitionKey: "user-1", Data: []byte("logged out")},
	} {
		err := agg.Add(r)
		if errors.Is(err, kpl.ErrFull) {
			flush()
			err = agg.Add(r)
		}
		if err != nil {
			fmt.Println("cannot send:", err) // invalid key or too large: report, don't drop silently
		}
	}
	flush()

	for _, kr := range out {
		fmt.Printf("Kinesis record: key %q, hash key %s, %d bytes, %d user records\n",
			kr.PartitionKey, kr.ExplicitHashKey, kr.Size(), kr.UserRecords)

		recs, aggregated, err := kpl.Deaggregate(kr.Data)
		if err != nil || !aggregated {
			fmt.Println("not an aggregate:", err)
			continue
		}
		for i, r := range recs {
			fmt.Printf("  sub-sequence %d: %s %q\n", i, r.PartitionKey, r.Data)
		}
	}
	// Output:
	// Kinesis record: key "a", hash key 285573413173782752570879317399258818820, 83 bytes, 3 user records
	//   sub-sequence 0: user-1 "signed up"
	//   sub-sequence 1: user-2 "logged in"
	//   sub-sequence 2: user-1 "logged out"
}

// HashPartitionKey and ParseUint128 route a record: the shard whose hash key
// range holds the key receives it.
func ExampleHashPartitionKey() {
	start, _ := kpl.ParseUint128("170141183460469231731687303715884105728") // 2^127
	end := kpl.MaxUint128
	k := kpl.HashPartitionKey("pk")
	fmt.Println(k, k.Cmp(start) >= 0 && k.Cmp(end) <= 0)
	// Output: 38317986088707300215492326132921849533 false
}
