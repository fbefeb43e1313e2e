package kcl

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// Both directions use a 3-shard stream of 150 plain records and 30 KPL aggregates of 10
// user records (450 user records), with KCL checkpointing every 7 records, so checkpoints
// fall inside aggregates and the sub-sequence number carries the position.
const (
	shards          = 3
	plainRecords    = 150
	aggregates      = 30
	perAggregate    = 10
	userRecords     = plainRecords + aggregates*perAggregate
	checkpointEvery = 7
	failover        = 2 * time.Second // the KCL consumer's --failover-ms
)

// setup starts the kinesistest server with stream filled by the workload, and dynalite.
func setup(t *testing.T, stream string) (*kinesistest.Server, string, []rec) {
	t.Helper()
	components.KCLT(t) // fail (or skip) before anything runs when the consumer is not built
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, shards))
	dyn := emulators.StartT(t, emulators.Dynalite).URL()
	aggs := map[string][]kpl.UserRecord{}
	put(t, srv.Client(), stream, "r", plainRecords, aggregates, perAggregate, aggs)
	all := stored(t, srv, stream, aggs)
	if len(all) != userRecords {
		t.Fatalf("the stream holds %d user records, want %d", len(all), userRecords)
	}
	return srv, dyn, all
}

// setupSplit starts the kinesistest server and dynalite for the scenarios across a split:
// stream has two shards, 20 plain records, then shard 0 is split and 240 plain records and
// 12 aggregates of perAggregate follow. When app is not empty, the lease table app is
// created first with the two shards' leases as KCL's shard sync writes them, before the
// split. It returns every user record the stream holds.
func setupSplit(t *testing.T, stream, app string) (*kinesistest.Server, string, []rec) {
	t.Helper()
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	dyn := emulators.StartT(t, emulators.Dynalite).URL()
	client := srv.Client()
	if app != "" {
		db := dynamo(dyn)
		createLeaseTable(t, db, app)
		seedLeases(t, db, client, app, stream)
	}
	aggs := map[string][]kpl.UserRecord{}
	put(t, client, stream, "before", 20, 0, 0, aggs)
	splitShard(t, client, stream, "shardId-000000000000")
	put(t, client, stream, "after", 240, 12, perAggregate, aggs)
	return srv, dyn, stored(t, srv, stream, aggs)
}

// intoTheChildren is how many records a KCL consumer must process before it stops on a
// stream of setupSplit so that it has read into the children, which it does only after the
// parent's SHARD_END: 20 more than the parent and the other open shard hold. (With a fixed
// count, a KCL that took shard 1's lease first could stop before it read shard 0.)
func intoTheChildren(all []rec) int {
	n := 20
	for _, r := range all {
		if r.Shard == "shardId-000000000000" || r.Shard == "shardId-000000000001" {
			n++
		}
	}
	return n
}

// readByBoth counts the records of got that the KCL consumer also processed.
func readByBoth(kcl, got []rec) int {
	kclSeen := countsOf(strs(kcl))
	n := 0
	for _, r := range strs(got) {
		if kclSeen[r] > 0 {
			n++
		}
	}
	return n
}

// readBounded runs a beamkinesis ReadBounded of stream on the checkpoint table and returns
// what it read.
func readBounded(t *testing.T, srv *kinesistest.Server, dyn, stream, table, key string, extra ...kinesisio.ReadOption) []rec {
	t.Helper()
	return runBounded(t, srv, dyn, stream, table, key, func(s beam.Scope, opts []kinesisio.ReadOption) beam.PCollection {
		return kinesisio.ReadBounded(s, stream, opts...)
	}, extra...)
}

// readBoundedWithCommit is readBounded with the held commit (WithCommitAfterSinks): the
// positions are committed after the records' sink, here the read's output itself.
func readBoundedWithCommit(t *testing.T, srv *kinesistest.Server, dyn, stream, table, key string, extra ...kinesisio.ReadOption) []rec {
	t.Helper()
	return runBounded(t, srv, dyn, stream, table, key, func(s beam.Scope, opts []kinesisio.ReadOption) beam.PCollection {
		var commit kinesisio.Commit
		recs := kinesisio.ReadBounded(s, stream, append(opts, kinesisio.WithCommitAfterSinks(&commit))...)
		commit.After(s, recs)
		return recs
	}, extra...)
}

