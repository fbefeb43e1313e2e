package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/checkpoint"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/wire"
)

// How a position reaches the checkpoint table. A shard reader emits, at the end of each
// call that claimed records (or the shard's end), a commitToken on a second output; the
// tokens cross a Reshuffle, a fusion break, to commitFn, which writes them. A runner hands
// an element to the next stage only once it has committed the bundle that emitted it (Prism
// stores a bundle's outputs and residuals in one step; on Dataflow the work item's commit
// does), so a position is written strictly after the runner committed the records up to it.
//
// Bundle finalization would be the usual route, but the Go SDK finalizes only the first
// bundle of each execution plan; testing/REPORTS.md ("What the tests found in Beam and the
// runners") has the evidence.
func init() {
	register.DoFn2x1[context.Context, commitToken, error](&commitFn{})
	register.Emitter2[beam.EventTime, commitToken]()
	beam.RegisterType(reflect.TypeOf((*commitSpec)(nil)).Elem())
	beam.RegisterCoder(reflect.TypeOf((*commitToken)(nil)).Elem(), encodeCommitToken, decodeCommitToken)
}

// commitToken is the position one shard reader call reached: the last user record it
// claimed (Seq, Sub), or SHARD_END. Records is how many user records the call claimed;
// EndMs is when the call ended, for the commit lag. MaxEventMs is the latest event time of
// the records it covers that the call emitted (for a call that emitted none, the shard's
// watermark): a held commit (commit_held.go) writes the token once the windows up to it were
// written.
type commitToken struct {
	Stream     string
	ShardID    string
	Seq        string
	Sub        int64
	Records    int64
	EndMs      int64
	MaxEventMs int64
}

// Format versions of the commit token: v2 added MaxEventMs.
const (
	commitTokenV1 = 1
	commitTokenV2 = 2
)

func encodeCommitToken(t commitToken) []byte {
	w := wire.NewWriter(commitTokenV2)
	w.String(t.Stream)
	w.String(t.ShardID)
	w.String(t.Seq)
	w.Int(t.Sub)
	w.Int(t.Records)
	w.Int(t.EndMs)
	w.Int(t.MaxEventMs)
	return w.Bytes()
}

func decodeCommitToken(b []byte) (commitToken, error) {
	r := wire.NewReader("commit token", b, commitTokenV1, commitTokenV2)
	t := commitToken{
		Stream:  r.String(),
		ShardID: r.String(),
		Seq:     r.String(),
		Sub:     r.Int(),
		Records: r.Int(),
		EndMs:   r.Int(),
	}
	if t.MaxEventMs = t.EndMs; len(b) > 0 && b[0] == commitTokenV2 {
		t.MaxEventMs = r.Int()
	}
	return t, r.Err()
}

func (t commitToken) position() leasetable.Position {
	return leasetable.Position{Seq: t.Seq, Sub: t.Sub}
}

// tokenCutter makes the commit tokens of one reader call. A token's event time is the latest
// event time of the records it covers (the shard's watermark for one that covers none): the
// SDK harness moves the reader's watermark estimator with the event time of every output,
// tokens included, so a token stamped with the wall clock would move the watermark past
// records not read yet, which windows then drop as late.
//
// Without a cut (a plain Read with a table) the call has one token, the position it
// reached. Under a held commit the reader
// knows the windows of the sinks (Commit.After sets Cut in the read's spec), and a call that
// emits records of two windows ends a token at the last record of each window: a restart
// from the table then resumes a shard at a window's first record, so a deterministic sink
// that rewrites the window rewrites all of it.
type tokenCutter struct {
	cut  windowCut
	d    shardDescriptor
	emit func(beam.EventTime, commitToken)

	// seg is the window index of the segment being read; n its records, last the position
	// of its last record and maxEv their latest event time.
	seg, n, maxEv int64
	last          recordPosition
	// cutRecords counts the records covered by the tokens already emitted; prevMaxEv is the
	// latest event time among them.
	cutRecords, prevMaxEv int64
	cuts                  int
}

func newTokenCutter(cut windowCut, d shardDescriptor, emit func(beam.EventTime, commitToken)) *tokenCutter {
	return &tokenCutter{cut: cut, d: d, emit: emit}
}

// observe sees a record the call emits at et, before it is emitted.
func (c *tokenCutter) observe(et beam.EventTime, r Record) {
	ms := et.Milliseconds()
	idx := c.cut.index(ms)
	if c.n > 0 && idx != c.seg {
		now := time.Now().UnixMilli()
		tok := commitToken{Stream: c.d.Stream, ShardID: c.d.ShardID, Seq: c.last.Seq, Sub: c.last.Sub, Records: c.n, EndMs: now, MaxEventMs: c.maxEv}
		c.emit(mtime.FromMilliseconds(tok.MaxEventMs), tok)
		c.cutRecords += c.n
		c.prevMaxEv, c.n, c.cuts = c.maxEv, 0, c.cuts+1
	}
	if c.n == 0 || ms > c.maxEv {
		c.maxEv = ms
	}
	c.seg, c.n = idx, c.n+1
	c.last = recordPosition{Seq: r.SequenceNumber, Sub: r.SubSequenceNumber}
}

