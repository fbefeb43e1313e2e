package kinesisio

import (
	"strings"
	"testing"
)

const (
	seqA = "49590338271490256608559692538361571095921575989136588898"
	seqB = "49590338271490256608559692538361571095921575989136588899"
	seqC = "49590338271490256608559692538361571095921575989136589000"
)

func rec(seq string, sub int64, last bool) recordClaim {
	return recordClaim{Pos: recordPosition{Seq: seq, Sub: sub}, Last: last, ArrivalMs: 1000}
}

func TestTrackerClaimsStrictlyIncreasingPositions(t *testing.T) {
	tr := newShardTracker(shardRestriction{StartKind: startTrimHorizon})
	for _, c := range []recordClaim{rec(seqA, 0, false), rec(seqA, 1, true), rec(seqB, 0, true)} {
		if !tr.TryClaim(c) {
			t.Fatalf("TryClaim(%v) = false: %v", c.Pos, tr.GetError())
		}
	}
	if tr.TryClaim(rec(seqA, 1, true)) {
		t.Fatalf("claiming an earlier position succeeded")
	}
	if err := tr.GetError(); err == nil || !strings.Contains(err.Error(), "does not follow") {
		t.Fatalf("GetError() = %v, want a does-not-follow error", err)
	}
	if tr.IsDone() {
		t.Errorf("IsDone() = true for a tracker in error")
	}
}

func TestTrackerRejectsClaimsAtOrBeforeTheResumePosition(t *testing.T) {
	for _, c := range []struct {
		name string
		rest shardRestriction
		bad  recordClaim
		good recordClaim
	}{
		{"inside aggregate", shardRestriction{StartKind: startAfterSubSequence, StartSeq: seqA, StartSub: 2}, rec(seqA, 2, false), rec(seqA, 3, true)},
		{"after record", shardRestriction{StartKind: startAfterSequence, StartSeq: seqA}, rec(seqA, 5, false), rec(seqB, 0, true)},
		{"at sequence", shardRestriction{StartKind: startAtSequence, StartSeq: seqB}, rec(seqA, 0, true), rec(seqB, 0, true)},
	} {
		tr := newShardTracker(c.rest)
		if tr.TryClaim(c.bad) {
			t.Errorf("%s: claim of %v succeeded", c.name, c.bad.Pos)
		}
		tr = newShardTracker(c.rest)
		if !tr.TryClaim(c.good) {
			t.Errorf("%s: claim of %v failed: %v", c.name, c.good.Pos, tr.GetError())
		}
	}
}

func TestTrackerCheckpointInsideAggregateResumesAtSubSequence(t *testing.T) {
	start := shardRestriction{StartKind: startAtTimestamp, StartTimeMs: 5, MaxRecords: 10, Claimed: 3}
	tr := newShardTracker(start)
	tr.TryClaim(rec(seqA, 0, false))
	tr.TryClaim(rec(seqA, 1, false))
	prim, res, err := tr.TrySplit(0)
	if err != nil {
		t.Fatal(err)
	}
	wantPrim := start
	wantPrim.EndSeq, wantPrim.EndSub = seqA, 1
	if prim.(shardRestriction) != wantPrim {
		t.Errorf("primary = %+v, want %+v", prim, wantPrim)
	}
	wantRes := shardRestriction{StartKind: startAfterSubSequence, StartSeq: seqA, StartSub: 1, VerifiedMs: 1000, MaxRecords: 10, Claimed: 5}
	if res.(shardRestriction) != wantRes {
		t.Errorf("residual = %+v, want %+v", res, wantRes)
	}
	if !tr.IsDone() {
		t.Errorf("tracker not done after TrySplit(0)")
	}
	// The residual re-reads the aggregate and accepts only the rest of it.
	next := newShardTracker(res.(shardRestriction))
	if next.TryClaim(rec(seqA, 1, false)) {
		t.Errorf("residual accepted the already claimed sub-record")
	}
	next = newShardTracker(res.(shardRestriction))
	if !next.TryClaim(rec(seqA, 2, true)) {
		t.Errorf("residual refused the next sub-record: %v", next.GetError())
	}
}

