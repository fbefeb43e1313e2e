package kinesisio

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
)

// What the checkpoint table writes for KCL's sake beyond the positions: a closed shard's
// item gets, with its SHARD_END checkpoint, the ids of its children in childShardIds, as a
// KCL worker writes them when it finishes a shard (KCL reads them to clean up the parent's
// lease once the children have progressed).

// childLister finds a closed shard's children with ListShards, on a Kinesis client made on
// first use from the read's client configuration.
type childLister struct {
	cfg    clientConfig
	once   sync.Once
	client *kinesis.Client
	err    error
}

// childrenOf returns the ids of the shards of stream whose parent or adjacent parent is
// shard, sorted. An error is logged and gives none: the SHARD_END checkpoint is written all
// the same.
func (c *checkpointer) childrenOf(ctx context.Context, stream, shard string) []string {
	l := &c.children
	l.once.Do(func() { l.client, l.err = newClient(ctx, l.cfg) })
	if l.err != nil {
		log.Warnf(ctx, "kinesisio: shard %s of stream %s reached SHARD_END; its children are not written to checkpoint table %s: %v", shard, stream, c.spec.Table, l.err)
		return nil
	}
	var children []string
	policy := backoff.Policy{Retries: 5, Initial: 100 * time.Millisecond, Max: 2 * time.Second}
	in := &kinesis.ListShardsInput{}
	in.StreamName, in.StreamARN = streamarn.Input(stream)
	for {
		var out *kinesis.ListShardsOutput
		err := backoff.Do(ctx, policy, func(ctx context.Context) error {
			var err error
			out, err = l.client.ListShards(ctx, in)
			return err
		}, func(int, error, backoff.Class, time.Duration) {})
		if err != nil {
			log.Warnf(ctx, "kinesisio: shard %s of stream %s reached SHARD_END; its children are not written to checkpoint table %s: %v", shard, stream, c.spec.Table, fmt.Errorf("listing the shards: %w", err))
			return nil
		}
		for _, sh := range out.Shards {
			if aws.ToString(sh.ParentShardId) == shard || aws.ToString(sh.AdjacentParentShardId) == shard {
				children = append(children, aws.ToString(sh.ShardId))
			}
		}
		if out.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
	sort.Strings(children)
	return children
}
