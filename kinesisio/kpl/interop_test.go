package kpl_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// The vectors in testdata/interop were produced by awslabs' aws-kinesis-agg
// (npm, 4.2.8) through testing/conformance, which also runs the same checks
// live against it; these tests replay them without node. Regenerate with
//
//	go test ./testing/conformance -run TestKPLInterop -update-kpl-vectors

// vecRecord is a user record or a Kinesis record in the vector files.
type vecRecord struct {
	PK   string `json:"pk"`
	EHK  string `json:"ehk,omitempty"`
	Data []byte `json:"data"`
}

type vecCase struct {
	Name             string        `json:"name"`
	UserRecords      []vecRecord   `json:"user_records"`
	MaxBytes         int           `json:"max_bytes"`
	MaxRecords       int           `json:"max_records"`
	KinesisRecords   []vecRecord   `json:"kinesis_records"`
	Holds            []vecRecord   `json:"holds"`
	LibraryBug       string        `json:"library_bug"`
	NodeDeaggregated [][]vecRecord `json:"node_deaggregated"`
}

func loadVectors(t *testing.T, name string) []vecCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "interop", name))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []vecCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(f.Cases) == 0 {
		t.Fatalf("%s holds no cases", name)
	}
	return f.Cases
}

func sameVec(a, b []vecRecord) bool {
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

func showVec(rs []vecRecord) string {
	s := "["
	for i, r := range rs {
		if i == 6 && len(rs) > 8 {
			return s + fmt.Sprintf(" ... %d more]", len(rs)-i)
		}
		s += fmt.Sprintf(" {pk %q ehk %q %d bytes}", r.PK, r.EHK, len(r.Data))
	}
	return s + " ]"
}

// TestInteropDeaggregateAWSKinesisAgg: aggregates made by aws-kinesis-agg
// deaggregate with ours to the user records, with partition keys, explicit
// hash keys and data exact.
func TestInteropDeaggregateAWSKinesisAgg(t *testing.T) {
	for _, c := range loadVectors(t, "aws-kinesis-agg-aggregated.json") {
		t.Run(c.Name, func(t *testing.T) {
			var got []vecRecord
			for i, kr := range c.KinesisRecords {
				if !kpl.IsAggregated(kr.Data) {
					t.Fatalf("Kinesis record %d is not recognised as an aggregate", i)
				}
				us, ok, err := kpl.Deaggregate(kr.Data)
				if err != nil || !ok {
					t.Fatalf("Deaggregate of Kinesis record %d: aggregated %v, error %v", i, ok, err)
				}
				for _, u := range us {
					got = append(got, vecRecord{PK: u.PartitionKey, EHK: u.ExplicitHashKey, Data: u.Data})
				}
			}
			if !sameVec(got, c.Holds) {
				t.Errorf("Deaggregate = %s, want %s", showVec(got), showVec(c.Holds))
			}
			// Where aws-kinesis-agg encodes faithfully, that is the input.
			if c.LibraryBug == "" && !sameVec(c.Holds, c.UserRecords) {
				t.Errorf("vector holds %s but its input was %s and no library bug is recorded", showVec(c.Holds), showVec(c.UserRecords))
			}
			if c.LibraryBug != "" {
				t.Logf("aws-kinesis-agg bug in this vector: %s", c.LibraryBug)
			}
		})
	}
}

// TestInteropAggregateForAWSKinesisAgg: our Aggregator still produces, byte
// for byte, the Kinesis records that aws-kinesis-agg deaggregated when the
// vectors were made, and aws-kinesis-agg found the user records in them.
func TestInteropAggregateForAWSKinesisAgg(t *testing.T) {
	for _, c := range loadVectors(t, "beamkinesis-aggregated.json") {
		t.Run(c.Name, func(t *testing.T) {
			maxBytes, maxRecords := c.MaxBytes, c.MaxRecords
			if maxBytes == 0 {
				maxBytes = 1 << 20
			}
			if maxRecords == 0 {
				maxRecords = math.MaxInt
			}
			agg := kpl.NewAggregator(maxBytes, maxRecords)
			var built []vecRecord
			flush := func() {
				kr, err := agg.Build()
				if err != nil {
					t.Fatal(err)
				}
				built = append(built, vecRecord{PK: kr.PartitionKey, EHK: kr.ExplicitHashKey, Data: kr.Data})
				agg.Reset()
			}
			for i, r := range c.UserRecords {
				u := kpl.UserRecord{PartitionKey: r.PK, ExplicitHashKey: r.EHK, Data: r.Data}
				err := agg.Add(u)
				if errors.Is(err, kpl.ErrFull) {
					flush()
					err = agg.Add(u)
				}
				if err != nil {
					t.Fatalf("Add record %d: %v", i, err)
				}
			}
			flush()
			if !sameVec(built, c.KinesisRecords) {
				t.Fatalf("Aggregator now builds %s, the vectors hold %s: regenerate them (and re-check with aws-kinesis-agg)", showVec(built), showVec(c.KinesisRecords))
			}
			if len(c.NodeDeaggregated) != len(built) {
				t.Fatalf("vectors hold aws-kinesis-agg results for %d Kinesis records, want %d", len(c.NodeDeaggregated), len(built))
			}
			next := 0
			for i, nodeGot := range c.NodeDeaggregated {
				want := c.UserRecords[next:min(next+len(nodeGot), len(c.UserRecords))]
				if len(want) > 1 {
					want = nodeView(want)
				}
				if !sameVec(nodeGot, want) {
					t.Errorf("aws-kinesis-agg found %s in Kinesis record %d, want %s", showVec(nodeGot), i, showVec(want))
				}
				next += len(nodeGot)
			}
			if next != len(c.UserRecords) {
				t.Errorf("aws-kinesis-agg found %d user records, want %d", next, len(c.UserRecords))
			}
		})
	}
}

// nodeView is what aws-kinesis-agg's deaggregator reports for the user
// records of one of our aggregates: it gives a record without an explicit
// hash key the aggregate's first explicit hash key table entry (protobufjs
// defaults the absent optional index to 0), which our Aggregator fills with
// the first explicit hash key used. Everything else is reported as written.
func nodeView(users []vecRecord) []vecRecord {
	first := ""
	for _, u := range users {
		if u.EHK != "" {
			first = u.EHK
			break
		}
	}
	out := make([]vecRecord, len(users))
	for i, u := range users {
		out[i] = u
		if u.EHK == "" {
			out[i].EHK = first
		}
	}
	return out
}
