// Package leasetable keeps shard positions in a DynamoDB table laid out as a KCL 2.x/3.x lease
// table: one item per shard keyed leaseKey = shard id, with the checkpoint, its
// sub-sequence number, the lease owner and counter, the parents, the children and the hash
// key range, so that a KCL application can read the table as its own and continue, and the
// reverse.
//
// KCL 3.5 keeps more than leases in the table: its coordinator state (the client version
// migration, the leader lock, the table migration, stream ids) and its workers' metrics live
// there too, each item marked by an entityType other than "LEASE". Leases carry entityType
// "LEASE" when KCL 3.5 created them and none when KCL 2.x, KCL 3.0–3.4 or this package did.
// Such an item is never read as a lease: reading one at a shard's key fails with ErrNotALease.
//
// Every write is conditional on the lease counter and owner the writer last saw, and a
// checkpoint is only ever replaced by a later one, so a late commit of an old bundle can
// never move a position back, and a job whose lease was taken over stops writing.
package leasetable

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/seqnum"
)

// The symbolic checkpoints KCL writes besides sequence numbers.
const (
	TrimHorizon = "TRIM_HORIZON"
	Latest      = "LATEST"
	AtTimestamp = "AT_TIMESTAMP"
	ShardEnd    = "SHARD_END"
)

// OwnerIndex is the global secondary index KCL 3 expects on a lease table. It is created with
// the table: dynalite refuses to add it later with UpdateTable, as KCL would.
const OwnerIndex = "LeaseOwnerToLeaseKeyIndex"

// Attribute names of a KCL lease item.
const (
	attrKey            = "leaseKey"
	attrCheckpoint     = "checkpoint"
	attrSub            = "checkpointSubSequenceNumber"
	attrCounter        = "leaseCounter"
	attrOwner          = "leaseOwner"
	attrOwnerSwitches  = "ownerSwitchesSinceCheckpoint"
	attrParents        = "parentShardId"
	attrChildren       = "childShardIds"
	attrStartingHash   = "startingHashKey"
	attrEndingHash     = "endingHashKey"
	attrPending        = "pendingCheckpoint"
	attrEntityType     = "entityType"
	tableActiveTimeout = 2 * time.Minute
)

// Lease is one shard's item.
type Lease struct {
	ShardID string
	// Checkpoint is the sequence number of the last record processed, or one of TrimHorizon,
	// Latest, AtTimestamp, ShardEnd; Sub is the user record's sub-sequence number inside a
	// KPL aggregate (0 for a plain record).
	Checkpoint    string
	Sub           int64
	Counter       int64
	Owner         string
	OwnerSwitches int64
	Parents       []string
	Children      []string
	// StartingHashKey and EndingHashKey are the shard's hash key range (decimal).
	StartingHashKey string
	EndingHashKey   string
	// Pending is KCL's pendingCheckpoint: a checkpoint prepared and not yet made. A job
	// whose commits wait for its sinks writes ShardEnd here once a shard is read to its end
	// (Prepare); readers of the table resume from Checkpoint, never from Pending.
	Pending string
}

// Position is a checkpoint: a sequence number and sub-sequence number, or ShardEnd.
type Position struct {
	Seq string
	Sub int64
}

// Compare orders checkpoints: symbolic starts before every sequence number, sequence numbers
// numerically then by sub-sequence, ShardEnd after everything.
func Compare(a, b Position) int {
	ra, rb := rank(a.Seq), rank(b.Seq)
	if ra != rb {
		return ra - rb
	}
	if ra != 1 {
		return 0
	}
	if c := seqnum.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	switch {
	case a.Sub < b.Sub:
		return -1
	case a.Sub > b.Sub:
		return 1
	}
	return 0
}

func rank(seq string) int {
	switch seq {
	case ShardEnd:
		return 2
	case TrimHorizon, Latest, AtTimestamp, "":
		return 0
	}
	return 1
}

