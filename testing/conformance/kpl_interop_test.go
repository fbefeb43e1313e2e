package conformance

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
)

// updateKPLVectors rewrites the interop vectors in kinesisio/kpl/testdata/interop
// from a live run of aws-kinesis-agg:
//
//	go test ./testing/conformance -run TestKPLInterop -update-kpl-vectors
var updateKPLVectors = flag.Bool("update-kpl-vectors", false, "rewrite kinesisio/kpl/testdata/interop from aws-kinesis-agg")

// vectorDir is where the interop vectors live; kinesisio/kpl's interop_test.go
// reads them without node.
var vectorDir = filepath.Join("..", "..", "kinesisio", "kpl", "testdata", "interop")

// The vector files and the aws-kinesis-agg version that produced them.
const (
	nodeAggregatedFile = "aws-kinesis-agg-aggregated.json"
	oursAggregatedFile = "beamkinesis-aggregated.json"
	aggLibrary         = "aws-kinesis-agg 4.2.8"
)

// jsonRecord is a user record or a Kinesis record as the vector files and
// kpl-interop.js write it; Data is base64 in JSON.
type jsonRecord struct {
	PK   string `json:"pk"`
	EHK  string `json:"ehk,omitempty"`
	Data []byte `json:"data"`
}

// interopCase is one set of user records.
type interopCase struct {
	Name        string       `json:"name"`
	UserRecords []jsonRecord `json:"user_records"`
	// MaxBytes and MaxRecords are the limits of our Aggregator for this case
	// (beamkinesis file only).
	MaxBytes   int `json:"max_bytes,omitempty"`
	MaxRecords int `json:"max_records,omitempty"`
	// KinesisRecords are the records the aggregating side produced.
	KinesisRecords []jsonRecord `json:"kinesis_records"`
	// Holds is what the Kinesis records really hold, read from their bytes
	// (aws-kinesis-agg file only): the user records, except where
	// LibraryBug says why aws-kinesis-agg encoded other keys (see
	// nodeEncoded).
	Holds      []jsonRecord `json:"holds,omitempty"`
	LibraryBug string       `json:"library_bug,omitempty"`
	// NodeDeaggregated is, per Kinesis record, what aws-kinesis-agg's
	// deaggregateSync returned for it (beamkinesis file only).
	NodeDeaggregated [][]jsonRecord `json:"node_deaggregated,omitempty"`
}

// vectorFile is the content of one vector file.
type vectorFile struct {
	Comment string        `json:"comment"`
	Cases   []interopCase `json:"cases"`
}

// interopInputs returns the user record sets both directions are tested with.
func interopInputs() []interopCase {
	rec := func(pk, ehk, data string) jsonRecord { return jsonRecord{PK: pk, EHK: ehk, Data: []byte(data)} }
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	var many []jsonRecord
	for i := range 300 {
		r := jsonRecord{PK: fmt.Sprintf("k%02d", i%17), Data: bytes.Repeat([]byte{byte('a' + i%26)}, 1+i%50)}
		if i%7 == 3 {
			r.EHK = fmt.Sprintf("%d", uint64(i)*0x9E3779B97F4A7C15)
		}
		many = append(many, r)
	}
	return []interopCase{
		{Name: "two records, one partition key", UserRecords: []jsonRecord{rec("pk", "", "hello"), rec("pk", "", "world")}},
		{Name: "single record", UserRecords: []jsonRecord{rec("solo", "", "only")}},
		{Name: "distinct partition keys", UserRecords: []jsonRecord{
			rec("user-0", "", "event-0"), rec("user-1", "", "event-1"), rec("user-2", "", "event-2"),
			rec("user-3", "", "event-3"), rec("user-0", "", "event-4"), rec("user-5", "", "event-5"),
		}},
		{Name: "explicit hash keys on every record", UserRecords: []jsonRecord{
			rec("a", "0", "zero"), rec("b", "340282366920938463463374607431768211455", "max"),
			rec("c", "170141183460469231731687303715884105728", "half"), rec("d", "0", "zero again"),
		}},
		{Name: "explicit hash keys on some records, the first included", UserRecords: []jsonRecord{
			rec("p1", "12345", "with"), rec("p2", "", "without"), rec("p3", "12345", "with again"),
			rec("p1", "", "without again"), rec("p5", "999", "another"),
		}},
		{Name: "explicit hash key on a later record only", UserRecords: []jsonRecord{
			rec("first", "", "no key"), rec("second", "42", "key 42"), rec("third", "", "no key"),
		}},
		{Name: "integer-like partition keys out of order", UserRecords: []jsonRecord{
			rec("10", "", "ten"), rec("2", "", "two"), rec("x", "", "letter"), rec("10", "", "ten again"), rec("4294967295", "", "2^32-1"), rec("007", "", "leading zeros"),
		}},
		{Name: "unicode keys and binary data", UserRecords: []jsonRecord{
			{PK: "é", Data: allBytes},
			{PK: "日本語キー", Data: []byte{}},
			{PK: "emoji-😀", Data: []byte{0, 0, 0}},
			{PK: strings.Repeat("p", 256), Data: bytes.Repeat([]byte{0xF3, 0x89, 0x9A, 0xC2}, 250)},
		}},
		{Name: "300 small records", UserRecords: many, MaxBytes: 4096},
	}
}

