package main

import (
	"context"
	"fmt"
	"log"
	"math/big"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// chaos injects the server's faults for the whole run and reshards the input stream on a
// schedule: split the widest open shard, merge the two adjacent open shards with the
// smallest combined range, UpdateShardCount by one, and again.
type chaos struct {
	srv    service
	stopCh chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	reshards map[string]int
	refused  int
}

func startChaos(srv service, stream string, every, d time.Duration) (*chaos, error) {
	c := &chaos{srv: srv, stopCh: make(chan struct{}), done: make(chan struct{}), reshards: map[string]int{}}
	err := srv.SetFaults(chaosFaults())
	if err != nil {
		return nil, fmt.Errorf("setting the chaos's faults: %w", err)
	}
	go func() {
		defer close(c.done)
		if every <= 0 {
			<-c.stopCh
			return
		}
		t := time.NewTicker(every)
		defer t.Stop()
		end := time.Now().Add(d)
		for i := 0; ; i++ {
			select {
			case <-t.C:
			case <-c.stopCh:
				return
			}
			if time.Now().After(end) {
				continue // the producer is done: let the job drain
			}
			c.reshard(stream, i)
		}
	}()
	return c, nil
}

// reshard carries out step i of the schedule (its ListShards meets the faults too, and
// retries).
func (c *chaos) reshard(stream string, i int) {
	ctx := context.Background()
	client := c.srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 20 })
	open, err := openShards(ctx, client, stream)
	if err != nil || len(open) == 0 {
		c.refuse("listing shards", err)
		return
	}
	kind := []string{"split", "merge", "update_shard_count"}[i%3]
	switch kind {
	case "split":
		w := open[0]
		for _, s := range open {
			if width(s).Cmp(width(w)) > 0 {
				w = s
			}
		}
		lo, _ := new(big.Int).SetString(aws.ToString(w.HashKeyRange.StartingHashKey), 10)
		mid := new(big.Int).Add(lo, new(big.Int).Rsh(width(w), 1))
		_, err = client.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(stream), ShardToSplit: w.ShardId, NewStartingHashKey: aws.String(mid.String())})
	case "merge":
		if len(open) < 2 {
			c.refuse("merge", fmt.Errorf("only one open shard"))
			return
		}
		best := 0
		for j := 1; j+1 < len(open); j++ {
			if new(big.Int).Add(width(open[j]), width(open[j+1])).Cmp(new(big.Int).Add(width(open[best]), width(open[best+1]))) < 0 {
				best = j
			}
		}
		_, err = client.MergeShards(ctx, &kinesis.MergeShardsInput{StreamName: aws.String(stream), ShardToMerge: open[best].ShardId, AdjacentShardToMerge: open[best+1].ShardId})
	default:
		target := int32(len(open) + 1)
		if len(open) >= 6 {
			target = int32(len(open) - 1)
		}
		_, err = client.UpdateShardCount(ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String(stream), TargetShardCount: aws.Int32(target), ScalingType: types.ScalingTypeUniformScaling})
	}
	if err != nil {
		c.refuse(kind, err)
		return
	}
	c.mu.Lock()
	c.reshards[kind]++
	c.mu.Unlock()
	log.Printf("soak chaos: %s of %s done (%d open shards before)", kind, stream, len(open))
}

func (c *chaos) refuse(what string, err error) {
	c.mu.Lock()
	c.refused++
	c.mu.Unlock()
	log.Printf("soak chaos: %s refused: %v", what, err)
}

// stop ends the schedule and the faults.
func (c *chaos) stop() error {
	close(c.stopCh)
	<-c.done
	if err := c.srv.SetFaults(kinesistest.Faults{}); err != nil {
		return fmt.Errorf("turning the faults off: %w", err)
	}
	return nil
}

// summary says what the chaos did.
func (c *chaos) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("splits %d, merges %d, shard-count updates %d, refused %d; faults: 5xx %.0f%%, dropped connections %.0f%%, throttled GetRecords and PutRecords entries %.0f%%, expired iterators %.0f%%, subscription resets %.0f%% of events",
		c.reshards["split"], c.reshards["merge"], c.reshards["update_shard_count"], c.refused,
		100**faultRate, 100**faultRate, 100**throttle, 100**expireRate, 100**dropEvents)
}

// openShards lists the stream's open shards in hash key order.
func openShards(ctx context.Context, client *kinesis.Client, stream string) ([]types.Shard, error) {
	out, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}})
	if err != nil {
		return nil, err
	}
	shards := out.Shards
	sort.Slice(shards, func(i, j int) bool {
		a, _ := new(big.Int).SetString(aws.ToString(shards[i].HashKeyRange.StartingHashKey), 10)
		b, _ := new(big.Int).SetString(aws.ToString(shards[j].HashKeyRange.StartingHashKey), 10)
		return a.Cmp(b) < 0
	})
	return shards, nil
}

// width is a shard's hash key range size.
func width(s types.Shard) *big.Int {
	lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
	return new(big.Int).Sub(hi, lo)
}

// chaosFaults are the faults the flags ask for, on the data plane and discovery; the
// resharding calls themselves are left alone.
func chaosFaults() kinesistest.Faults {
	return kinesistest.Faults{
		Seed:                   *seed,
		ServerErrorRate:        *faultRate,
		DropConnectionRate:     *faultRate,
		GetRecordsThrottleRate: *throttle,
		PutEntryThrottleRate:   *throttle,
		ExpiredIteratorRate:    *expireRate,
		SubscriptionDropRate:   *dropEvents,
		Operations: []string{"GetRecords", "GetShardIterator", "PutRecords", "ListShards", "SubscribeToShard",
			"DescribeStreamSummary", "DescribeStreamConsumer", "RegisterStreamConsumer"},
	}
}