// IsSequence reports whether a checkpoint names a record (not a symbolic position).
func IsSequence(checkpoint string) bool { return rank(checkpoint) == 1 }

// ErrLeaseLost says another owner holds the shard's lease now.
var ErrLeaseLost = errors.New("leasetable: the lease is held by another owner")

// ErrLeaseGone says the shard's item is no longer in the table.
var ErrLeaseGone = errors.New("leasetable: the lease item is gone")

// ErrNotALease says the item at a shard's key is one of KCL 3.5's other items (its worker
// metrics, its coordinator state), not a shard lease.
var ErrNotALease = errors.New("leasetable: the item is not a shard lease")

// entityLease is the entityType of a lease. KCL 3.5 reads an item without entityType, or
// with one that is not a string, as a lease (DynamoDBLeaseSerializer), and so does decode.
const entityLease = "LEASE"

// LostError is the ErrLeaseLost of one shard: who holds the lease now.
type LostError struct {
	ShardID string
	Owner   string
	Counter int64
}

func (e *LostError) Error() string {
	return fmt.Sprintf("leasetable: the lease of %s is now held by owner %q (lease counter %d)", e.ShardID, e.Owner, e.Counter)
}

// Unwrap makes errors.Is(err, ErrLeaseLost) hold.
func (e *LostError) Unwrap() error { return ErrLeaseLost }

// Table is a lease table. It is safe for concurrent use.
type Table struct {
	db   *dynamodb.Client
	name string
}

// New returns the table name reached through db.
func New(db *dynamodb.Client, name string) *Table { return &Table{db: db, name: name} }

// Name returns the table's name.
func (t *Table) Name() string { return t.name }

// Ensure creates the table if it does not exist (on-demand billing, hash key leaseKey, the
// OwnerIndex index) and waits until it is active. It reports whether it created it.
func (t *Table) Ensure(ctx context.Context) (created bool, err error) {
	_, err = t.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.name)})
	var missing *types.ResourceNotFoundException
	switch {
	case err == nil:
		return false, t.waitActive(ctx)
	case !errors.As(err, &missing):
		return false, fmt.Errorf("leasetable: describing table %s: %w", t.name, err)
	}
	_, err = t.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(t.name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrOwner), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(OwnerIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrOwner), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // another worker may have created it first
		return false, fmt.Errorf("leasetable: creating table %s: %w", t.name, err)
	}
	return err == nil, t.waitActive(ctx)
}

func (t *Table) waitActive(ctx context.Context) error {
	w := dynamodb.NewTableExistsWaiter(t.db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 2*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.name)}, tableActiveTimeout); err != nil {
		return fmt.Errorf("leasetable: waiting for table %s to be active: %w", t.name, err)
	}
	return nil
}

// Get reads a shard's lease with a strongly consistent read; ok is false when it has none.
func (t *Table) Get(ctx context.Context, shardID string) (l Lease, ok bool, err error) {
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(t.name),
		Key:            map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: shardID}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Lease{}, false, fmt.Errorf("leasetable: reading the lease of %s from table %s: %w", shardID, t.name, err)
	}
	if out.Item == nil {
		return Lease{}, false, nil
	}
	l, err = decode(out.Item)
	if err != nil {
		return Lease{}, false, fmt.Errorf("leasetable: the lease of %s in table %s: %w", shardID, t.name, err)
	}
	return l, true, nil
}

