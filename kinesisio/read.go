package kinesisio

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func init() {
	register.DoFn5x2[context.Context, *watermarkEstimator, *sdf.LockRTracker, []byte, func(beam.EventTime, shardDescriptor), sdf.ProcessContinuation, error](&discoverFn{})
	register.DoFn3x1[context.Context, []byte, func(shardDescriptor), error](&discoverBoundedFn{})
	register.DoFn6x2[context.Context, *watermarkEstimator, *sdf.LockRTracker, shardDescriptor, func(beam.EventTime, Record), func(beam.EventTime, commitToken), sdf.ProcessContinuation, error](&readFn{})
	register.DoFn5x1[context.Context, *sdf.LockRTracker, shardDescriptor, func(beam.EventTime, Record), func(beam.EventTime, commitToken), error](&readBoundedFn{})
	register.Emitter2[beam.EventTime, shardDescriptor]()
	register.Emitter1[shardDescriptor]()
	register.Emitter2[beam.EventTime, Record]()
	beam.RegisterType(reflect.TypeOf((*readSpec)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*discoverySpec)(nil)).Elem())
}

// Read reads stream as an unbounded PCollection of Record.
//
// It lists the stream's shards when it starts and every WithDescribeShardInterval after, so
// shards created by SplitShard, MergeShards or UpdateShardCount are read as they appear, each
// exactly once. Every shard is read by a splittable DoFn that checkpoints after
// WithMaxRecordsPerFetch records or WithMaxFetchTime, and whose checkpoint is the position of
// the last record it emitted. Event times are arrival times unless a watermark policy option
// says otherwise; idle shards advance their watermark after WithIdleThreshold.
//
// Shards are polled with GetRecords unless WithEnhancedFanOut (or
// WithEnhancedFanOutConsumerARN) makes them subscribed with SubscribeToShard; a subscription
// is kept open from one checkpoint to the next on the same worker. Reading starts at
// WithStartingPosition (Latest by default) and never ends unless WithMaxReadTime is given.
// Client options say how to reach Kinesis. With WithCheckpointTable each shard's position is
// written to the table once the runner committed the bundle that read it, or, with
// WithCommitAfterSinks, once the pipeline's sinks wrote its records. A bad option, or one
// that does nothing for Read, panics.
func Read(s beam.Scope, stream string, opts ...ReadOption) beam.PCollection {
	return buildRead(s, targetRead, stream, opts)
}

// ReadBounded reads stream as a bounded PCollection of Record: every record, in every shard
// within retention (closed parents and their children alike), from WithStartingPosition
// (Latest by default, which reads nothing: pass TrimHorizon or AtTimestamp for a backfill)
// up to the records that arrived before the read started, or WithMaxReadTime after it. It
// stops earlier per shard with WithMaxRecords. It is the batch and backfill mode. It takes
// the options of Read but those of one ProcessElement call, of shard discovery and of idle
// shards (WithMaxFetchTime, WithMaxRecordsPerFetch, WithDescribeShardInterval,
// WithIdleThreshold), which do nothing for it and panic.
func ReadBounded(s beam.Scope, stream string, opts ...ReadOption) beam.PCollection {
	return buildRead(s, targetReadBounded, stream, opts)
}

// buildRead builds the read t: discovery, a Reshuffle and the shard readers. The readers'
// commit tokens go to the commit step (commitPositions) or, with WithCommitAfterSinks, to
// the Commit (commit_held.go).
func buildRead(s beam.Scope, t target, stream string, opts []ReadOption) beam.PCollection {
	name := t.String()
	bounded := t == targetReadBounded
	s = s.Scope(name)
	validateStreamName(name, stream)
	cfg := buildConfig(t, opts)
	regionFromStreamARN(name, stream, &cfg)
	var shards, recs, tokens beam.PCollection
	var spec *readSpec
	if bounded {
		shards = beam.ParDo(s, &discoverBoundedFn{Spec: newDiscoverySpec(stream, cfg)}, beam.Impulse(s))
		fn := &readBoundedFn{shardFn{Spec: newReadSpec(stream, cfg)}}
		recs, tokens = beam.ParDo2(s, fn, beam.Reshuffle(s, shards))
		spec = &fn.Spec
	} else {
		shards = beam.ParDo(s, &discoverFn{Spec: newDiscoverySpec(stream, cfg)}, beam.Impulse(s))
		fn := &readFn{shardFn{Spec: newReadSpec(stream, cfg)}}
		recs, tokens = beam.ParDo2(s, fn, beam.Reshuffle(s, shards))
		spec = &fn.Spec
	}
	if cfg.source.commit == nil {
		commitPositions(s, cfg, tokens, bounded)
		return recs
	}
	spec.AfterCheck = afterCheck{transform: name, pending: true}
	cfg.source.commit.fill(name, &heldShards{tokens: tokens, spec: commitSpec{Client: cfg.client, Checkpoint: newCheckpointSpec(cfg), Bounded: bounded}, read: spec})
	return recs
}