func toUser(rs []jsonRecord) []kpl.UserRecord {
	out := make([]kpl.UserRecord, len(rs))
	for i, r := range rs {
		out[i] = kpl.UserRecord{PartitionKey: r.PK, ExplicitHashKey: r.EHK, Data: r.Data}
	}
	return out
}

func fromUser(us []kpl.UserRecord) []jsonRecord {
	out := make([]jsonRecord, len(us))
	for i, u := range us {
		out[i] = jsonRecord{PK: u.PartitionKey, EHK: u.ExplicitHashKey, Data: u.Data}
	}
	return out
}

// aggregateOurs packs records with kpl.Aggregator, starting a new Kinesis
// record whenever the current one is full.
func aggregateOurs(t *testing.T, records []jsonRecord, maxBytes, maxRecords int) []jsonRecord {
	t.Helper()
	agg := kpl.NewAggregator(maxBytes, maxRecords)
	var out []jsonRecord
	flush := func() {
		kr, err := agg.Build()
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		out = append(out, jsonRecord{PK: kr.PartitionKey, EHK: kr.ExplicitHashKey, Data: kr.Data})
		agg.Reset()
	}
	for i, u := range toUser(records) {
		err := agg.Add(u)
		if errors.Is(err, kpl.ErrFull) {
			flush()
			err = agg.Add(u)
		}
		if err != nil {
			t.Fatalf("Add record %d: %v", i, err)
		}
	}
	if agg.Len() > 0 {
		flush()
	}
	return out
}

// runInterop sends one request to kpl-interop.js.
func runInterop(t *testing.T, op string, records []jsonRecord, answer any) {
	t.Helper()
	req, err := json.Marshal(map[string]any{"op": op, "records": records})
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := emulators.RunNode(c, "kpl-interop.js", req)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, answer); err != nil {
		t.Fatalf("kpl-interop.js %s answered %q: %v", op, out, err)
	}
}

// nodeDeaggregate splits Kinesis records with aws-kinesis-agg.
func nodeDeaggregate(t *testing.T, records []jsonRecord) [][]jsonRecord {
	t.Helper()
	var ans struct {
		Results []struct {
			Records []jsonRecord `json:"records"`
			Error   string       `json:"error"`
		} `json:"results"`
	}
	runInterop(t, "deaggregate", records, &ans)
	if len(ans.Results) != len(records) {
		t.Fatalf("aws-kinesis-agg deaggregated %d records, sent %d", len(ans.Results), len(records))
	}
	out := make([][]jsonRecord, len(records))
	for i, r := range ans.Results {
		if r.Error != "" {
			t.Fatalf("aws-kinesis-agg failed to deaggregate Kinesis record %d: %s", i, r.Error)
		}
		out[i] = r.Records
	}
	return out
}

// nodeAggregate packs user records with aws-kinesis-agg.
func nodeAggregate(t *testing.T, records []jsonRecord) []jsonRecord {
	t.Helper()
	var ans struct {
		Records []jsonRecord `json:"records"`
	}
	runInterop(t, "aggregate", records, &ans)
	return ans.Records
}