// Acquire makes owner the holder of want.ShardID's lease. A shard without an item gets one
// made from want (its checkpoint is the initial position); a lease held by another owner is
// taken over (lease counter and owner switches incremented), and the previous holder is
// returned so the caller can say so. The lease as it now stands is returned.
func (t *Table) Acquire(ctx context.Context, want Lease, owner string) (now Lease, previous *Lease, err error) {
	for attempt := 0; ; attempt++ {
		cur, ok, err := t.Get(ctx, want.ShardID)
		if err != nil {
			return Lease{}, nil, err
		}
		if !ok {
			l := want
			l.Owner, l.Counter, l.OwnerSwitches = owner, 1, 0
			_, err = t.db.PutItem(ctx, &dynamodb.PutItemInput{
				TableName:           aws.String(t.name),
				Item:                encode(l),
				ConditionExpression: aws.String("attribute_not_exists(" + attrKey + ")"),
			})
			if err == nil {
				return l, nil, nil
			}
		} else {
			if cur.Owner == owner {
				return cur, nil, nil
			}
			l := cur
			// A checkpoint the previous owner prepared is its own, not the new owner's.
			l.Owner, l.Counter, l.OwnerSwitches, l.Pending = owner, cur.Counter+1, cur.OwnerSwitches+1, ""
			err = t.update(ctx, cur, l, "SET #o = :o, #c = :c, #s = :s REMOVE #p", map[string]types.AttributeValue{
				":o": &types.AttributeValueMemberS{Value: owner},
				":s": number(l.OwnerSwitches),
			})
			if err == nil {
				return l, &cur, nil
			}
		}
		var failed *types.ConditionalCheckFailedException
		if !errors.As(err, &failed) || attempt >= 10 {
			return Lease{}, nil, fmt.Errorf("leasetable: acquiring the lease of %s in table %s: %w", want.ShardID, t.name, err)
		}
	}
}

// Commit moves the checkpoint of the lease l (as owner last saw it) to pos, and closes it
// (ShardEnd) with children when pos is ShardEnd. A pos not after the stored checkpoint
// changes nothing. It returns the lease as it now stands; a lease held by another owner
// gives a *LostError. known may be stale: on a failed condition the lease is read again.
func (t *Table) Commit(ctx context.Context, known Lease, owner string, pos Position, children []string) (Lease, error) {
	cur := known
	fresh := false
	for attempt := 0; ; attempt++ {
		if cur.Owner != owner {
			if !fresh {
				goto reread
			}
			return cur, &LostError{ShardID: cur.ShardID, Owner: cur.Owner, Counter: cur.Counter}
		}
		if Compare(pos, Position{Seq: cur.Checkpoint, Sub: cur.Sub}) <= 0 {
			// Stored checkpoints only move forward, so the table holds this or later.
			return cur, nil
		}
		{
			next := cur
			next.Checkpoint, next.Sub, next.Counter, next.OwnerSwitches = pos.Seq, pos.Sub, cur.Counter+1, 0
			expr := "SET #k = :k, #n = :n, #c = :c, #s = :zero"
			vals := map[string]types.AttributeValue{
				":k":    &types.AttributeValueMemberS{Value: pos.Seq},
				":n":    number(pos.Sub),
				":zero": number(0),
			}
			if pos.Seq == ShardEnd && len(children) > 0 {
				next.Children = children
				expr += ", #ch = :ch"
				vals[":ch"] = &types.AttributeValueMemberSS{Value: children}
			}
			if pos.Seq == ShardEnd && cur.Pending != "" {
				next.Pending = ""
				expr += " REMOVE #p"
			}
			err := t.update(ctx, cur, next, expr, vals)
			if err == nil {
				return next, nil
			}
			var failed *types.ConditionalCheckFailedException
			if !errors.As(err, &failed) || attempt >= 10 {
				return cur, fmt.Errorf("leasetable: committing %s/%d for %s to table %s: %w", pos.Seq, pos.Sub, cur.ShardID, t.name, err)
			}
		}
	reread:
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

// update writes expr to the lease if its counter and owner are still those of cur. expr may
// use #k #n #c #o #s #ch #p for the attributes and must set #c to :c.
func (t *Table) update(ctx context.Context, cur, next Lease, expr string, vals map[string]types.AttributeValue) error {
	vals[":c"] = number(next.Counter)
	vals[":oldc"] = number(cur.Counter)
	vals[":oldo"] = &types.AttributeValueMemberS{Value: cur.Owner}
	names := map[string]string{"#c": attrCounter, "#o": attrOwner}
	for ph, name := range map[string]string{"#k": attrCheckpoint, "#n": attrSub, "#s": attrOwnerSwitches, "#ch": attrChildren, "#p": attrPending} {
		if containsPlaceholder(expr, ph) {
			names[ph] = name
		}
	}
	_, err := t.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		Key:                       map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: cur.ShardID}},
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String(heldBy(cur)),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	})
	return err
}

