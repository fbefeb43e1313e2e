package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
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

// commitToken is the position one shard reader call reached, as the checkpoint engine
// commits it (checkpoint.Token, whose doc says what its fields hold). Its coder is the wire
// format below: the token crosses a Reshuffle, and Java runners pass it through as bytes.
type commitToken = checkpoint.Token

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

// commitSpec is what commitFn needs: the Kinesis client's region and credentials (the
// table's too) and the table. Bounded says the read ends (ReadBounded): its bundles wait
// for the positions the table could not take (internal/checkpoint) before they finish.
type commitSpec struct {
	Client     clientConfig
	Checkpoint checkpoint.Config
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
	pending map[streamShard]commitToken
}

// Setup opens the checkpoint table.
func (fn *commitFn) Setup(ctx context.Context) error {
	return fn.Spec.open(ctx, &fn.cp)
}

// StartBundle starts with nothing to write.
func (fn *commitFn) StartBundle(context.Context) {
	fn.pending = map[streamShard]commitToken{}
}

// ProcessElement keeps tok if it is its shard's furthest position in the bundle.
func (fn *commitFn) ProcessElement(ctx context.Context, tok commitToken) error {
	if err := fn.Setup(ctx); err != nil {
		return err
	}
	if fn.pending == nil {
		fn.pending = map[streamShard]commitToken{}
	}
	key := streamShard{stream: tok.Stream, shard: tok.ShardID}
	prev, ok := fn.pending[key]
	if !ok || leasetable.Compare(tok.Position(), prev.Position()) > 0 {
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
	if fn.cp == nil {
		// The table was never opened (Setup failed), so ProcessElement took no token.
		fn.pending = nil
		return nil
	}
	// The shards' writes go out together: a bundle takes one DynamoDB round trip, not one
	// per shard.
	var wg sync.WaitGroup
	errs := make([]error, 0, len(fn.pending))
	var mu sync.Mutex
	for _, tok := range fn.pending {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn.cp.Commit(ctx, tok); err != nil {
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
	reportTable(ctx, fn.cp)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kinesisio: checkpoint table %s: %d of the bundle's commits failed: %w", fn.Spec.Checkpoint.Table, len(errs), err)
	}
	if fn.Spec.Bounded {
		err := fn.cp.AwaitHeld(ctx, shards, checkpoint.HeldWaitBounded)
		reportTable(ctx, fn.cp)
		return err
	}
	return nil
}