// commitPositions writes the readers' commit tokens to the checkpoint table, behind a
// fusion break (commit.go); without a table there are none.
func commitPositions(s beam.Scope, cfg config, tokens beam.PCollection, bounded bool) {
	if cfg.read.checkpointTable == "" {
		return
	}
	s = s.Scope("commit")
	beam.ParDo0(s, &commitFn{Spec: commitSpec{Client: cfg.client, Checkpoint: newCheckpointSpec(cfg), Bounded: bounded}}, beam.Reshuffle(s, tokens))
}

// shardFn holds what the unbounded and the bounded shard readers share: their
// configuration, the client, and the restriction methods. Both embed it.
type shardFn struct {
	Spec readSpec

	reader *shardReader
}

// Setup creates the Kinesis client. SDF helper methods run on instances whose Setup was
// not called, so ProcessElement calls it too.
func (fn *shardFn) Setup(ctx context.Context) error {
	if fn.reader != nil {
		return nil
	}
	if err := fn.Spec.AfterCheck.err(); err != nil {
		return err
	}
	r, err := newShardReader(ctx, fn.Spec)
	if err != nil {
		return err
	}
	fn.reader = r
	return nil
}

// Teardown closes the enhanced fan-out subscriptions this instance left open for a next
// ProcessElement call that did not come.
func (fn *shardFn) Teardown() {
	if fn.reader != nil {
		fn.reader.closeSubscriptions()
	}
}

// CreateInitialRestriction covers the whole shard from its start position to the read's end.
func (fn *shardFn) CreateInitialRestriction(d shardDescriptor) shardRestriction {
	return initialRestriction(d, fn.Spec.MaxRecords)
}

// SplitRestriction never splits: a shard is read by one reader at a time.
func (fn *shardFn) SplitRestriction(_ shardDescriptor, r shardRestriction) []shardRestriction {
	return []shardRestriction{r}
}

// RestrictionSize is what is left of the shard in r, the figure Dataflow scales streaming
// jobs on: under WithMaxRecords the records left; otherwise the shard's estimated unread
// bytes (estimateBacklog) when this worker has read it up to where r starts, 0 when it was
// caught up there; for a shard not read yet, a nominal 1.
//
// A restriction sized before any call read it on this worker starts the shard's read-ahead.
func (fn *shardFn) RestrictionSize(d shardDescriptor, r shardRestriction) float64 {
	if r.Empty {
		return 0
	}
	fn.readAheadSized(d, r)
	if r.MaxRecords == 0 {
		if b, ok := memos.backlog(shardKeyOf(fn.Spec.ReadID, d), r.start()); ok {
			return b
		}
	}
	return restrictionSize(r)
}

// readAheadSized starts reading d ahead from the start of r, when the read reads ahead by
// polling, r's start needs no trim check (read_trim.go) and the shard waits for no
// checkpoint table (whose position, parents and leases the call applies).
func (fn *shardFn) readAheadSized(d shardDescriptor, r shardRestriction) {
	spec := &fn.Spec
	if spec.ReadAheadBytes == 0 || spec.enhancedFanOut() || spec.Checkpoint.Enabled() || r.mayBeTrimmed(time.Now()) {
		return
	}
	rd, err := readAhead.fetchReader(fn.Spec)
	if err != nil {
		return // the call will make the client, and say what is wrong
	}
	open := func(ctx context.Context) (string, error) {
		in := r.iteratorInput(d)
		it, err := rd.api.ShardIterator(ctx, d, in)
		if r.latestInFuture(err) {
			in.ShardIteratorType, in.Timestamp = types.ShardIteratorTypeLatest, nil
			it, err = rd.api.ShardIterator(ctx, d, in)
		}
		if err != nil {
			return "", fmt.Errorf("kinesisio: opening %v at %s ahead of its first call: %w", d, r.startString(), err)
		}
		return it, nil
	}
	readAhead.size(rd.shardKey(d), d, rd, r.start(), r.EndTimeMs, open)
}