// runBounded runs the bounded read that read builds on the checkpoint table and returns
// what it read.
func runBounded(t *testing.T, srv *kinesistest.Server, dyn, stream, table, key string, read func(beam.Scope, []kinesisio.ReadOption) beam.PCollection, extra ...kinesisio.ReadOption) []rec {
	t.Helper()
	opts := append([]kinesisio.ReadOption{
		kinesisio.WithEndpoint(srv.URL()), kinesisio.WithRegion("us-east-1"), kinesisio.WithStaticCredentials("test", "test"),
		kinesisio.WithStartingPosition(kinesisio.TrimHorizon()),
		kinesisio.WithCheckpointTable(table), kinesisio.WithCheckpointTableEndpoint(dyn),
		kinesisio.WithCheckpointLeaseDuration(failover),
	}, extra...)
	p, s := beam.NewPipelineWithRoot()
	got := collect(s, key, read(s, opts))
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	return got.get()
}

// KCL → beamkinesis: a KCL application consumes part of the stream, checkpointing every 7
// records, and shuts down gracefully; a beamkinesis ReadBounded on KCL's lease table takes
// the leases over once KCL's worker has stopped renewing them, and reads exactly the records
// after KCL's checkpoints. The only records read by both are those KCL processed after its
// last checkpoint of each shard.
func TestKCLThenBeamkinesis(t *testing.T) {
	const stream, app, kclRecords = "kcl-first", "kcl-first-app", 250
	srv, dyn, all := setup(t, stream)
	db := dynamo(dyn)
	createLeaseTable(t, db, app)
	seedLeases(t, db, srv.Client(), app, stream)

	start := time.Now()
	k := runKCL(t, kcl31(t), srv.URL(), dyn, stream, app, "kcl-worker-1", kclRecords, checkpointEvery)
	if len(k.Records) != kclRecords {
		t.Fatalf("KCL wrote %d records, want %d", len(k.Records), kclRecords)
	}
	for r, n := range countsOf(strs(k.Records)) {
		if n > 1 {
			t.Errorf("KCL processed %d× %s", n, r)
		}
	}
	byKCL := leases(t, db, app)
	for id, l := range byKCL {
		t.Logf("KCL's item of %s: %s", id, describe(l.Item))
		if l.Owner != "kcl-worker-1" {
			t.Errorf("after KCL, %s is owned by %q, want kcl-worker-1", id, l.Owner)
		}
	}
	committed, uncommitted := split(t, k.Records, byKCL)
	subCheckpoints := 0
	for _, l := range byKCL {
		if l.Sub > 0 {
			subCheckpoints++
		}
	}
	t.Logf("KCL: %d records in %v, %d checkpointed, %d after its last checkpoints; %d of %d checkpoints inside an aggregate",
		len(k.Records), k.Took.Round(time.Millisecond), len(committed), len(uncommitted), subCheckpoints, len(byKCL))
	_, want := split(t, all, byKCL)

	beamStart := time.Now()
	got := readBounded(t, srv, dyn, stream, app, t.Name())
	assertSame(t, "beamkinesis after KCL", got, want)
	dups := readByBoth(k.Records, got)
	if dups != len(uncommitted) {
		t.Errorf("%d records were read by both KCL and beamkinesis; want the %d KCL processed after its last checkpoints", dups, len(uncommitted))
	}
	union := countsOf(append(strs(k.Records), strs(got)...))
	for _, r := range strs(all) {
		if union[r] == 0 {
			t.Errorf("neither KCL nor beamkinesis read %s", r)
		}
	}
	after := leases(t, db, app)
	for id, l := range after {
		if !strings.HasPrefix(l.Owner, "beamkinesis-") {
			t.Errorf("after beamkinesis, %s is owned by %q", id, l.Owner)
		}
		if l.Counter <= byKCL[id].Counter {
			t.Errorf("after beamkinesis, the lease counter of %s is %d, not above KCL's %d", id, l.Counter, byKCL[id].Counter)
		}
	}
	t.Logf("beamkinesis: %d records in %v (takeover of KCL's leases after %v unrenewed included); %d read by both (KCL's uncommitted tail); %d of %d records read in all; whole test %v",
		len(got), time.Since(beamStart).Round(time.Millisecond), failover, dups, len(union), len(all), time.Since(start).Round(time.Millisecond))
}

