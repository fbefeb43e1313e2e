package kinesisio

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// ownerTestOptions are the read options of the two-jobs tests: a table with a 1 s lease.
func ownerTestOptions(srv *kinesistest.Server, dyn, table string, readTime time.Duration, extra ...ReadOption) []ReadOption {
	return connect(srv, append([]ReadOption{WithStartingPosition(TrimHorizon()), WithMaxReadTime(readTime),
		WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn), WithCheckpointLeaseDuration(time.Second),
		WithDescribeShardInterval(100 * time.Millisecond), WithPollInterval(50 * time.Millisecond),
		WithMaxFetchTime(200 * time.Millisecond)}, extra...)...)
}

// waitCommitted waits until each shard's item has a sequence-number checkpoint, and
// returns the owner of the first.
func waitCommitted(t *testing.T, dyn, table string, shards ...string) string {
	t.Helper()
	tab := leasetable.New(emulatorsDynamoDB(dyn), table)
	waitFor(t, "the first job to commit", func() bool {
		for _, id := range shards {
			l, ok, err := tab.Get(context.Background(), id)
			if err != nil || !ok || !leasetable.IsSequence(l.Checkpoint) {
				return false
			}
		}
		return true
	})
	return leaseOf(t, dyn, table, shards[0]).Owner
}

// A second job started, without WithCheckpointTakeover, on a table whose owner is alive
// (it renews its leases even on a shard with nothing new to commit) refuses: it fails
// with an error naming the table, a shard and the owner, and reads nothing. The first job
// goes on as if alone: it reads every record exactly once and keeps the leases.
func TestASecondJobRefusesATableWhoseOwnerIsAlive(t *testing.T) {
	const stream, table = "refuse", "positions"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	dyn := startDynalite(t)
	client := srv.Client()
	write := func(prefix string) { putAll(t, client, stream, newWorkload(t, prefix, 40, 0, 0).entries) }
	write("before")

	p1, s1 := beam.NewPipelineWithRoot()
	first := collect(s1, t.Name()+"/1", Read(s1, stream, ownerTestOptions(srv, dyn, table, 6*time.Second)...))
	errs := make(chan error, 1)
	go func() { errs <- ptest.Run(p1) }()
	owner1 := waitCommitted(t, dyn, table, "shardId-000000000000", "shardId-000000000001")

	p2, s2 := beam.NewPipelineWithRoot()
	second := collect(s2, t.Name()+"/2", Read(s2, stream, ownerTestOptions(srv, dyn, table, 3*time.Second)...))
	err2 := ptest.Run(p2)
	write("after")
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if err2 == nil {
		t.Fatal("job 2 ran alongside job 1; want it to refuse")
	}
	for _, want := range []string{"checkpoint table " + table, "shardId-00000000000", fmt.Sprintf("owner %q", owner1), "refuses", "WithCheckpointTakeover()"} {
		if !strings.Contains(err2.Error(), want) {
			t.Errorf("job 2's error does not say %q: %v", want, err2)
		}
	}
	if n := len(second.get()); n != 0 {
		t.Errorf("job 2 read %d records; want none", n)
	}
	assertSameRecords(t, first.get(), expected(t, srv, stream, nil, nil))
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
		if l := leaseOf(t, dyn, table, id); l.Owner != owner1 {
			t.Errorf("%s: owner %q; want job 1's %q", id, l.Owner, owner1)
		}
	}
}

