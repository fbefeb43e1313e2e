package kinesisio

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/readapi"
)

// What the checkpoint table writes for KCL's sake beyond the positions: a closed shard's
// item gets, with its SHARD_END checkpoint, the ids of its children in childShardIds, as a
// KCL worker writes them when it finishes a shard (KCL reads them to clean up the parent's
// lease once the children have progressed).

// childLister finds a closed shard's children with ListShards, on a Kinesis client made on
// first use from the read's client configuration.
type childLister struct {
	cfg  clientConfig
	once sync.Once
	api  *readapi.Client
	err  error
}

// childrenOf returns the ids of the shards of stream whose parent or adjacent parent is
// shard, sorted. An error is logged and gives none: the SHARD_END checkpoint is written all
// the same.
func (c *checkpointer) childrenOf(ctx context.Context, stream, shard string) []string {
	l := &c.children
	l.once.Do(func() {
		client, err := newClient(ctx, l.cfg)
		l.api, l.err = readapi.New(client, backoff.Policy{Retries: 5, Initial: 100 * time.Millisecond, Max: 2 * time.Second}), err
	})
	var listed []types.Shard
	err := l.err
	if err == nil {
		listed, err = l.api.ListShards(ctx, stream, nil)
	}
	if err != nil {
		log.Warnf(ctx, "kinesisio: shard %s of stream %s reached SHARD_END; its children are not written to checkpoint table %s: %v", shard, stream, c.spec.Table, err)
		return nil
	}
	var children []string
	for _, sh := range listed {
		if aws.ToString(sh.ParentShardId) == shard || aws.ToString(sh.AdjacentParentShardId) == shard {
			children = append(children, aws.ToString(sh.ShardId))
		}
	}
	sort.Strings(children)
	return children
}
