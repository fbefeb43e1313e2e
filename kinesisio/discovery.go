package kinesisio

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/checkpoint"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/readapi"
)

// discoverySpec is the configuration of shard discovery. Its fields are exported because
// Beam serialises DoFns as JSON.
type discoverySpec struct {
	Stream string
	// ReadID names the transform in the worker's state (worker_state.go).
	ReadID      string
	Client      clientConfig
	Retry       retryConfig
	Start       startSpec
	Interval    time.Duration
	MaxReadTime time.Duration
	Checkpoint  checkpoint.Config
	// Startup is WithStartupTimeout: how long a Read that never listed the shards tries.
	Startup time.Duration
}

func newDiscoverySpec(stream string, cfg config) discoverySpec {
	return discoverySpec{
		Stream:      stream,
		ReadID:      cfg.read.readID,
		Client:      cfg.client,
		Retry:       cfg.retry,
		Start:       cfg.read.start.spec(),
		Interval:    cfg.read.describeShardInterval,
		MaxReadTime: cfg.read.maxReadTime,
		Checkpoint:  newCheckpointSpec(cfg),
		Startup:     cfg.read.startupTimeout,
	}
}

// connect creates the Kinesis client of a discovery DoFn and opens the read's checkpoint
// table (nil without one).
func (s discoverySpec) connect(ctx context.Context) (*readapi.Client, *checkpoint.Checkpointer, error) {
	c, err := newClient(ctx, s.Client)
	if err != nil {
		return nil, nil, err
	}
	cp, err := s.openTable(ctx)
	if err != nil {
		return nil, nil, err
	}
	return readapi.New(c, s.Retry.policy()), cp, nil
}

// openTable opens the checkpoint table of the read, or returns nil without one.
func (s discoverySpec) openTable(ctx context.Context) (*checkpoint.Checkpointer, error) {
	if !s.Checkpoint.Enabled() {
		return nil, nil
	}
	cp, err := openCheckpointer(ctx, s.Client, s.Checkpoint)
	if err != nil {
		return nil, err
	}
	log.Infof(ctx, "kinesisio: positions of stream %s are kept in checkpoint table %s as owner %q, written once the runner has committed the bundle that read them (lease duration %v, takeover %v)", s.Stream, s.Checkpoint.Table, s.Checkpoint.Owner, s.Checkpoint.LeaseDuration, s.Checkpoint.Takeover)
	return cp, nil
}

// endTimeMs is when a read that started at startMs ends: start + WithMaxReadTime, or never
// (0) for Read without it. ReadBounded passes atStart to end at its start by default.
func (s discoverySpec) endTimeMs(startMs int64, atStart bool) int64 {
	switch {
	case s.MaxReadTime > 0:
		return startMs + s.MaxReadTime.Milliseconds()
	case atStart:
		return startMs
	}
	return 0
}

// discoverFn is the unbounded shard discovery of Read: a splittable DoFn over the Impulse
// that lists the stream's shards every Interval and emits each shard once. A shard first
// seen by poll N is emitted with the start time of poll N-1 as its event time (it did not
// exist then), and discovery's watermark is the start time of the last completed poll, so
// the read's watermark never passes data in a shard that has not started yet.
type discoverFn struct {
	Spec discoverySpec

	api *readapi.Client
	cp  *checkpoint.Checkpointer
	// tableWait is when new shards began to wait for an unreachable checkpoint table.
	tableWait time.Time
	// firstAttemptMs is when this DoFn first tried to list the shards of a read that had
	// never listed them, and listed whether it has since (read_startup.go).
	firstAttemptMs int64
	listed         bool
}

// Setup creates the Kinesis client and opens the checkpoint table.
func (fn *discoverFn) Setup(ctx context.Context) error {
	if fn.api != nil {
		return nil
	}
	var err error
	fn.api, fn.cp, err = fn.Spec.connect(ctx)
	return err
}

// CreateInitialRestriction starts with no shard emitted.
func (fn *discoverFn) CreateInitialRestriction(_ []byte) discoveryRestriction {
	return discoveryRestriction{}
}

// SplitRestriction never splits: there is one discovery per read.
func (fn *discoverFn) SplitRestriction(_ []byte, r discoveryRestriction) []discoveryRestriction {
	return []discoveryRestriction{r}
}

// RestrictionSize is nominal.
func (fn *discoverFn) RestrictionSize(_ []byte, r discoveryRestriction) float64 {
	if r.Done {
		return 0
	}
	return 1
}

