package kinesisio

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/checkpoint"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/readapi"
)

// The read's side of the checkpoint table: its configuration inside the DoFns, the worker's
// handles on it (one per table and owner in a process), what it holds a shard reader off
// (holdForTable), and the translation between the read's values and those of the checkpoint
// engine (internal/checkpoint).

// newCheckpointSpec names the checkpoint table of a read (none without
// WithCheckpointTable), and the owner its leases are held by: one owner per pipeline
// construction, shared by all its workers.
func newCheckpointSpec(cfg config) checkpoint.Config {
	if cfg.read.checkpointTable == "" {
		return checkpoint.Config{}
	}
	d := cfg.read.leaseDuration
	if d <= 0 {
		d = checkpoint.DefaultLeaseDuration
	}
	return checkpoint.Config{
		Table:         cfg.read.checkpointTable,
		Endpoint:      cfg.read.checkpointEndpoint,
		Owner:         "beamkinesis-" + cfg.read.readID,
		Takeover:      cfg.read.checkpointTakeover,
		LeaseDuration: d,
	}
}

// tableKey names a checkpoint table and owner, reached from one client configuration.
type tableKey struct {
	region, endpoint, tableEndpoint, table, owner string
}

// checkpointers holds the worker process's handles on checkpoint tables.
var checkpointers = struct {
	mu sync.Mutex
	m  map[tableKey]*checkpoint.Checkpointer
}{m: map[tableKey]*checkpoint.Checkpointer{}}

// openCheckpointer returns the process's handle on spec's table, creating the table if it
// is missing.
func openCheckpointer(ctx context.Context, client clientConfig, spec checkpoint.Config) (*checkpoint.Checkpointer, error) {
	key := tableKey{region: client.Region, endpoint: client.Endpoint, tableEndpoint: spec.Endpoint, table: spec.Table, owner: spec.Owner}
	checkpointers.mu.Lock()
	defer checkpointers.mu.Unlock()
	if c := checkpointers.m[key]; c != nil {
		return c, nil
	}
	awsCfg, err := loadAWSConfig(ctx, client)
	if err != nil {
		return nil, err
	}
	c, err := checkpoint.Open(ctx, awsCfg, spec, childLister(awsCfg, client))
	if err != nil {
		return nil, err
	}
	checkpointers.m[key] = c
	return c, nil
}

// childListRetry is the retry policy of the ListShards calls of childLister: a SHARD_END
// commit waits for them, so they give up sooner than the read's.
var childListRetry = backoff.Policy{Retries: 5, Initial: 100 * time.Millisecond, Max: 2 * time.Second}

// childLister finds a closed shard's children with ListShards, for its SHARD_END item (KCL
// reads them to clean up the parent's lease once the children have progressed), through a
// Kinesis client made on first use.
func childLister(awsCfg aws.Config, client clientConfig) checkpoint.ChildLister {
	var once sync.Once
	var api *readapi.Client
	return func(ctx context.Context, stream, shard string) ([]string, error) {
		once.Do(func() { api = readapi.New(newClientFrom(awsCfg, client), childListRetry) })
		shards, err := api.ListShards(ctx, stream, nil)
		if err != nil {
			return nil, err
		}
		var children []string
		for _, sh := range shards {
			if aws.ToString(sh.ParentShardId) == shard || aws.ToString(sh.AdjacentParentShardId) == shard {
				children = append(children, aws.ToString(sh.ShardId))
			}
		}
		sort.Strings(children)
		return children, nil
	}
}

// tableShard is d as the checkpoint table knows it.
func tableShard(d shardDescriptor) checkpoint.Shard {
	s := checkpoint.Shard{Stream: d.Stream, ID: d.ShardID, StartingHashKey: d.StartingHashKey, EndingHashKey: d.EndingHashKey, Initial: initialCheckpoint(d)}
	for _, p := range []string{d.ParentShardID, d.AdjacentParentShardID} {
		if p != "" {
			s.Parents = append(s.Parents, p)
		}
	}
	return s
}

// initialCheckpoint is the KCL checkpoint of a shard not read yet: its start position.
// A start at a sequence number has no KCL name; TRIM_HORIZON is the one that loses nothing.
func initialCheckpoint(d shardDescriptor) string {
	switch d.StartKind {
	case startAtTimestamp:
		return leasetable.AtTimestamp
	case startAfterSequence:
		return d.StartSeq
	}
	return leasetable.TrimHorizon
}

// leased passes ds through the checkpoint table cp (nil: none): it takes their leases and
// returns each starting from its checkpoint; read is false for a shard at SHARD_END.
func leased(ctx context.Context, cp *checkpoint.Checkpointer, ds []shardDescriptor) ([]shardDescriptor, []bool, error) {
	read := make([]bool, len(ds))
	if cp == nil {
		for i := range read {
			read[i] = true
		}
		return ds, read, nil
	}
	shards := make([]checkpoint.Shard, len(ds))
	for i, d := range ds {
		shards[i] = tableShard(d)
	}
	resumes, err := cp.AcquireAll(ctx, shards)
	if err != nil {
		return nil, nil, err
	}
	out := make([]shardDescriptor, len(ds))
	for i, d := range ds {
		r := resumes[i]
		if r.Seq != "" {
			d.StartKind, d.StartSeq, d.StartSub, d.StartTimeMs = startAfterSubSequence, r.Seq, r.Sub, 0
		}
		out[i], read[i] = d, r.Read
	}
	return out, read, nil
}

// holdForTable keeps the reader off d while the table says not to read it: while a parent
// is not at SHARD_END (checked until it is, at most every WithPollInterval), or for good
// once another job took the lease over.
func (r *shardReader) holdForTable(ctx context.Context, rt *sdf.LockRTracker, d shardDescriptor) (sdf.ProcessContinuation, bool, error) {
	if owner, lost := r.cp.LostTo(d.ShardID); lost {
		log.Infof(ctx, "kinesisio: no longer reading %v: owner %q holds its lease in checkpoint table %s", d, owner, r.spec.Checkpoint.Table)
		rt.TryClaim(shardEndClaim{})
		return sdf.StopProcessing(), true, nil
	}
	if d.ParentShardID == "" && d.AdjacentParentShardID == "" {
		return nil, false, nil
	}
	key := parentChecksOf(r.shardKey(d))
	if cont, held, err := holdOff(ctx, calls.wait(key, time.Now())); held || err != nil {
		return cont, held, err
	}
	at := time.Now()
	if !r.cp.ParentsReady(ctx, tableShard(d)) {
		calls.notBefore(key, at.Add(r.spec.PollInterval))
		return sdf.ResumeProcessingIn(r.spec.PollInterval), true, nil
	}
	calls.forget(key)
	return nil, false, nil
}
