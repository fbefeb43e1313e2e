package kpl

import (
	"crypto/md5"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Wire tags, pre-encoded: every field number here is below 16, so each tag
// is one byte.
const (
	tagPartitionKeyTable    = byte(fieldPartitionKeyTable<<3 | protowire.BytesType)
	tagExplicitHashKeyTable = byte(fieldExplicitHashKeyTable<<3 | protowire.BytesType)
	tagRecord               = byte(fieldRecords<<3 | protowire.BytesType)
	tagPartitionKeyIndex    = byte(fieldPartitionKeyIndex<<3 | protowire.VarintType)
	tagExplicitHashKeyIndex = byte(fieldExplicitHashKeyIndex<<3 | protowire.VarintType)
	tagData                 = byte(fieldData<<3 | protowire.BytesType)
)

// Aggregator packs user records bound for one shard into one Kinesis record.
//
// It knows, exactly and before adding, the size of the Kinesis record it
// would produce (outer partition key + magic + protobuf + MD5, as the service
// counts a record), so a writer can fill aggregates up to a limit without
// overshooting it. Partition keys and explicit hash keys are stored once per
// aggregate however many records share them.
//
// Add retains each record's Data and key strings until Reset: the caller must
// not modify a Data slice it has added before the aggregate is built.
//
// The zero Aggregator is not usable; create one with [NewAggregator]. An
// Aggregator is not safe for concurrent use.
type Aggregator struct {
	maxBytes   int
	maxRecords int

	records []entry
	pks     []string       // partition key table, in first-use order
	pkIndex map[string]int // position of each key in pks
	ehks    []string       // explicit hash key table, in first-use order
	ehkIdx  map[string]int // position of each key in ehks

	pbSize int // exact size of the protobuf body for the records so far
}

// entry is an added user record, its keys replaced by table positions.
type entry struct {
	data []byte
	pk   int
	ehk  int // -1: no explicit hash key
}

// NewAggregator returns an empty Aggregator whose Kinesis records never
// exceed maxBytes (partition key + data, as the service counts a record) nor
// hold more than maxRecords user records. Both must be at least 1; it panics
// otherwise, as the limits come from configuration validated up front.
//
// The KPL's defaults are 51200 bytes and no count limit (math.MaxInt here);
// the KPL leaves the outer partition key out of that size, this counts it.
// maxBytes must not exceed the stream's maximum record size (1 MiB unless
// raised), or the service will reject full aggregates.
func NewAggregator(maxBytes, maxRecords int) *Aggregator {
	if maxBytes < 1 || maxRecords < 1 {
		panic(fmt.Sprintf("kpl.NewAggregator(%d, %d): maxBytes and maxRecords must be at least 1", maxBytes, maxRecords))
	}
	return &Aggregator{
		maxBytes:   maxBytes,
		maxRecords: maxRecords,
		pkIndex:    make(map[string]int),
		ehkIdx:     make(map[string]int),
	}
}

// Len returns the number of user records added since the last Reset.
func (a *Aggregator) Len() int { return len(a.records) }

// Size returns the size, as the service counts it (partition key + data), of
// the Kinesis record Build would return now: 0 when empty, the raw record's
// size when it holds one user record, len(AggregatePartitionKey) + Overhead +
// protobuf size otherwise.
func (a *Aggregator) Size() int {
	switch len(a.records) {
	case 0:
		return 0
	case 1:
		return len(a.pks[0]) + len(a.records[0].data)
	}
	return len(AggregatePartitionKey) + Overhead + a.pbSize
}

// SizeWith returns what Size would be after adding r, without adding it.
// A writer can use the difference SizeWith(r) - Size() to account for the
// record in a PutRecords request budget.
func (a *Aggregator) SizeWith(r UserRecord) int {
	if len(a.records) == 0 {
		return len(r.PartitionKey) + len(r.Data)
	}
	p := a.plan(r)
	return len(AggregatePartitionKey) + Overhead + a.pbSize + p.grow
}

// WouldFit reports whether Add would accept r as far as the limits go: the
// record count stays within maxRecords and SizeWith(r) within maxBytes. It
// does not validate r's keys.
func (a *Aggregator) WouldFit(r UserRecord) bool {
	return len(a.records) < a.maxRecords && a.SizeWith(r) <= a.maxBytes
}

// Add appends r to the aggregate. It returns
//   - nil when r was added;
//   - an error wrapping [ErrInvalidPartitionKey] or [ErrInvalidHashKey] when
//     r's keys would be rejected by the service (see [UserRecord.Validate]);
//   - [ErrFull] when the aggregate holds records and r would break a limit:
//     Build and Reset, then Add r again;
//   - an error wrapping [ErrTooLarge] when the aggregate is empty and r alone
//     is over maxBytes: it can only be sent on its own, if within the
//     stream's record size limit.
//
// On error the aggregate is unchanged. Add retains r.Data (see [Aggregator]).
func (a *Aggregator) Add(r UserRecord) error {
	if err := ValidatePartitionKey(r.PartitionKey); err != nil {
		return err
	}
	p := a.plan(r)
	if p.newEHK {
		if _, err := ParseUint128(r.ExplicitHashKey); err != nil {
			return fmt.Errorf("explicit hash key: %w", err)
		}
	}
	if len(a.records) == 0 {
		if size := len(r.PartitionKey) + len(r.Data); size > a.maxBytes {
			return fmt.Errorf("%w: %d bytes (partition key + data) over the limit of %d", ErrTooLarge, size, a.maxBytes)
		}
	} else if len(a.records) >= a.maxRecords ||
		len(AggregatePartitionKey)+Overhead+a.pbSize+p.grow > a.maxBytes {
		return ErrFull
	}

	if p.newPK {
		a.pkIndex[r.PartitionKey] = p.pk
		a.pks = append(a.pks, r.PartitionKey)
	}
	if p.newEHK {
		a.ehkIdx[r.ExplicitHashKey] = p.ehk
		a.ehks = append(a.ehks, r.ExplicitHashKey)
	}
	a.records = append(a.records, entry{data: r.Data, pk: p.pk, ehk: p.ehk})
	a.pbSize += p.grow
	return nil
}

// plan is what adding a record would do: the table positions of its keys,
// whether they are new, and by how much the protobuf body would grow.
type plan struct {
	pk, ehk       int
	newPK, newEHK bool
	grow          int
}

func (a *Aggregator) plan(r UserRecord) plan {
	var p plan
	var ok bool
	if p.pk, ok = a.pkIndex[r.PartitionKey]; !ok {
		p.pk, p.newPK = len(a.pks), true
		p.grow += 1 + protowire.SizeBytes(len(r.PartitionKey))
	}
	p.ehk = -1
	if r.ExplicitHashKey != "" {
		if p.ehk, ok = a.ehkIdx[r.ExplicitHashKey]; !ok {
			p.ehk, p.newEHK = len(a.ehks), true
			p.grow += 1 + protowire.SizeBytes(len(r.ExplicitHashKey))
		}
	}
	p.grow += 1 + protowire.SizeBytes(recordBodySize(p.pk, p.ehk, len(r.Data)))
	return p
}

// recordBodySize is the exact encoded size of a Record message's fields.
func recordBodySize(pk, ehk, dataLen int) int {
	n := 1 + protowire.SizeVarint(uint64(pk)) + 1 + protowire.SizeBytes(dataLen)
	if ehk >= 0 {
		n += 1 + protowire.SizeVarint(uint64(ehk))
	}
	return n
}

// errEmpty is returned by Build on an empty aggregate.
var errEmpty = errors.New("kpl: Build called on an empty Aggregator")

// Build returns the Kinesis record for the user records added so far,
// leaving the Aggregator as it is (call Reset to start the next one).
//
// One user record is returned raw, with its own keys and data, as the KPL
// sends it: an aggregate of one would only add bytes. Two or more become a
// KPL aggregate with partition key [AggregatePartitionKey] and the explicit
// hash key of the first user record (its own, or the MD5 of its partition
// key), in a newly allocated Data of exactly Size() - len(AggregatePartitionKey)
// bytes.
// Build fails only when the Aggregator is empty.
func (a *Aggregator) Build() (KinesisRecord, error) {
	switch len(a.records) {
	case 0:
		return KinesisRecord{}, errEmpty
	case 1:
		e := a.records[0]
		r := KinesisRecord{PartitionKey: a.pks[e.pk], Data: e.data, UserRecords: 1}
		if e.ehk >= 0 {
			r.ExplicitHashKey = a.ehks[e.ehk]
		}
		return r, nil
	}

	size := Overhead + a.pbSize
	b := make([]byte, 0, size)
	b = append(b, Magic[:]...)
	for _, k := range a.pks {
		b = append(b, tagPartitionKeyTable)
		b = protowire.AppendString(b, k)
	}
	for _, k := range a.ehks {
		b = append(b, tagExplicitHashKeyTable)
		b = protowire.AppendString(b, k)
	}
	for _, e := range a.records {
		b = append(b, tagRecord)
		b = protowire.AppendVarint(b, uint64(recordBodySize(e.pk, e.ehk, len(e.data))))
		b = append(b, tagPartitionKeyIndex)
		b = protowire.AppendVarint(b, uint64(e.pk))
		if e.ehk >= 0 {
			b = append(b, tagExplicitHashKeyIndex)
			b = protowire.AppendVarint(b, uint64(e.ehk))
		}
		b = append(b, tagData)
		b = protowire.AppendBytes(b, e.data)
	}
	sum := md5.Sum(b[len(Magic):])
	b = append(b, sum[:]...)
	if len(b) != size {
		// The size bookkeeping is what keeps writers under the service limit;
		// a mismatch is a bug that must not ship records of unknown size.
		panic(fmt.Sprintf("kpl: internal error: built %d bytes, accounted %d", len(b), size))
	}

	first := a.records[0]
	ehk := ""
	if first.ehk >= 0 {
		ehk = a.ehks[first.ehk]
	} else {
		ehk = HashPartitionKey(a.pks[first.pk]).String()
	}
	return KinesisRecord{
		PartitionKey:    AggregatePartitionKey,
		ExplicitHashKey: ehk,
		Data:            b,
		UserRecords:     len(a.records),
	}, nil
}

// Reset empties the Aggregator for the next aggregate, keeping its limits
// and its allocated capacity. Records built before stay valid.
func (a *Aggregator) Reset() {
	clear(a.records) // drop references to the callers' data
	a.records = a.records[:0]
	clear(a.pks)
	a.pks = a.pks[:0]
	clear(a.ehks)
	a.ehks = a.ehks[:0]
	clear(a.pkIndex)
	clear(a.ehkIdx)
	a.pbSize = 0
}
