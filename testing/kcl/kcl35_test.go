package kcl

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

// KCL 3.5 keeps its worker metrics and its coordinator state in the lease table, each item
// marked by an entityType other than LEASE: an application without a CoordinatorState table
// (a new one) from its start, an older one once its migrateAllEntitiesToLeaseTable migration
// completed (hours of bake time, so not run here). On such a table, across a split, the
// application is handed over both ways. KCL 3.5.1, with migrateAllEntitiesToLeaseTable on,
// reads the split parent to its end, creates the children's leases (entityType LEASE) and
// reads into them; a beamkinesis ReadBounded takes the table over at once
// (WithCheckpointTakeover) and reads part of every open shard, exactly from KCL's checkpoints,
// and leaves KCL's other items as they were; the KCL application, started again, then reads
// exactly the records after beamkinesis's checkpoints. It starts again as the same worker:
// under a new worker id, KCL's leader counts the stopped worker as alive while its metrics
// item is recent, hands it leases, and once they expire KCL reads its own last records of
// them again.
func TestKCL35SingleTableHandsOverBothWaysAcrossASplit(t *testing.T) {
	const stream, app, perShard = "kcl35-single", "kcl35-single-app", 25
	k := kcl35(t)
	// The two open shards' leases as KCL 3.1 wrote them (no entityType): an application that
	// upgraded. They also spare KCL its random wait of up to 30 s on an empty table.
	srv, dyn, all := setupSplit(t, stream, app)
	db := dynamo(dyn)

	start := time.Now()
	k1 := runKCL(t, k, srv.URL(), dyn, stream, app, "kcl35-worker-1", intoTheChildren(all), checkpointEvery, "--single-table", "true")
	if !strings.Contains(k1.Log, "migrateAllEntitiesToLeaseTable is on") {
		t.Errorf("the KCL %s consumer did not turn migrateAllEntitiesToLeaseTable on; its log:\n%s", k.Version, tail(k1.Log, 20))
	}
	byKCL := leases(t, db, app)
	others := otherItems(t, db, app)
	for id, l := range byKCL {
		t.Logf("KCL %s's lease %s: %s", k.Version, id, describe(l.Item))
	}
	for id, item := range others {
		t.Logf("KCL %s's other item %s: %s", k.Version, id, describe(item))
	}
	if got := byKCL["shardId-000000000000"].Checkpoint; got != "SHARD_END" {
		t.Fatalf("KCL left the split parent at %q, want SHARD_END", got)
	}
	for _, c := range []string{"shardId-000000000002", "shardId-000000000003"} {
		if e := entityType(byKCL[c].Item); e != "LEASE" {
			t.Errorf("the entityType of the child lease %s KCL created is %q, want LEASE", c, e)
		}
	}
	// KCL's own items: its worker's metrics and its client version state; the leader lock
	// too while a worker runs (KCL deletes it when it shuts down gracefully).
	want := map[string]string{"kcl35-worker-1": "WORKER_METRIC_STATS", "Migration3.0": "CLIENT_VERSION_MIGRATION"}
	for key, e := range want {
		if got := entityType(others[key]); got != e {
			t.Errorf("KCL's item %s has entityType %q, want %s", key, got, e)
		}
	}
	for key, item := range others {
		if _, ok := want[key]; !ok && !(key == "Leader" && entityType(item) == "LEADER") {
			t.Errorf("KCL wrote an unexpected item %s: %s", key, describe(item))
		}
	}
	tables, err := db.ListTables(context.Background(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tables.TableNames, []string{app}) {
		t.Errorf("tables %v; want the lease table %s only: KCL 3.5 keeps everything in it", tables.TableNames, app)
	}
	_, uncommitted := split(t, k1.Records, byKCL)
	_, afterKCL := split(t, all, byKCL)
	t.Logf("KCL %s: %d records in %v, %d after its last checkpoints", k.Version, len(k1.Records), k1.Took.Round(time.Millisecond), len(uncommitted))

	beamStart := time.Now()
	got := readBounded(t, srv, dyn, stream, app, t.Name(), kinesisio.WithMaxRecords(perShard), kinesisio.WithCheckpointTakeover())
	byBeam := leases(t, db, app)
	for id, l := range byBeam {
		t.Logf("beamkinesis's lease %s: %s", id, describe(l.Item))
		if l.Checkpoint != "SHARD_END" && !strings.HasPrefix(l.Owner, "beamkinesis-") {
			t.Errorf("after beamkinesis, the open shard %s is owned by %q", id, l.Owner)
		}
	}
	readByBeam, afterBeam := split(t, afterKCL, byBeam)
	assertSame(t, "beamkinesis after KCL 3.5", got, readByBeam)
	if len(got) == 0 || len(afterBeam) == 0 {
		t.Fatalf("beamkinesis read %d records and left %d: the scenario needs both", len(got), len(afterBeam))
	}
	dups := readByBoth(k1.Records, got)
	if dups != len(uncommitted) {
		t.Errorf("%d records were read by both KCL and beamkinesis; want the %d KCL processed after its last checkpoints", dups, len(uncommitted))
	}
	for _, c := range []string{"shardId-000000000002", "shardId-000000000003"} {
		if e := entityType(byBeam[c].Item); e != "LEASE" {
			t.Errorf("after beamkinesis, the entityType of %s is %q, want KCL's LEASE kept", c, e)
		}
	}
	if now := otherItems(t, db, app); !reflect.DeepEqual(now, others) {
		t.Errorf("beamkinesis changed KCL's other items:\n%v\nwant\n%v", now, others)
	}
	t.Logf("beamkinesis: %d records in %v (took KCL's leases at once), %d read by both (KCL's uncommitted tail)", len(got), time.Since(beamStart).Round(time.Millisecond), dups)

	k2 := runKCL(t, k, srv.URL(), dyn, stream, app, "kcl35-worker-1", len(afterBeam), checkpointEvery, "--single-table", "true")
	assertSame(t, "KCL 3.5 after beamkinesis", k2.Records, afterBeam)
	for id, l := range leases(t, db, app) {
		if strings.HasPrefix(l.Owner, "beamkinesis-") && l.Checkpoint != "SHARD_END" {
			t.Errorf("after KCL started again, beamkinesis still holds the open shard %s", id)
		}
	}
	union := countsOf(append(append(strs(k1.Records), strs(got)...), strs(k2.Records)...))
	for _, r := range strs(all) {
		if union[r] == 0 {
			t.Errorf("no reader read %s", r)
		}
	}
	t.Logf("KCL %s again: %d records in %v, 0 read again; %d of %d records read in all; whole test %v", k.Version, len(k2.Records), k2.Took.Round(time.Millisecond), len(union), len(all), time.Since(start).Round(time.Millisecond))
}