// heldBy is the condition that the lease's counter and owner are still those of cur. KCL
// leaves leaseOwner out of a lease nobody holds (the child leases it creates at a parent's
// SHARD_END, and those it has not assigned yet), and a lease without a counter is new.
func heldBy(cur Lease) string {
	counter, owner := "#c = :oldc", "#o = :oldo"
	if cur.Counter == 0 {
		counter = "(attribute_not_exists(#c) OR #c = :oldc)"
	}
	if cur.Owner == "" {
		owner = "(attribute_not_exists(#o) OR #o = :oldo)"
	}
	return counter + " AND " + owner
}

func containsPlaceholder(expr, ph string) bool {
	for i := 0; i+len(ph) <= len(expr); i++ {
		if expr[i:i+len(ph)] == ph && (i+len(ph) == len(expr) || expr[i+len(ph)] == ' ' || expr[i+len(ph)] == ',') {
			return true
		}
	}
	return false
}

func number(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func encode(l Lease) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrKey:           &types.AttributeValueMemberS{Value: l.ShardID},
		attrCheckpoint:    &types.AttributeValueMemberS{Value: l.Checkpoint},
		attrSub:           number(l.Sub),
		attrCounter:       number(l.Counter),
		attrOwner:         &types.AttributeValueMemberS{Value: l.Owner},
		attrOwnerSwitches: number(l.OwnerSwitches),
	}
	// DynamoDB refuses empty string sets and empty key strings.
	if len(l.Parents) > 0 {
		item[attrParents] = &types.AttributeValueMemberSS{Value: l.Parents}
	}
	if len(l.Children) > 0 {
		item[attrChildren] = &types.AttributeValueMemberSS{Value: l.Children}
	}
	if l.Pending != "" {
		item[attrPending] = &types.AttributeValueMemberS{Value: l.Pending}
	}
	if l.StartingHashKey != "" && l.EndingHashKey != "" {
		item[attrStartingHash] = &types.AttributeValueMemberS{Value: l.StartingHashKey}
		item[attrEndingHash] = &types.AttributeValueMemberS{Value: l.EndingHashKey}
	}
	return item
}

func decode(item map[string]types.AttributeValue) (Lease, error) {
	if et, ok := item[attrEntityType].(*types.AttributeValueMemberS); ok && et.Value != entityLease {
		return Lease{}, fmt.Errorf("its entityType is %q, which marks KCL 3.5's worker metrics or coordinator state: %w", et.Value, ErrNotALease)
	}
	var l Lease
	var err error
	str := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	num := func(name string) int64 {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			return 0
		}
		n, perr := strconv.ParseInt(v.Value, 10, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("attribute %s = %q is not an integer", name, v.Value)
		}
		return n
	}
	set := func(name string) []string {
		if v, ok := item[name].(*types.AttributeValueMemberSS); ok {
			return v.Value
		}
		return nil
	}
	l.ShardID = str(attrKey)
	l.Checkpoint = str(attrCheckpoint)
	l.Sub = num(attrSub)
	l.Counter = num(attrCounter)
	l.Owner = str(attrOwner)
	l.OwnerSwitches = num(attrOwnerSwitches)
	l.Parents = set(attrParents)
	l.Children = set(attrChildren)
	l.StartingHashKey = str(attrStartingHash)
	l.EndingHashKey = str(attrEndingHash)
	l.Pending = str(attrPending)
	if l.ShardID == "" {
		return l, errors.New("the item has no leaseKey string")
	}
	return l, err
}