// beamkinesis → KCL: a beamkinesis ReadBounded reads part of every shard (WithMaxRecords,
// which ends inside aggregates) and commits its positions; a KCL application started on
// the same table (application name = table name) takes the leases over and processes
// exactly the records after beamkinesis's checkpoints: nothing lost, nothing read again.
func TestBeamkinesisThenKCL(t *testing.T) {
	const stream, table, perShard = "beam-first", "beam-first-app", 47
	srv, dyn, all := setup(t, stream)
	db := dynamo(dyn)

	start := time.Now()
	got := readBounded(t, srv, dyn, stream, table, t.Name(), kinesisio.WithMaxRecords(perShard))
	if len(got) != shards*perShard {
		t.Fatalf("beamkinesis read %d records, want %d (%d per shard)", len(got), shards*perShard, perShard)
	}
	byBeam := leases(t, db, table)
	subCheckpoints := 0
	for id, l := range byBeam {
		t.Logf("beamkinesis's item of %s: %s", id, describe(l.Item))
		if l.Sub > 0 {
			subCheckpoints++
		}
	}
	committed, want := split(t, all, byBeam)
	assertSame(t, "beamkinesis's committed records", got, committed)
	t.Logf("beamkinesis: %d records in %v, all committed; %d of %d checkpoints inside an aggregate", len(got), time.Since(start).Round(time.Millisecond), subCheckpoints, len(byBeam))

	k := runKCL(t, kcl31(t), srv.URL(), dyn, stream, table, "kcl-worker-2", len(want), checkpointEvery)
	assertSame(t, "KCL after beamkinesis", k.Records, want)
	after := leases(t, db, table)
	for id, l := range after {
		t.Logf("KCL's item of %s: %s", id, describe(l.Item))
		if l.Owner != "kcl-worker-2" {
			t.Errorf("after KCL, %s is owned by %q, want kcl-worker-2", id, l.Owner)
		}
	}
	t.Logf("KCL: %d records in %v, 0 read again; whole test %v", len(k.Records), k.Took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func countsOf(ss []string) map[string]int {
	m := map[string]int{}
	for _, s := range ss {
		m[s]++
	}
	return m
}

// beamkinesis → KCL across a split: shard 0 of two is split after a few records; a
// beamkinesis ReadBounded reads the parent to its end (its item says SHARD_END with both
// children in childShardIds, the children's items name it in parentShardId) and part of every
// other shard; a KCL application then continues on the table: it leaves the closed parent
// alone and reads exactly the children's and the other shard's records after beamkinesis's
// checkpoints.
func TestBeamkinesisThenKCLAcrossASplit(t *testing.T) {
	testBeamkinesisThenKCLAcrossASplit(t, "beam-split", "beam-split-app", readBounded)
}

// TestBeamkinesisHeldCommitThenKCLAcrossASplit is the same with the commit held until
// after the sink (WithCommitAfterSinks), which marks the split parent's pendingCheckpoint
// SHARD_END before its checkpoint: KCL must take the items over as well.
func TestBeamkinesisHeldCommitThenKCLAcrossASplit(t *testing.T) {
	testBeamkinesisThenKCLAcrossASplit(t, "beam-held-split", "beam-held-split-app", readBoundedWithCommit)
}

func testBeamkinesisThenKCLAcrossASplit(t *testing.T, stream, table string,
	read func(t *testing.T, srv *kinesistest.Server, dyn, stream, table, key string, extra ...kinesisio.ReadOption) []rec) {
	const perShard = 40
	components.KCLT(t)
	srv, dyn, all := setupSplit(t, stream, "")
	db := dynamo(dyn)

	start := time.Now()
	got := read(t, srv, dyn, stream, table, t.Name(), kinesisio.WithMaxRecords(perShard))
	byBeam := leases(t, db, table)
	for id, l := range byBeam {
		t.Logf("beamkinesis's item of %s: %s", id, describe(l.Item))
	}
	parent := byBeam["shardId-000000000000"]
	if parent.Checkpoint != "SHARD_END" {
		t.Fatalf("the split parent's checkpoint is %q, want SHARD_END", parent.Checkpoint)
	}
	if ch := stringSet(parent.Item["childShardIds"]); len(ch) != 2 || ch[0] != "shardId-000000000002" || ch[1] != "shardId-000000000003" {
		t.Errorf("the parent's childShardIds are %v, want {shardId-000000000002 shardId-000000000003} as a string set", ch)
	}
	for _, c := range []string{"shardId-000000000002", "shardId-000000000003"} {
		if ps := stringSet(byBeam[c].Item["parentShardId"]); len(ps) != 1 || ps[0] != "shardId-000000000000" {
			t.Errorf("the parentShardId of %s is %v, want {shardId-000000000000} as a string set", c, ps)
		}
	}
	committed, want := split(t, all, byBeam)
	assertSame(t, "beamkinesis's committed records", got, committed)
	t.Logf("beamkinesis: %d records in %v, all committed; %d left", len(got), time.Since(start).Round(time.Millisecond), len(want))

	k := runKCL(t, kcl31(t), srv.URL(), dyn, stream, table, "kcl-worker-3", len(want), checkpointEvery)
	assertSame(t, "KCL after beamkinesis, across the split", k.Records, want)
	for id, l := range leases(t, db, table) {
		t.Logf("KCL's item of %s: %s", id, describe(l.Item))
	}
	t.Logf("KCL: %d records in %v, 0 read again, none of the closed parent; whole test %v", len(k.Records), k.Took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// KCL → beamkinesis across a split: the lease table starts with the two shards open before
// shard 0 is split; KCL reads the parent to its end, checkpoints SHARD_END, creates its
// children's leases itself and reads part of them; a beamkinesis ReadBounded on KCL's table
// leaves the closed parent alone and reads exactly the records after KCL's checkpoints in the
// children and the other shard.
func TestKCLThenBeamkinesisAcrossASplit(t *testing.T) {
	const stream, app = "kcl-split", "kcl-split-app"
	components.KCLT(t)
	srv, dyn, all := setupSplit(t, stream, app)
	db := dynamo(dyn)

	start := time.Now()
	k := runKCL(t, kcl31(t), srv.URL(), dyn, stream, app, "kcl-worker-4", intoTheChildren(all), checkpointEvery)
	byKCL := leases(t, db, app)
	for id, l := range byKCL {
		t.Logf("KCL's item of %s: %s", id, describe(l.Item))
	}
	parent := byKCL["shardId-000000000000"]
	if parent.Checkpoint != "SHARD_END" {
		t.Fatalf("KCL left the split parent at %q, want SHARD_END", parent.Checkpoint)
	}
	for _, c := range []string{"shardId-000000000002", "shardId-000000000003"} {
		if ps := stringSet(byKCL[c].Item["parentShardId"]); len(ps) != 1 || ps[0] != "shardId-000000000000" {
			t.Fatalf("KCL's parentShardId of %s is %v, want {shardId-000000000000}", c, ps)
		}
	}
	committed, uncommitted := split(t, k.Records, byKCL)
	_, want := split(t, all, byKCL)
	t.Logf("KCL: %d records in %v, %d checkpointed, %d after its last checkpoints", len(k.Records), k.Took.Round(time.Millisecond), len(committed), len(uncommitted))

	got := readBounded(t, srv, dyn, stream, app, t.Name())
	assertSame(t, "beamkinesis after KCL, across the split", got, want)
	dups := readByBoth(k.Records, got)
	if dups != len(uncommitted) {
		t.Errorf("%d records were read by both; want the %d KCL processed after its last checkpoints", dups, len(uncommitted))
	}
	t.Logf("beamkinesis: %d records; %d read by both (KCL's uncommitted tail); whole test %v", len(got), dups, time.Since(start).Round(time.Millisecond))
}

// A beamkinesis read started while a KCL application still runs on the table does not take
// its leases: the KCL worker renews them (their lease counters move within the failover
// time), so the read fails naming the worker, and KCL's leases and checkpoints stay as they
// are. Once KCL is stopped by a signal (graceful shutdown), a read continues after KCL's
// checkpoints.
func TestBeamkinesisRefusesTheLeasesOfARunningKCLWorker(t *testing.T) {
	const stream, app, worker = "kcl-live", "kcl-live-app", "kcl-worker-5"
	srv, dyn, all := setup(t, stream)
	db := dynamo(dyn)
	createLeaseTable(t, db, app)
	seedLeases(t, db, srv.Client(), app, stream)

	p := startKCL(t, kcl31(t), srv.URL(), dyn, stream, app, worker, 0, checkpointEvery)
	deadline := time.Now().Add(30 * time.Second)
	for {
		owned := 0
		for _, l := range leases(t, db, app) {
			if l.Owner == worker && l.Checkpoint != "TRIM_HORIZON" {
				owned++
			}
		}
		if owned == shards {
			break
		}
		if time.Now().After(deadline) {
			p.stop(t)
			t.Fatalf("KCL holds and has checkpointed %d of %d leases after 30s; its log:\n%s", owned, shards, tail(p.wait(t).Log, 40))
		}
		time.Sleep(100 * time.Millisecond) // polling the table: KCL offers no event to wait on
	}

	opts := []kinesisio.ReadOption{
		kinesisio.WithEndpoint(srv.URL()), kinesisio.WithRegion("us-east-1"), kinesisio.WithStaticCredentials("test", "test"),
		kinesisio.WithStartingPosition(kinesisio.TrimHorizon()),
		kinesisio.WithCheckpointTable(app), kinesisio.WithCheckpointTableEndpoint(dyn),
		kinesisio.WithCheckpointLeaseDuration(failover),
	}
	pl, s := beam.NewPipelineWithRoot()
	refused := collect(s, t.Name()+"/refused", kinesisio.ReadBounded(s, stream, opts...))
	err := ptest.Run(pl)
	if err == nil || !strings.Contains(err.Error(), "alive") || !strings.Contains(err.Error(), worker) {
		p.stop(t)
		p.wait(t)
		t.Fatalf("a read on the leases of a running KCL worker ended with %v; want an error naming the live worker %s", err, worker)
	}
	if n := len(refused.get()); n != 0 {
		t.Errorf("the refused read emitted %d records", n)
	}

	p.stop(t)
	k := p.wait(t)
	byKCL := leases(t, db, app)
	for id, l := range byKCL {
		if l.Owner != worker {
			t.Errorf("after the refused read and KCL's shutdown, %s is owned by %q, want %s", id, l.Owner, worker)
		}
	}
	for r, n := range countsOf(strs(k.Records)) {
		if n > 1 {
			t.Errorf("KCL processed %d× %s", n, r)
		}
	}
	_, uncommitted := split(t, k.Records, byKCL)
	_, want := split(t, all, byKCL)
	got := readBounded(t, srv, dyn, stream, app, t.Name()+"/after")
	assertSame(t, "beamkinesis after KCL's graceful shutdown on SIGTERM", got, want)
	t.Logf("KCL (stopped by SIGTERM): %d records in %v, %d after its last checkpoints; beamkinesis then read %d", len(k.Records), k.Took.Round(time.Millisecond), len(uncommitted), len(got))
}