// nodeEncoded returns the user records that an aggregate made by
// aws-kinesis-agg from users actually holds. The library builds its key
// tables as JavaScript objects (key -> index in order of first use) and writes
// them out with Object.keys, which lists integer-like keys ("0" .. "4294967294"
// in canonical form) first, in ascending numeric order: when such keys are not
// first used in ascending order, the tables no longer match the indices and
// records are labelled with another record's key. Its own deaggregator then
// reports the same wrong keys. For keys that are not integer-like, or come
// in ascending order, nodeEncoded(users) equals users.
func nodeEncoded(users []jsonRecord) []jsonRecord {
	pkTable, pkIndex := jsObjectTable(users, func(r jsonRecord) string { return r.PK })
	ehkTable, ehkIndex := jsObjectTable(users, func(r jsonRecord) string { return r.EHK })
	out := make([]jsonRecord, len(users))
	for i, u := range users {
		out[i] = jsonRecord{PK: pkTable[pkIndex[u.PK]], Data: u.Data}
		if u.EHK != "" {
			out[i].EHK = ehkTable[ehkIndex[u.EHK]]
		}
	}
	return out
}

// jsObjectTable returns the distinct non-empty keys of users in the order
// Object.keys lists them and each key's index in order of first use.
func jsObjectTable(users []jsonRecord, key func(jsonRecord) string) ([]string, map[string]int) {
	index := map[string]int{}
	var inOrder []string
	for _, u := range users {
		k := key(u)
		if _, ok := index[k]; k != "" && !ok {
			index[k] = len(inOrder)
			inOrder = append(inOrder, k)
		}
	}
	var ints, others []string
	for _, k := range inOrder {
		if isArrayIndex(k) {
			ints = append(ints, k)
		} else {
			others = append(others, k)
		}
	}
	slices.SortFunc(ints, func(a, b string) int {
		x, _ := strconv.ParseUint(a, 10, 64)
		y, _ := strconv.ParseUint(b, 10, 64)
		return cmp.Compare(x, y)
	})
	return append(ints, others...), index
}

// isArrayIndex reports whether JavaScript treats k as an array index
// property name: the canonical decimal form of an integer in 0 .. 2^32-2.
func isArrayIndex(k string) bool {
	n, err := strconv.ParseUint(k, 10, 64)
	return err == nil && n <= math.MaxUint32-1 && strconv.FormatUint(n, 10) == k
}

// nodeView is what aws-kinesis-agg's deaggregation reports for the user
// records of one Kinesis record, given how it mishandles records without an
// explicit hash key: protobufjs gives the absent optional
// explicit_hash_key_index its default 0, so such a record is reported with the
// aggregate's first explicit hash key table entry whenever the table is not
// empty. Our Aggregator fills the table in order of first use, so that entry
// is the first explicit hash key among the records.
func nodeView(users []jsonRecord) []jsonRecord {
	first := ""
	for _, u := range users {
		if u.EHK != "" {
			first = u.EHK
			break
		}
	}
	out := make([]jsonRecord, len(users))
	for i, u := range users {
		out[i] = u
		if u.EHK == "" {
			out[i].EHK = first
		}
	}
	return out
}

func sameRecords(a, b []jsonRecord) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].PK != b[i].PK || a[i].EHK != b[i].EHK || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

func describe(rs []jsonRecord) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == 8 && len(rs) > 10 {
			fmt.Fprintf(&b, "... %d more", len(rs)-i)
			break
		}
		fmt.Fprintf(&b, "{pk %q ehk %q %d bytes}", r.PK, r.EHK, len(r.Data))
	}
	return "[" + b.String() + "]"
}