func TestTrackerCheckpointAfterWholeRecordResumesAfterSequence(t *testing.T) {
	tr := newShardTracker(shardRestriction{StartKind: startTrimHorizon})
	tr.TryClaim(rec(seqA, 0, true))
	_, res, _ := tr.TrySplit(0)
	want := shardRestriction{StartKind: startAfterSequence, StartSeq: seqA, VerifiedMs: 1000, Claimed: 1}
	if res.(shardRestriction) != want {
		t.Errorf("residual = %+v, want %+v", res, want)
	}
}

func TestTrackerCheckpointBeforeAnyClaimKeepsTheStart(t *testing.T) {
	start := shardRestriction{StartKind: startAtTimestamp, StartTimeMs: 1234}
	tr := newShardTracker(start)
	if !tr.TryClaim(caughtUpClaim{AtMs: 5000}) {
		t.Fatalf("caught-up claim on an open restriction failed")
	}
	prim, res, _ := tr.TrySplit(0)
	if p := prim.(shardRestriction); !p.Empty {
		t.Errorf("primary = %+v, want empty", p)
	}
	want := start
	want.VerifiedMs = 5000
	if res.(shardRestriction) != want {
		t.Errorf("residual = %+v, want %+v", res, want)
	}
	if !tr.IsDone() {
		t.Errorf("tracker not done after TrySplit(0)")
	}
}

func TestTrackerRefusesFractionalSplits(t *testing.T) {
	start := shardRestriction{StartKind: startTrimHorizon}
	tr := newShardTracker(start)
	tr.TryClaim(rec(seqA, 0, true))
	for _, f := range []float64{0.5, 0.01, 1} {
		prim, res, err := tr.TrySplit(f)
		if err != nil || res != nil || prim.(shardRestriction) != start {
			t.Errorf("TrySplit(%v) = %v, %v, %v; want the unchanged restriction and nil residual", f, prim, res, err)
		}
	}
	if tr.IsDone() {
		t.Errorf("a refused split made the tracker done")
	}
	if !tr.TryClaim(rec(seqB, 0, true)) {
		t.Errorf("claim after refused split failed: %v", tr.GetError())
	}
}

func TestTrackerShardEndFinishesWithNilResidual(t *testing.T) {
	tr := newShardTracker(shardRestriction{StartKind: startTrimHorizon})
	tr.TryClaim(rec(seqA, 0, true))
	if tr.TryClaim(shardEndClaim{}) {
		t.Errorf("shard-end claim returned true")
	}
	if !tr.IsDone() || tr.GetError() != nil {
		t.Fatalf("IsDone() = %v, GetError() = %v after shard end", tr.IsDone(), tr.GetError())
	}
	if _, res, _ := tr.TrySplit(0); res != nil {
		t.Errorf("residual after shard end = %v, want nil", res)
	}
	if tr.TryClaim(rec(seqB, 0, true)) || tr.GetError() == nil {
		t.Errorf("claim after done was accepted or not reported")
	}
}

func TestTrackerMaxRecordsCountsAcrossCheckpoints(t *testing.T) {
	tr := newShardTracker(shardRestriction{StartKind: startTrimHorizon, MaxRecords: 3})
	tr.TryClaim(rec(seqA, 0, true))
	tr.TryClaim(rec(seqB, 0, true))
	_, res, _ := tr.TrySplit(0)
	next := newShardTracker(res.(shardRestriction))
	if !next.TryClaim(rec(seqC, 0, true)) {
		t.Fatalf("third record refused: %v", next.GetError())
	}
	if !next.IsDone() {
		t.Errorf("tracker not done after the last allowed record")
	}
	if _, res, _ := next.TrySplit(0); res != nil {
		t.Errorf("residual after the record limit = %v, want nil", res)
	}
	if done, remaining := next.GetProgress(); done != 1 || remaining != 0 {
		t.Errorf("GetProgress() = %v, %v; want 1, 0", done, remaining)
	}
}