// CreateTracker wraps a discoveryTracker in a lock.
func (fn *discoverFn) CreateTracker(r discoveryRestriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(&discoveryTracker{rest: r})
}

// TruncateRestriction ends discovery on drain.
func (fn *discoverFn) TruncateRestriction(_ *sdf.LockRTracker, _ []byte) discoveryRestriction {
	return discoveryRestriction{Done: true}
}

// InitialWatermarkEstimatorState starts at the Impulse's timestamp.
func (fn *discoverFn) InitialWatermarkEstimatorState(et beam.EventTime, _ discoveryRestriction, _ []byte) int64 {
	return et.Milliseconds()
}

// CreateWatermarkEstimator restores the watermark.
func (fn *discoverFn) CreateWatermarkEstimator(ms int64) *watermarkEstimator {
	return newWatermarkEstimator(ms)
}

// WatermarkEstimatorState saves the watermark.
func (fn *discoverFn) WatermarkEstimatorState(e *watermarkEstimator) int64 {
	return e.stateMs()
}

// ProcessElement polls ListShards once and emits the shards not seen before.
func (fn *discoverFn) ProcessElement(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, _ []byte, emit func(beam.EventTime, shardDescriptor)) (sdf.ProcessContinuation, error) {
	if err := fn.Setup(ctx); err != nil {
		return nil, err
	}
	defer func() { reportCalls(ctx, fn.api.TakeStats()) }()
	rest := rt.GetRestriction().(discoveryRestriction)
	shared := watermarksOf(fn.Spec.ReadID)
	if rest.Done {
		shared.drop(discoveryWatermarkKey)
		calls.forget(pollsOf(fn.Spec.ReadID))
		return sdf.StopProcessing(), nil
	}
	// Discovery's watermark holds the read's (watermark_floor.go), also while its polls fail.
	shared.report(discoveryWatermarkKey, we.stateMs(), watermarkMarkTTL, time.Now())
	// Poll no more often than Interval, whatever the runner does with the resume delay: the
	// restriction knows the last completed poll (also after a restore elsewhere), the
	// worker's clock knows failed polls too.
	now := time.Now()
	wait := calls.wait(pollsOf(fn.Spec.ReadID), now)
	if rest.LastPollMs > 0 {
		wait = max(wait, time.UnixMilli(rest.LastPollMs).Add(fn.Spec.Interval).Sub(now))
	}
	if cont, held, err := holdOff(ctx, wait); held || err != nil {
		return cont, err
	}
	pollStart := time.Now().UnixMilli()
	calls.notBefore(pollsOf(fn.Spec.ReadID), time.UnixMilli(pollStart).Add(fn.Spec.Interval))
	readStart, endTime := rest.ReadStartMs, rest.EndTimeMs
	if readStart == 0 {
		readStart, endTime = pollStart, fn.Spec.endTimeMs(pollStart, false)
	}
	shards, err := fn.api.ListShards(ctx, fn.Spec.Stream, fn.Spec.Start.listFilter(readStart))
	if err != nil {
		if backoff.Classify(err) != backoff.Fatal {
			if err := fn.neverReached(ctx, rest, pollStart, err); err != nil {
				return nil, err
			}
			// The watermark stays where it is until a poll succeeds.
			log.Warnf(ctx, "%v; polling again in %v", err, fn.Spec.Interval)
			return sdf.ResumeProcessingIn(fn.Spec.Interval), nil
		}
		return nil, err
	}
	fn.listed = true
	listed := make([]string, len(shards))
	for i, s := range shards {
		listed[i] = aws.ToString(s.ShardId)
	}
	eventTime := mtime.MinTimestamp
	if rest.LastPollMs > 0 {
		eventTime = mtime.FromMilliseconds(rest.LastPollMs)
	}
	known := make(map[string]bool, len(rest.Shards))
	for _, id := range rest.Shards {
		known[id] = true
	}
	var found []shardDescriptor
	for _, s := range shards {
		if !known[aws.ToString(s.ShardId)] {
			found = append(found, newShardDescriptor(fn.Spec.Stream, s, fn.Spec.Start, readStart, endTime))
		}
	}
	// The new shards' leases are taken before the poll is claimed: while the checkpoint
	// table is unreachable, the poll is not claimed and the shards are found again by the
	// next one; the shards already read go on.
	leasedFound, read, err := leased(ctx, fn.cp, found)
	if err != nil {
		if checkpoint.Unreachable(err) {
			if fn.tableWait.IsZero() {
				fn.tableWait = time.Now()
				log.Warnf(ctx, "kinesisio: checkpoint table %s unreachable; %d new shard(s) of stream %s wait for their leases, the shards already leased are read on; polling again every %v: %v", fn.Spec.Checkpoint.Table, len(found), fn.Spec.Stream, fn.Spec.Interval, err)
			}
			return sdf.ResumeProcessingIn(fn.Spec.Interval), nil
		}
		return nil, err
	}
	if !fn.tableWait.IsZero() {
		log.Infof(ctx, "kinesisio: checkpoint table %s reachable again after %v: leased %d new shard(s) of stream %s", fn.Spec.Checkpoint.Table, time.Since(fn.tableWait).Round(time.Second), len(found), fn.Spec.Stream)
		fn.tableWait = time.Time{}
	}
	found = leasedFound
	if !rt.TryClaim(pollClaim{StartMs: pollStart, Listed: listed, ReadStartMs: readStart, EndTimeMs: endTime}) {
		return sdf.StopProcessing(), rt.GetError()
	}
	if rest.ReadStartMs == 0 && endTime > 0 {
		log.Infof(ctx, "kinesisio: reading stream %s: the records that arrived from %s to %s (WithMaxReadTime %v from this first shard listing, on this worker's clock)",
			fn.Spec.Stream, formatMs(readStart), formatMs(endTime), fn.Spec.MaxReadTime)
	}
	for i, d := range found {
		if !read[i] {
			continue
		}
		if rest.LastPollMs > 0 {
			log.Infof(ctx, "kinesisio: found new %v (parents %q, %q)", d, d.ParentShardID, d.AdjacentParentShardID)
		}
		shardsDiscovered.Inc(ctx, 1)
		shared.pending(watermarkKey(d), int64(eventTime), now)
		emit(eventTime, d)
	}
	we.advanceMs(pollStart)
	shared.report(discoveryWatermarkKey, we.stateMs(), watermarkMarkTTL, time.Now())
	if rt.IsDone() {
		shared.drop(discoveryWatermarkKey)
		calls.forget(pollsOf(fn.Spec.ReadID))
		log.Infof(ctx, "kinesisio: shard discovery of stream %s has reached the end of the read", fn.Spec.Stream)
		return sdf.StopProcessing(), nil
	}
	return sdf.ResumeProcessingIn(fn.Spec.Interval), nil
}