// TestKPLInterop checks our KPL codec against aws-kinesis-agg in both
// directions, live, and that the checked-in vectors are what aws-kinesis-agg
// produces now (or rewrites them with -update-kpl-vectors).
func TestKPLInterop(t *testing.T) {
	if _, err := emulators.PackageDir("aws-kinesis-agg"); err != nil {
		emulators.Unavailable(t, err)
	}
	var nodeFile, oursFile vectorFile
	nodeFile.Comment = "Generated by testing/conformance (go test -run TestKPLInterop -update-kpl-vectors) with " + aggLibrary +
		": user_records aggregated by its RecordAggregator into kinesis_records. Do not edit."
	oursFile.Comment = "Generated by testing/conformance (go test -run TestKPLInterop -update-kpl-vectors): user_records aggregated by kinesisio/kpl.Aggregator (max_bytes, max_records; 0 means 1 MiB and no count limit) into kinesis_records, and node_deaggregated, what " +
		aggLibrary + "'s deaggregateSync (checksums on) returned for each. Do not edit."

	inputs := interopInputs()
	for _, in := range inputs {
		t.Run(in.Name, func(t *testing.T) {
			// aws-kinesis-agg aggregates, we deaggregate.
			krs := nodeAggregate(t, in.UserRecords)
			if len(krs) != 1 {
				t.Fatalf("aws-kinesis-agg made %d Kinesis records, want 1", len(krs))
			}
			var got []jsonRecord
			for i, kr := range krs {
				us, ok, err := kpl.Deaggregate(kr.Data)
				if err != nil || !ok {
					t.Fatalf("Deaggregate of aws-kinesis-agg record %d: aggregated %v, error %v", i, ok, err)
				}
				got = append(got, fromUser(us)...)
			}
			if want := nodeEncoded(in.UserRecords); !sameRecords(got, want) {
				t.Errorf("our Deaggregate of aws-kinesis-agg's aggregate = %s, want %s", describe(got), describe(want))
			}
			// aws-kinesis-agg's outer keys: the first record's partition key,
			// and the first record's explicit hash key only (none when the
			// first record has none, even if a later one does).
			if kr := krs[0]; kr.PK != in.UserRecords[0].PK || kr.EHK != in.UserRecords[0].EHK {
				t.Errorf("aws-kinesis-agg outer keys pk %q ehk %q, want the first record's, %q and %q", kr.PK, kr.EHK, in.UserRecords[0].PK, in.UserRecords[0].EHK)
			}
			nc := in
			nc.MaxBytes = 0
			nc.KinesisRecords = krs
			nc.Holds = nodeEncoded(in.UserRecords)
			if !sameRecords(nc.Holds, in.UserRecords) {
				nc.LibraryBug = "aws-kinesis-agg writes its key tables with JavaScript Object.keys, which lists integer-like keys first in ascending order, so the tables no longer match the indices and records carry other records' keys"
			}
			nodeFile.Cases = append(nodeFile.Cases, nc)

			// We aggregate, aws-kinesis-agg deaggregates.
			maxBytes, maxRecords := in.MaxBytes, in.MaxRecords
			if maxBytes == 0 {
				maxBytes = 1 << 20
			}
			if maxRecords == 0 {
				maxRecords = math.MaxInt
			}
			ours := aggregateOurs(t, in.UserRecords, maxBytes, maxRecords)
			if in.MaxBytes != 0 && len(ours) < 2 {
				t.Fatalf("limit %d bytes made %d Kinesis records, want several", in.MaxBytes, len(ours))
			}
			nodeGot := nodeDeaggregate(t, ours)
			next := 0
			for i, kr := range ours {
				users := in.UserRecords[next:]
				n := len(nodeGot[i])
				if n > len(users) {
					t.Fatalf("aws-kinesis-agg found %d user records in Kinesis record %d, only %d left", n, i, len(users))
				}
				users = users[:n]
				want := users
				if len(users) > 1 {
					want = nodeView(users)
				} else {
					// A single user record is sent raw; aws-kinesis-agg passes
					// it through with the Kinesis record's keys.
					want = []jsonRecord{{PK: kr.PK, EHK: kr.EHK, Data: kr.Data}}
					if kr.PK != users[0].PK || kr.EHK != users[0].EHK || !bytes.Equal(kr.Data, users[0].Data) {
						t.Errorf("single user record not sent raw: %s", describe([]jsonRecord{kr}))
					}
				}
				if !sameRecords(nodeGot[i], want) {
					t.Errorf("aws-kinesis-agg deaggregation of our Kinesis record %d = %s, want %s", i, describe(nodeGot[i]), describe(want))
				}
				next += n
			}
			if next != len(in.UserRecords) {
				t.Errorf("aws-kinesis-agg found %d user records in our %d Kinesis records, want %d", next, len(ours), len(in.UserRecords))
			}
			oc := in
			oc.KinesisRecords = ours
			oc.NodeDeaggregated = nodeGot
			oursFile.Cases = append(oursFile.Cases, oc)
		})
	}
	if t.Failed() || len(nodeFile.Cases) != len(inputs) || len(oursFile.Cases) != len(inputs) {
		return // vectors are only compared or written after a complete run
	}
	for _, f := range []struct {
		name string
		v    *vectorFile
	}{{nodeAggregatedFile, &nodeFile}, {oursAggregatedFile, &oursFile}} {
		fresh, err := json.MarshalIndent(f.v, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		fresh = append(fresh, '\n')
		path := filepath.Join(vectorDir, f.name)
		if *updateKPLVectors {
			if err := os.MkdirAll(vectorDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, fresh, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", path)
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading vectors: %v (regenerate with -update-kpl-vectors)", err)
		}
		if !bytes.Equal(old, fresh) {
			t.Errorf("%s is not what %s and our Aggregator produce now; regenerate with -update-kpl-vectors and review the diff", path, aggLibrary)
		}
	}
}
