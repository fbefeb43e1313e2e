// Package batch packs a writer's user records into Kinesis records and PutRecords requests
// within the service's limits: per-shard KPL aggregates of bounded size and count (or one
// Kinesis record per user record when aggregation is off), and requests of bounded entry
// count and bytes. It does no I/O; the producer decides when to send.
package batch

import (
	"errors"
	"fmt"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// Service limits (kinesis-protocol-notes §2.1) and KPL defaults (§1.6).
const (
	// MaxRequestEntries is the most records one PutRecords call takes.
	MaxRequestEntries = 500
	// DefaultMaxRecordBytes is a stream's default record size limit, partition key included
	// (MaxRecordSizeInKiB 1024, also what a stream that does not report one allows).
	DefaultMaxRecordBytes = 1 << 20
	// MaxRecordBytes is the largest record size limit a stream can have: UpdateMaxRecordSize
	// and CreateStream take MaxRecordSizeInKiB up to 10240.
	MaxRecordBytes = 10 << 20
	// DefaultMaxRequestBytes is the KPL's PutRecords size limit (CollectionMaxSize), the
	// service's limit before large records and still what many emulators enforce. Requests
	// to a stream with the default record size limit keep to it.
	DefaultMaxRequestBytes = 5 << 20
	// LargeMaxRequestBytes is the service's PutRecords size limit (partition keys
	// included) since large records, used for streams whose record size limit is raised.
	LargeMaxRequestBytes = 10 << 20
)

// RequestBytesFor returns the PutRecords size limit for a stream whose record size limit
// is maxRecordBytes: the conservative 5 MiB for a stream at the default 1 MiB, the
// service's 10 MiB for a stream that allows larger records (so any record it allows,
// even one over 5 MiB, fits in a request).
func RequestBytesFor(maxRecordBytes int) int {
	if maxRecordBytes <= DefaultMaxRecordBytes {
		return DefaultMaxRequestBytes
	}
	return LargeMaxRequestBytes
}

// Limits bounds what the packer produces.
type Limits struct {
	// Aggregate packs user records of one shard into KPL aggregates; otherwise every user
	// record is its own Kinesis record.
	Aggregate bool
	// MaxAggregateBytes bounds an aggregate's size as the service counts it (outer partition
	// key + data). User records too large for an aggregate are sent raw.
	MaxAggregateBytes int
	// MaxAggregateRecords bounds the user records in one aggregate.
	MaxAggregateRecords int
	// MaxRecordBytes is the stream's record size limit (partition key + data), 1 MiB by
	// default and up to 10 MiB (MaxRecordSizeInKiB). It bounds raw records; aggregates keep
	// to MaxAggregateBytes, which must not exceed it.
	MaxRecordBytes int
	// MaxRequestEntries bounds the records in one PutRecords request (at most 500).
	MaxRequestEntries int
	// MaxRequestBytes bounds a PutRecords request (partition keys + data of its records);
	// RequestBytesFor gives the value for a stream's record size limit.
	MaxRequestBytes int
}

// Validate reports limits that could produce records or requests the service refuses, or
// that cannot hold a single record.
func (l Limits) Validate() error {
	switch {
	case l.MaxRecordBytes < 1 || l.MaxRecordBytes > MaxRecordBytes:
		return fmt.Errorf("the record size limit %d must be within 1..%d", l.MaxRecordBytes, MaxRecordBytes)
	case l.MaxRequestEntries < 1 || l.MaxRequestEntries > MaxRequestEntries:
		return fmt.Errorf("the request entry limit %d must be within 1..%d", l.MaxRequestEntries, MaxRequestEntries)
	case l.MaxRequestBytes < l.MaxRecordBytes:
		return fmt.Errorf("the request size limit %d is below the record size limit %d", l.MaxRequestBytes, l.MaxRecordBytes)
	case l.MaxRequestBytes > LargeMaxRequestBytes:
		return fmt.Errorf("the request size limit %d is over the service's %d", l.MaxRequestBytes, LargeMaxRequestBytes)
	}
	if l.Aggregate {
		switch {
		case l.MaxAggregateBytes < 1 || l.MaxAggregateBytes > l.MaxRecordBytes:
			return fmt.Errorf("the aggregate size limit %d must be within 1..%d (the record size limit)", l.MaxAggregateBytes, l.MaxRecordBytes)
		case l.MaxAggregateRecords < 1:
			return fmt.Errorf("the aggregate record limit %d must be positive", l.MaxAggregateRecords)
		}
	}
	return nil
}

// Item is one user record on its way to Kinesis.
type Item struct {
	// Record is the user record.
	Record kpl.UserRecord
	// Hash is the hash key the record routes by.
	Hash kpl.Uint128
	// Added is when the writer accepted it; the buffering deadline counts from here.
	Added time.Time
	// Attempts is how many PutRecords calls have carried it so far.
	Attempts int
	// Meta is the caller's, carried along untouched (e.g. to report a failure).
	Meta any
}

// Size is the record's size as the service counts it when sent raw: partition key + data.
func (it *Item) Size() int { return len(it.Record.PartitionKey) + len(it.Record.Data) }

// Entry is one Kinesis record ready for a PutRecords request.
type Entry struct {
	// Shard is the shard the entry is predicted to land on ("" when unknown).
	Shard string
	// Record is what is sent.
	Record kpl.KinesisRecord
	// Items are the user records inside, in order.
	Items []*Item
	// Oldest is the earliest Added among Items.
	Oldest time.Time
	// Attempts is how many PutRecords calls have carried this entry.
	Attempts int
	// NotBefore delays a retried entry (backoff).
	NotBefore time.Time
}

// Size is the entry's size as the service counts it: partition key + data.
func (e *Entry) Size() int { return e.Record.Size() }

// Aggregated reports whether the entry is a KPL aggregate.
func (e *Entry) Aggregated() bool { return e.Record.Aggregated() }

// Raw wraps one item as a Kinesis record of its own, for a writer without aggregation or
// an item too large for any aggregate.
func Raw(shard string, it *Item) *Entry {
	return &Entry{
		Shard:  shard,
		Record: kpl.KinesisRecord{PartitionKey: it.Record.PartitionKey, ExplicitHashKey: it.Record.ExplicitHashKey, Data: it.Record.Data, UserRecords: 1},
		Items:  []*Item{it},
		Oldest: it.Added,
	}
}

// open is the aggregate being filled for one shard.
type open struct {
	agg    *kpl.Aggregator
	items  []*Item
	oldest time.Time
}

// Aggregates holds one open aggregate per shard. It is not safe for concurrent use.
type Aggregates struct {
	limits Limits
	open   map[string]*open
	spare  []*kpl.Aggregator
}

// NewAggregates returns an empty set of per-shard aggregates under limits.
func NewAggregates(limits Limits) *Aggregates {
	return &Aggregates{limits: limits, open: make(map[string]*open)}
}

// Add places it, predicted for shard, and returns the entries that became ready: the
// shard's previous aggregate when it could not take it, and it on its own when it is too
// large for any aggregate (or aggregation is off). The caller has checked that the item
// is valid and within the record size limit.
func (a *Aggregates) Add(shard string, it *Item) []*Entry {
	if !a.limits.Aggregate || it.Size() > a.limits.MaxAggregateBytes {
		// Too large for any aggregate, it goes alone and raw, leaving the open one as it is.
		return []*Entry{Raw(shard, it)}
	}
	o := a.open[shard]
	if o == nil {
		o = &open{agg: a.newAggregator()}
		a.open[shard] = o
	}
	var ready []*Entry
	err := o.agg.Add(it.Record)
	if errors.Is(err, kpl.ErrFull) {
		ready = append(ready, a.seal(shard, o))
		o = &open{agg: a.newAggregator()}
		a.open[shard] = o
		err = o.agg.Add(it.Record)
	}
	if err != nil {
		// Key errors cannot happen (items are validated before they get here); should one
		// slip through, a raw send lets the service judge it and report it per entry.
		if o.agg.Len() == 0 {
			a.release(shard, o)
		}
		return append(ready, Raw(shard, it))
	}
	if len(o.items) == 0 {
		o.oldest = it.Added
	}
	o.items = append(o.items, it)
	return ready
}

func (a *Aggregates) newAggregator() *kpl.Aggregator {
	if n := len(a.spare); n > 0 {
		agg := a.spare[n-1]
		a.spare = a.spare[:n-1]
		return agg
	}
	return kpl.NewAggregator(a.limits.MaxAggregateBytes, a.limits.MaxAggregateRecords)
}

func (a *Aggregates) release(shard string, o *open) {
	delete(a.open, shard)
	o.agg.Reset()
	a.spare = append(a.spare, o.agg)
}

// seal builds shard's open aggregate o into an entry and releases o.
func (a *Aggregates) seal(shard string, o *open) *Entry {
	rec, err := o.agg.Build()
	if err != nil {
		panic(fmt.Sprintf("batch: sealing an empty aggregate for shard %s", shard)) // callers seal only non-empty ones
	}
	e := &Entry{Shard: shard, Record: rec, Items: o.items, Oldest: o.oldest}
	a.release(shard, o)
	return e
}

// SealDue seals every aggregate whose oldest record was added at or before cutoff and
// returns them.
func (a *Aggregates) SealDue(cutoff time.Time) []*Entry {
	var ready []*Entry
	for shard, o := range a.open {
		if !o.oldest.After(cutoff) {
			ready = append(ready, a.seal(shard, o))
		}
	}
	return ready
}

// SealAll seals every open aggregate and returns them.
func (a *Aggregates) SealAll() []*Entry {
	var ready []*Entry
	for shard, o := range a.open {
		ready = append(ready, a.seal(shard, o))
	}
	return ready
}

// Oldest returns the earliest time a record still in an open aggregate was added, and
// false when all are empty.
func (a *Aggregates) Oldest() (time.Time, bool) {
	var t time.Time
	found := false
	for _, o := range a.open {
		if !found || o.oldest.Before(t) {
			t, found = o.oldest, true
		}
	}
	return t, found
}

// Dissolve removes the open aggregates of the shards for which drop reports true and
// returns their items, for re-routing after a resharding.
func (a *Aggregates) Dissolve(drop func(shard string) bool) []*Item {
	var items []*Item
	for shard, o := range a.open {
		if drop(shard) {
			items = append(items, o.items...)
			a.release(shard, o)
		}
	}
	return items
}

// IsOpen reports whether shard has an open (non-empty) aggregate.
func (a *Aggregates) IsOpen(shard string) bool { _, ok := a.open[shard]; return ok }

// Len returns the number of open (non-empty) aggregates.
func (a *Aggregates) Len() int { return len(a.open) }

// Request collects entries for one PutRecords call within the limits.
type Request struct {
	// Entries are the records of the call, in order.
	Entries []*Entry
	// Bytes is their total size as the service counts it.
	Bytes int
}

// Fits reports whether e can join the request without breaking the entry or byte limit.
func (r *Request) Fits(e *Entry, l Limits) bool {
	return len(r.Entries) < l.MaxRequestEntries && r.Bytes+e.Size() <= l.MaxRequestBytes
}

// Full reports whether no entry at all could join the request any more.
func (r *Request) Full(l Limits) bool {
	return len(r.Entries) >= l.MaxRequestEntries || r.Bytes >= l.MaxRequestBytes
}

// Add appends e; the caller has checked Fits.
func (r *Request) Add(e *Entry) {
	r.Entries = append(r.Entries, e)
	r.Bytes += e.Size()
}
