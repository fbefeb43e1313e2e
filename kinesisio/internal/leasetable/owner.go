package leasetable

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Renew increments the lease counter of the lease owner holds, as KCL's lease renewer
// does: another application watching the counter sees a live owner. known may be stale (a
// commit of another worker of the same owner moved the counter); then the lease is read
// again. A lease held by another owner gives a *LostError.
func (t *Table) Renew(ctx context.Context, known Lease, owner string) (Lease, error) {
	cur := known
	fresh := false
	for attempt := 0; ; attempt++ {
		if cur.Owner == owner {
			next := cur
			next.Counter = cur.Counter + 1
			err := t.update(ctx, cur, next, "SET #c = :c", map[string]types.AttributeValue{})
			if err == nil {
				return next, nil
			}
			var failed *types.ConditionalCheckFailedException
			if !errors.As(err, &failed) || attempt >= 10 {
				return cur, fmt.Errorf("leasetable: renewing the lease of %s in table %s: %w", cur.ShardID, t.name, err)
			}
		} else if fresh {
			return cur, &LostError{ShardID: cur.ShardID, Owner: cur.Owner, Counter: cur.Counter}
		}
		l, ok, err := t.Get(ctx, known.ShardID)
		if err != nil {
			return cur, err
		}
		if !ok {
			return cur, fmt.Errorf("leasetable: the lease of %s is gone from table %s (deleted while the read ran?): %w", known.ShardID, t.name, ErrLeaseGone)
		}
		cur, fresh = l, true
	}
}

// ErrLeaseInUse says a lease's counter moved while a taker waited for it to expire: its
// owner is alive.
var ErrLeaseInUse = errors.New("leasetable: the lease's owner is alive")

// TakeOverExpired makes owner the holder of seen, a lease of another owner whose counter
// the caller watched stand still for a lease duration (KCL's expiry rule). The write is
// conditional on that counter and owner: if the owner renewed or committed in the meantime,
// nothing is written and ErrLeaseInUse is returned.
func (t *Table) TakeOverExpired(ctx context.Context, seen Lease, owner string) (Lease, error) {
	next := seen
	next.Owner, next.Counter, next.OwnerSwitches, next.Pending = owner, seen.Counter+1, seen.OwnerSwitches+1, ""
	err := t.update(ctx, seen, next, "SET #o = :o, #c = :c, #s = :s REMOVE #p", map[string]types.AttributeValue{
		":o": &types.AttributeValueMemberS{Value: owner},
		":s": number(next.OwnerSwitches),
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return seen, fmt.Errorf("taking over the lease of %s in table %s from owner %q: %w", seen.ShardID, t.name, seen.Owner, ErrLeaseInUse)
	case err != nil:
		return seen, fmt.Errorf("leasetable: taking over the lease of %s in table %s: %w", seen.ShardID, t.name, err)
	}
	return next, nil
}

// Prepare writes pending as the prepared checkpoint (KCL's pendingCheckpoint) of the lease
// owner holds, and increments its counter. A lease already closed (ShardEnd) or with that
// prepared checkpoint is left as it is. known may be stale; a lease held by another owner
// gives a *LostError.
func (t *Table) Prepare(ctx context.Context, known Lease, owner, pending string) (Lease, error) {
	cur := known
	fresh := false
	for attempt := 0; ; attempt++ {
		switch {
		case cur.Owner == owner && fresh && (cur.Checkpoint == ShardEnd || cur.Pending == pending):
			return cur, nil
		case cur.Owner == owner && cur.Checkpoint != ShardEnd && cur.Pending != pending:
			next := cur
			next.Counter, next.Pending = cur.Counter+1, pending
			err := t.update(ctx, cur, next, "SET #p = :p, #c = :c", map[string]types.AttributeValue{
				":p": &types.AttributeValueMemberS{Value: pending},
			})
			if err == nil {
				return next, nil
			}
			var failed *types.ConditionalCheckFailedException
			if !errors.As(err, &failed) || attempt >= 10 {
				return cur, fmt.Errorf("leasetable: preparing checkpoint %s for %s in table %s: %w", pending, cur.ShardID, t.name, err)
			}
		case cur.Owner != owner && fresh:
			return cur, &LostError{ShardID: cur.ShardID, Owner: cur.Owner, Counter: cur.Counter}
		}
		l, ok, err := t.Get(ctx, known.ShardID)
		if err != nil {
			return cur, err
		}
		if !ok {
			return cur, fmt.Errorf("leasetable: the lease of %s is gone from table %s (deleted while the read ran?): %w", known.ShardID, t.name, ErrLeaseGone)
		}
		cur, fresh = l, true
	}
}
