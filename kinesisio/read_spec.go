package kinesisio

import (
	"context"
	"sync"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/checkpoint"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/readapi"
)

// readSpec is the configuration a shard reader carries to the workers. Its fields are
// exported because Beam serialises DoFns as JSON. Client holds credentials when static keys
// are configured; its String method redacts them and it is never logged whole.
type readSpec struct {
	Stream string
	// ReadID names the transform in the worker's state (worker_state.go).
	ReadID               string
	Client               clientConfig
	Retry                retryConfig
	FailOnDataLoss       bool
	MaxFetchTime         time.Duration
	MaxRecordsPerFetch   int64
	MaxRecordsPerRead    int32
	IdleTimeBetweenReads time.Duration
	PollInterval         time.Duration
	// ReadAheadBytes bounds the worker's read-ahead of the read (read_ahead.go); 0: off.
	ReadAheadBytes  int64
	WatermarkPolicy int64
	EventTimeFn     eventTimeSpec
	IdleThreshold   time.Duration
	Deaggregate     bool
	MaxRecords      int64
	// PropagationDelay is how long a stored record may take to become readable: a caught-up
	// read sent at t proves only that nothing that arrived before t minus it is unread.
	PropagationDelay time.Duration
	// ConsumerName or ConsumerARN, when set, make the reader subscribe with enhanced fan-out
	// (fetch_efo.go) instead of polling.
	ConsumerName string
	ConsumerARN  string
	// Checkpoint names the checkpoint table (checkpoint.go), if any.
	Checkpoint checkpoint.Config
	// Cut is the windowing of the sinks a held commit waits for (commit_held.go): the reader ends
	// a commit token at the last record of each window. Zero: one token per call.
	Cut windowCut
	// AfterCheck refuses to run a read made WithCommitAfterSinks whose Commit.After was not
	// called (commit_held.go).
	AfterCheck afterCheck
}

func newReadSpec(stream string, cfg config) readSpec {
	s := readSpec{
		Stream:               stream,
		ReadID:               cfg.read.readID,
		Client:               cfg.client,
		Retry:                cfg.retry,
		FailOnDataLoss:       cfg.read.failOnDataLoss,
		MaxFetchTime:         cfg.read.maxFetchTime,
		MaxRecordsPerFetch:   cfg.read.maxRecordsPerFetch,
		MaxRecordsPerRead:    cfg.read.maxRecordsPerRead,
		IdleTimeBetweenReads: cfg.read.idleTimeBetweenReads,
		PollInterval:         cfg.read.pollInterval,
		ReadAheadBytes:       cfg.read.readAheadBytes,
		WatermarkPolicy:      cfg.read.watermarkPolicy,
		IdleThreshold:        cfg.read.idleThreshold,
		Deaggregate:          cfg.source.deaggregate,
		MaxRecords:           cfg.read.maxRecords,
		PropagationDelay:     cfg.read.propagationDelay,
		ConsumerName:         cfg.read.consumerName,
		ConsumerARN:          cfg.read.consumerARN,
		Checkpoint:           newCheckpointSpec(cfg),
	}
	if cfg.read.timestampFn != nil {
		// Validated when the option was applied.
		s.EventTimeFn, _ = encodeEventTimeFn(cfg.read.timestampFn)
	}
	return s
}

// shardReader reads shards for the unbounded and the bounded shard reading DoFns: the read
// loop (read_loop.go) over a poller or a subscriber. It is built on the worker from a
// readSpec.
type shardReader struct {
	spec   readSpec
	api    *readapi.Client
	policy watermarkPolicy
	retry  backoff.Policy
	// cp is the checkpoint table, or nil.
	cp *checkpoint.Checkpointer

	// distMu guards distAuto, whether the stream distributes records itself as
	// DescribeStreamSummary said at distChecked (read_emit.go).
	distMu      sync.Mutex
	distAuto    bool
	distChecked time.Time

	// consumerMu guards consumerARN, the enhanced fan-out consumer once resolved.
	consumerMu  sync.Mutex
	consumerARN string
}

func newShardReader(ctx context.Context, spec readSpec) (*shardReader, error) {
	client, err := newClient(ctx, spec.Client)
	if err != nil {
		return nil, err
	}
	policy := watermarkPolicy{kind: spec.WatermarkPolicy, idleThreshold: spec.IdleThreshold}
	if spec.WatermarkPolicy == watermarkCustom {
		if policy.fn, err = spec.EventTimeFn.decode(); err != nil {
			return nil, err
		}
	}
	var cp *checkpoint.Checkpointer
	if spec.Checkpoint.Enabled() {
		if cp, err = openCheckpointer(ctx, spec.Client, spec.Checkpoint); err != nil {
			return nil, err
		}
	}
	retry := spec.Retry.policy()
	return &shardReader{
		spec:   spec,
		api:    readapi.New(client, retry),
		policy: policy,
		retry:  retry,
		cp:     cp,
	}, nil
}

// newFetchReader is a shard reader that only fetches: no checkpoint table, for the
// read-ahead of restrictions sized before they are read.
func newFetchReader(ctx context.Context, spec readSpec) (*shardReader, error) {
	client, err := newClient(ctx, spec.Client)
	if err != nil {
		return nil, err
	}
	return &shardReader{spec: spec, api: readapi.New(client, spec.Retry.policy()), retry: spec.Retry.policy()}, nil
}

// shardKey is d's key in the worker's state (worker_state.go).
func (r *shardReader) shardKey(d shardDescriptor) shardKey { return shardKeyOf(r.spec.ReadID, d) }

// closeSubscriptions closes the subscriptions this reader left open.
func (r *shardReader) closeSubscriptions() { subscriptions.closeOwned(r) }