// CreateTracker wraps a shardTracker in a lock.
func (fn *shardFn) CreateTracker(r shardRestriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(newShardTracker(r))
}

// readFn reads one shard as an unbounded splittable DoFn.
type readFn struct {
	shardFn
}

// TruncateRestriction stops the shard on drain.
func (fn *readFn) TruncateRestriction(_ *sdf.LockRTracker, _ shardDescriptor) shardRestriction {
	return shardRestriction{Empty: true}
}

// InitialWatermarkEstimatorState starts at the descriptor's event time: for a shard found
// while the read runs, the last poll before it existed.
func (fn *readFn) InitialWatermarkEstimatorState(et beam.EventTime, _ shardRestriction, _ shardDescriptor) int64 {
	return et.Milliseconds()
}

// CreateWatermarkEstimator restores the shard's watermark.
func (fn *readFn) CreateWatermarkEstimator(ms int64) *watermarkEstimator {
	return newWatermarkEstimator(ms)
}

// WatermarkEstimatorState saves the shard's watermark.
func (fn *readFn) WatermarkEstimatorState(e *watermarkEstimator) int64 {
	return e.stateMs()
}

// ProcessElement reads the shard until its restriction ends or it is time to checkpoint.
// With a checkpoint table it first waits for the shard's parents to be read to their end
// (and stops for good if another job took the shard's lease), and emits the position it
// reached as a commit token, written to the table once the runner committed this bundle.
func (fn *readFn) ProcessElement(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, d shardDescriptor, emit func(beam.EventTime, Record), emitCommit func(beam.EventTime, commitToken)) (sdf.ProcessContinuation, error) {
	if err := fn.Setup(ctx); err != nil {
		return nil, err
	}
	we.share(watermarksOf(fn.Spec.ReadID), watermarkKey(d))
	cont, err := fn.process(ctx, we, rt, d, emit, emitCommit)
	if err == nil && (cont == nil || !cont.ShouldResume()) {
		we.unshare()
	}
	return cont, err
}

func (fn *readFn) process(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, d shardDescriptor, emit func(beam.EventTime, Record), emitCommit func(beam.EventTime, commitToken)) (sdf.ProcessContinuation, error) {
	cp := fn.reader.cp
	if cp == nil {
		return fn.reader.process(ctx, we, rt, d, emit)
	}
	if cont, held, err := fn.reader.holdForTable(ctx, rt, d); held || err != nil {
		return cont, err
	}
	resumes := false
	ts := tableShard(d)
	cp.CallStarted(ts)
	defer func() { cp.CallEnded(ts, resumes) }()
	emitRecord, cutter := tokens(cp, fn.Spec.Cut, d, emit, emitCommit)
	cont, err := fn.reader.process(ctx, we, rt, d, emitRecord)
	resumes = err == nil && cont != nil && cont.ShouldResume()
	if err == nil {
		cutter.finish(rt, we.stateMs())
	}
	return cont, err
}

// readBoundedFn reads one shard as a bounded splittable DoFn: without a ProcessContinuation,
// so that Beam treats its output as bounded. It reads each shard to its end in one call.
type readBoundedFn struct {
	shardFn
}

// ProcessElement reads the shard to the end of the read. With a checkpoint table it emits
// the position it reached as a commit token; it does not wait for parents (a runner may run
// a parent and its child in one bundle, whose commit comes after both).
func (fn *readBoundedFn) ProcessElement(ctx context.Context, rt *sdf.LockRTracker, d shardDescriptor, emit func(beam.EventTime, Record), emitCommit func(beam.EventTime, commitToken)) error {
	if err := fn.Setup(ctx); err != nil {
		return err
	}
	cp := fn.reader.cp
	if cp == nil {
		_, err := fn.reader.process(ctx, nil, rt, d, emit)
		return err
	}
	ts := tableShard(d)
	cp.CallStarted(ts)
	defer cp.CallEnded(ts, false)
	emitRecord, cutter := tokens(cp, fn.Spec.Cut, d, emit, emitCommit)
	_, err := fn.reader.process(ctx, nil, rt, d, emitRecord)
	if err == nil {
		cutter.finish(rt, time.Now().UnixMilli())
	}
	return err
}

func restrictionSize(r shardRestriction) float64 {
	switch {
	case r.Empty:
		return 0
	case r.MaxRecords > 0:
		return float64(r.MaxRecords - r.Claimed)
	}
	return 1
}