// finish emits the token of the position the call reached on rt, unless a cut token already
// covers it. idleMaxEv is the event time of a token that covers no record the call emitted:
// the shard's watermark (a SHARD_END reached without records, or records the reader
// dropped).
func (c *tokenCutter) finish(rt *sdf.LockRTracker, idleMaxEv int64) {
	t, ok := rt.Rt.(*shardTracker)
	if !ok {
		return
	}
	rt.Mu.Lock()
	last, claimed, shardEnd := t.reached()
	n := t.claimed
	rt.Mu.Unlock()
	now := time.Now().UnixMilli()
	tok := commitToken{Stream: c.d.Stream, ShardID: c.d.ShardID, Records: n - c.cutRecords, EndMs: now}
	switch {
	case shardEnd:
		tok.Seq = leasetable.ShardEnd
	case claimed && (c.n > 0 || last.compare(c.last) > 0 || c.cuts == 0):
		tok.Seq, tok.Sub = last.Seq, last.Sub
	default:
		return
	}
	switch {
	case c.n > 0:
		tok.MaxEventMs = c.maxEv
	case c.cuts > 0:
		tok.MaxEventMs = max(c.prevMaxEv, idleMaxEv)
	default:
		tok.MaxEventMs = idleMaxEv
	}
	c.emit(mtime.FromMilliseconds(tok.MaxEventMs), tok)
}

// tokens returns the record emitter of a reader call and the cutter that makes its commit
// tokens (it sees every record, for the tokens' event times), or emit itself and nil when
// the read has no table.
func tokens(cp *checkpoint.Checkpointer, cut windowCut, d shardDescriptor, emit func(beam.EventTime, Record), emitCommit func(beam.EventTime, commitToken)) (func(beam.EventTime, Record), *tokenCutter) {
	if cp == nil {
		return emit, nil
	}
	c := newTokenCutter(cut, d, emitCommit)
	return func(et beam.EventTime, r Record) {
		c.observe(et, r)
		emit(et, r)
	}, c
}

// commitSpec is what commitFn needs: the Kinesis client's region and credentials (the
// table's too) and the table. Bounded says the read ends (ReadBounded): its bundles wait
// for the positions the table could not take (internal/checkpoint) before they finish.
type commitSpec struct {
	Client     clientConfig
	Checkpoint checkpointSpec
	Bounded    bool
}

// open opens the checkpoint table into *cp, unless it is open.
func (s commitSpec) open(ctx context.Context, cp **checkpoint.Checkpointer) error {
	if *cp != nil {
		return nil
	}
	c, err := openCheckpointer(ctx, s.Client, s.Checkpoint)
	if err != nil {
		return err
	}
	*cp = c
	return nil
}

// commitFn writes the commit tokens of the shard readers to the checkpoint table. It
// keeps the furthest position of each shard in a bundle and writes them, concurrently, when
// the bundle finishes: one conditional UpdateItem per shard per bundle, whatever the number
// of tokens.
type commitFn struct {
	Spec commitSpec

	cp      *checkpoint.Checkpointer
	pending map[string]commitToken
}

// Setup opens the checkpoint table.
func (fn *commitFn) Setup(ctx context.Context) error {
	return fn.Spec.open(ctx, &fn.cp)
}

// StartBundle starts with nothing to write.
func (fn *commitFn) StartBundle(context.Context) {
	fn.pending = map[string]commitToken{}
}

// ProcessElement keeps tok if it is its shard's furthest position in the bundle.
func (fn *commitFn) ProcessElement(ctx context.Context, tok commitToken) error {
	if err := fn.Setup(ctx); err != nil {
		return err
	}
	if fn.pending == nil {
		fn.pending = map[string]commitToken{}
	}
	key := tok.Stream + "/" + tok.ShardID
	prev, ok := fn.pending[key]
	if !ok || leasetable.Compare(tok.position(), prev.position()) > 0 {
		tok.Records += prev.Records
		fn.pending[key] = tok
	} else {
		prev.Records += tok.Records
		fn.pending[key] = prev
	}
	return nil
}

// FinishBundle writes the bundle's positions and reports the table's metrics. A position
// the table cannot take because it is unreachable is held by the checkpointer, which writes
// it once the table answers again (internal/checkpoint), so the read goes on; a bounded read's
// bundle waits for its held positions, up to checkpoint.HeldWaitBounded. A write the table refuses
// (validation, a deleted item, denied access) fails the bundle.
func (fn *commitFn) FinishBundle(ctx context.Context) error {
	// The shards' writes go out together: a bundle takes one DynamoDB round trip, not one
	// per shard.
	var wg sync.WaitGroup
	errs := make([]error, 0, len(fn.pending))
	var mu sync.Mutex
	for _, tok := range fn.pending {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn.cp.Commit(ctx, tok.tableToken()); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	shards := make([]string, 0, len(fn.pending))
	for _, tok := range fn.pending {
		shards = append(shards, tok.ShardID)
	}
	fn.pending = nil
	if fn.cp != nil {
		reportTable(ctx, fn.cp.TakeStats())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kinesisio: checkpoint table %s: %d of the bundle's commits failed: %w", fn.Spec.Checkpoint.Table, len(errs), err)
	}
	if fn.Spec.Bounded && fn.cp != nil {
		err := fn.cp.AwaitHeld(ctx, shards, checkpoint.HeldWaitBounded)
		reportTable(ctx, fn.cp.TakeStats())
		return err
	}
	return nil
}
