package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestAnchorsQuick runs the quick --anchors pass (Beam Java KinesisIO beside this connector)
// when BEAMKINESIS_ANCHORS=1 and java and mvn are on PATH. A missing toolchain skips the test,
// or fails it when BEAMKINESIS_REQUIRE_ANCHORS=1. It checks that this connector's side is
// exact in every case and that Beam Java's plain, aggregated and enhanced fan-out reads and its
// write ran; it asserts nothing about
// speed, nor about Beam Java's resharding results, which the table reports.
func TestAnchorsQuick(t *testing.T) {
	if os.Getenv("BEAMKINESIS_ANCHORS") != "1" {
		t.Skip("set BEAMKINESIS_ANCHORS=1 to run the Beam Java KinesisIO comparison (needs java and mvn, and Maven Central or a warm ~/.m2)")
	}
	if err := anchorToolchain(); err != nil {
		if os.Getenv("BEAMKINESIS_REQUIRE_ANCHORS") == "1" {
			t.Fatalf("BEAMKINESIS_REQUIRE_ANCHORS=1 but the toolchain is missing: %v", err)
		}
		t.Skipf("Beam Java anchor skipped: %v", err)
	}
	cfg := anchorsQuickConfig()
	cfg.Log = testWriter{t}
	a, err := runAnchors(context.Background(), cfg)
	if a != nil {
		var b strings.Builder
		if werr := writeAnchorsTable(&b, DescribeMachine(), "anchors, quick", a); werr == nil {
			t.Log("\n" + b.String())
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Rows) != 6 {
		t.Fatalf("got %d rows, want 6", len(a.Rows))
	}
	for _, r := range a.Rows {
		if !r.Ours.Complete || r.Ours.Got != r.Want {
			t.Errorf("%s: beamkinesis got %+v, want %+v", r.Case, r.Ours.Got, r.Want)
		}
	}
	// Plain, aggregated, enhanced fan-out and the write.
	for _, r := range a.Rows[:4] {
		if !r.Java.Complete || r.Java.Got != r.Want {
			t.Errorf("%s: Beam Java got %+v (complete %v), want %+v", r.Case, r.Java.Got, r.Java.Complete, r.Want)
		}
	}
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