// discoverBoundedFn is the one-shot shard discovery of ReadBounded: it lists every shard
// within retention (closed parents and their children alike) once and emits them all, with
// the read's end fixed at the time of the listing (plus WithMaxReadTime).
type discoverBoundedFn struct {
	Spec discoverySpec

	api *readapi.Client
	cp  *checkpoint.Checkpointer
}

// Setup creates the Kinesis client and opens the checkpoint table.
func (fn *discoverBoundedFn) Setup(ctx context.Context) error {
	if fn.api != nil {
		return nil
	}
	var err error
	fn.api, fn.cp, err = fn.Spec.connect(ctx)
	return err
}

// ProcessElement lists the shards and emits one descriptor per shard.
func (fn *discoverBoundedFn) ProcessElement(ctx context.Context, _ []byte, emit func(shardDescriptor)) error {
	if err := fn.Setup(ctx); err != nil {
		return err
	}
	defer func() { reportCalls(ctx, fn.api.TakeStats()) }()
	start := time.Now().UnixMilli()
	end := fn.Spec.endTimeMs(start, true)
	shards, err := fn.api.ListShards(ctx, fn.Spec.Stream, fn.Spec.Start.listFilter(start))
	if err != nil {
		return err
	}
	found := make([]shardDescriptor, len(shards))
	for i, s := range shards {
		found[i] = newShardDescriptor(fn.Spec.Stream, s, fn.Spec.Start, start, end)
	}
	found, read, err := leased(ctx, fn.cp, found)
	if err != nil {
		return err
	}
	for i, d := range found {
		if !read[i] {
			continue
		}
		shardsDiscovered.Inc(ctx, 1)
		emit(d)
	}
	log.Infof(ctx, "kinesisio: reading %d shards of stream %s up to %s", len(shards), fn.Spec.Stream, formatMs(end))
	return nil
}

// formatMs formats a time in Unix milliseconds for logs.
func formatMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