// With WithCheckpointTakeover() a second job takes the leases of a live owner at once.
// The first job learns it at its next commit or lease renewal, logs it and stops reading
// those shards: records written after it lost both leases reach only the second job. Each
// job reads each record at most once, together they read every record, and the table ends
// at each shard's last record, held by the second job.
func TestASecondJobTakesTheLeasesOverAndTheFirstStops(t *testing.T) {
	const stream, table = "takeover", "positions"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	dyn := startDynalite(t)
	client := srv.Client()
	write := func(prefix string) { putAll(t, client, stream, newWorkload(t, prefix, 40, 0, 0).entries) }
	write("before")

	p1, s1 := beam.NewPipelineWithRoot()
	first := collect(s1, t.Name()+"/1", Read(s1, stream, ownerTestOptions(srv, dyn, table, 8*time.Second)...))
	errs := make(chan error, 1)
	go func() { errs <- ptest.Run(p1) }()
	shards := []string{"shardId-000000000000", "shardId-000000000001"}
	owner1 := waitCommitted(t, dyn, table, shards...)

	p2, s2 := beam.NewPipelineWithRoot()
	second := collect(s2, t.Name()+"/2", Read(s2, stream, ownerTestOptions(srv, dyn, table, 5*time.Second, WithCheckpointTakeover())...))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		waitFor(t, "job 2 to take over", func() bool {
			return leaseOf(t, dyn, table, "shardId-000000000000").Owner != owner1 && leaseOf(t, dyn, table, "shardId-000000000001").Owner != owner1
		})
		write("during")
		waitFor(t, "job 1 to lose both leases", func() bool { return len(leasesLost(table, owner1, shards...)) == 2 })
		// Job 1 may still finish the calls it had begun; records after this are past them.
		time.Sleep(500 * time.Millisecond)
		write("late")
	}()
	err2 := ptest.Run(p2)
	<-wrote
	if err2 != nil {
		t.Fatal(err2)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if lost := leasesLost(table, owner1, shards...); len(lost) != 2 {
		t.Errorf("job 1 lost the leases of %v; want both shards'", lost)
	}
	got1, got2 := first.get(), second.get()
	for i, got := range [][]string{got1, got2} {
		for r, n := range countsOf(got) {
			if n > 1 {
				t.Errorf("job %d read %d× %s; a job reads each record once", i+1, n, r)
			}
		}
	}
	all := expected(t, srv, stream, nil, nil)
	var late []string
	for _, r := range all {
		if strings.Contains(r, `"late plain`) {
			late = append(late, r)
		}
	}
	c1, c2 := countsOf(got1), countsOf(got2)
	union := map[string]bool{}
	for _, r := range append(append([]string{}, got1...), got2...) {
		union[r] = true
	}
	if len(union) != len(all) || len(late) != 40 {
		t.Errorf("the jobs read %d distinct records of %d (%d late)", len(union), len(all), len(late))
	}
	for _, r := range all {
		if !union[r] {
			t.Errorf("no job read %s", r)
		}
	}
	for _, r := range late {
		if c1[r] != 0 || c2[r] != 1 {
			t.Errorf("late record %s read %d× by job 1 and %d× by job 2; want 0 and 1", r, c1[r], c2[r])
		}
	}
	stored, _ := srv.StreamRecords(stream)
	lastSeq := map[string]string{}
	for _, r := range stored {
		lastSeq[r.ShardID] = r.SequenceNumber
	}
	for shard, seq := range lastSeq {
		if l := leaseOf(t, dyn, table, shard); l.Owner == owner1 || l.Checkpoint != seq {
			t.Errorf("%s: lease %+v; want job 2's at the last record %s", shard, l, seq)
		}
	}
	t.Logf("%d records; job 1 read %d, job 2 read %d; %d read by both", len(all), len(got1), len(got2), len(got1)+len(got2)-len(all))
}

// leasesLost returns those of shards whose lease owner's handle on table in this process
// found taken over by another owner.
func leasesLost(table, owner string, shards ...string) []string {
	checkpointers.mu.Lock()
	defer checkpointers.mu.Unlock()
	var lost []string
	for k, c := range checkpointers.m {
		if k.table != table || k.owner != owner {
			continue
		}
		for _, id := range shards {
			if _, ok := c.LostTo(id); ok {
				lost = append(lost, id)
			}
		}
	}
	return lost
}