func TestTrackerEndTimeStopsAtLaterArrivalOrCaughtUp(t *testing.T) {
	tr := newShardTracker(shardRestriction{StartKind: startTrimHorizon, EndTimeMs: 2000})
	if !tr.TryClaim(recordClaim{Pos: recordPosition{Seq: seqA}, Last: true, ArrivalMs: 2000}) {
		t.Fatalf("record arriving at the end time refused")
	}
	if tr.TryClaim(recordClaim{Pos: recordPosition{Seq: seqB}, Last: true, ArrivalMs: 2001}) {
		t.Errorf("record arriving after the end time accepted")
	}
	if !tr.IsDone() || tr.GetError() != nil {
		t.Errorf("IsDone() = %v, GetError() = %v", tr.IsDone(), tr.GetError())
	}

	tr = newShardTracker(shardRestriction{StartKind: startTrimHorizon, EndTimeMs: 2000})
	if !tr.TryClaim(caughtUpClaim{AtMs: 1999}) {
		t.Errorf("caught up before the end time ended the restriction")
	}
	if tr.TryClaim(caughtUpClaim{AtMs: 2000}) || !tr.IsDone() {
		t.Errorf("caught up at the end time did not end the restriction")
	}
	if !tr.IsBounded() {
		t.Errorf("restriction with an end time is not bounded")
	}
	if newShardTracker(shardRestriction{StartKind: startTrimHorizon}).IsBounded() {
		t.Errorf("open restriction reports bounded")
	}
}

func TestTrackerPrimaryEndStopsBeyondIt(t *testing.T) {
	tr := newShardTracker(shardRestriction{StartKind: startTrimHorizon, EndSeq: seqA, EndSub: 1})
	if !tr.TryClaim(rec(seqA, 0, false)) {
		t.Fatal(tr.GetError())
	}
	if tr.TryClaim(rec(seqA, 2, true)) {
		t.Errorf("claim beyond the end accepted")
	}
	if !tr.IsDone() {
		t.Errorf("not done after a claim beyond the end")
	}
}

func TestTrackerEmptyRestrictionIsDone(t *testing.T) {
	tr := newShardTracker(shardRestriction{Empty: true})
	if !tr.IsDone() {
		t.Errorf("empty restriction not done")
	}
	if _, res, _ := tr.TrySplit(0); res != nil {
		t.Errorf("residual of an empty restriction = %v", res)
	}
}

func TestDiscoveryTrackerCheckpointsAndEnds(t *testing.T) {
	tr := &discoveryTracker{}
	if !tr.TryClaim(pollClaim{StartMs: 100, Listed: []string{"a", "b"}, ReadStartMs: 100, EndTimeMs: 250}) {
		t.Fatal(tr.GetError())
	}
	prim, res, _ := tr.TrySplit(0)
	if !prim.(discoveryRestriction).Done || !tr.IsDone() {
		t.Errorf("primary %+v not done", prim)
	}
	r := res.(discoveryRestriction)
	if r.Done || r.LastPollMs != 100 || r.ReadStartMs != 100 || r.EndTimeMs != 250 || strings.Join(r.Shards, ",") != "a,b" {
		t.Errorf("residual = %+v", r)
	}
	next := &discoveryTracker{rest: r}
	if !next.TryClaim(pollClaim{StartMs: 200, Listed: []string{"b", "c"}}) || next.IsDone() {
		t.Errorf("poll before the end time: done=%v err=%v", next.IsDone(), next.GetError())
	}
	if !next.TryClaim(pollClaim{StartMs: 300, Listed: []string{"c"}}) || !next.IsDone() {
		t.Errorf("poll after the end time did not finish discovery")
	}
	if _, res, _ := next.TrySplit(0); res != nil {
		t.Errorf("residual after the end = %v", res)
	}
	if _, res, _ := (&discoveryTracker{}).TrySplit(0.5); res != nil {
		t.Errorf("fractional split of discovery = %v", res)
	}
}
