package leasetable_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// Renewing moves the lease counter and nothing else, also from a stale view of the lease
// (another worker of the same owner committed); a renewal of a lease another owner took
// reports the loss and writes nothing.
func TestRenewMovesTheCounterAndFindsALostLease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *dynamodb.Client) {
		ctx := context.Background()
		tab := newTable(t, db)
		a, _, err := tab.Acquire(ctx, leasetable.Lease{ShardID: "s", Checkpoint: leasetable.TrimHorizon}, "job-a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tab.Commit(ctx, a, "job-a", leasetable.Position{Seq: "10", Sub: 2}, nil); err != nil {
			t.Fatal(err)
		}
		r, err := tab.Renew(ctx, a, "job-a") // a is stale: counter 1, the item is at 2
		if err != nil || r.Counter != 3 || r.Checkpoint != "10" || r.Sub != 2 || r.Owner != "job-a" {
			t.Fatalf("renew = %+v, %v; want counter 3 at 10/2", r, err)
		}
		b, _, err := tab.Acquire(ctx, leasetable.Lease{ShardID: "s"}, "job-b")
		if err != nil {
			t.Fatal(err)
		}
		_, err = tab.Renew(ctx, r, "job-a")
		var lost *leasetable.LostError
		if !errors.As(err, &lost) || lost.Owner != "job-b" || lost.Counter != b.Counter {
			t.Fatalf("renewal after the take over = %v; want the lease lost to job-b at %d", err, b.Counter)
		}
		if got, _, _ := tab.Get(ctx, "s"); got.Owner != "job-b" || got.Counter != b.Counter {
			t.Errorf("lease %+v after the failed renewal; want job-b's at %d", got, b.Counter)
		}
	})
}

// An expired lease (its counter as the taker last saw it) is taken over; one whose owner
// renewed in the meantime is not, and says its owner is alive.
func TestTakeOverExpiredOnlyTakesALeaseWhoseCounterStoodStill(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *dynamodb.Client) {
		ctx := context.Background()
		tab := newTable(t, db)
		a, _, err := tab.Acquire(ctx, leasetable.Lease{ShardID: "s", Checkpoint: leasetable.TrimHorizon}, "job-a")
		if err != nil {
			t.Fatal(err)
		}
		seen := a
		if a, err = tab.Renew(ctx, a, "job-a"); err != nil {
			t.Fatal(err)
		}
		if _, err := tab.TakeOverExpired(ctx, seen, "job-b"); !errors.Is(err, leasetable.ErrLeaseInUse) {
			t.Fatalf("take over of a renewed lease = %v; want ErrLeaseInUse", err)
		}
		b, err := tab.TakeOverExpired(ctx, a, "job-b")
		if err != nil || b.Owner != "job-b" || b.Counter != a.Counter+1 || b.OwnerSwitches != 1 {
			t.Fatalf("take over of an expired lease = %+v, %v", b, err)
		}
		if got, _, _ := tab.Get(ctx, "s"); got.Owner != "job-b" || got.Counter != b.Counter || got.Checkpoint != leasetable.TrimHorizon {
			t.Errorf("stored %+v; want job-b's lease at %d", got, b.Counter)
		}
	})
}
