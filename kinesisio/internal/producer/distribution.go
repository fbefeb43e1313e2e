package producer

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/route"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// Service-managed record distribution. An on-demand stream whose RecordDistributionStrategy
// is AUTO spreads records over its shards itself and ignores partition keys and explicit
// hash keys. KPL aggregation is unsafe there: an aggregate lands on any shard, and a KCL
// consumer drops the user records of an aggregate whose hash key lies outside the shard it
// arrived in. So on such a stream the producer sends every user record as a record of its
// own, does not route (every record waits in one queue, autoQueue, and the per-shard rate
// limiter stands aside: the service, not the key, picks the shard), and takes records
// without a partition key.
//
// A stream can switch strategy while the producer runs. The producer reads the strategy
// again with every new shard map (listed every ShardMapRefresh) and whenever a result
// suggests a switch: an aggregate that landed outside its shard's range (what AUTO does
// to one), or a whole request refused as invalid (records without a key on a stream that
// is no longer AUTO). Nothing is lost in a switch: the aggregates that landed on a wrong
// shard are sent again as their user records (duplicates for readers that keep the
// aggregate, the KCL's readers among them for the records inside the range), and after a
// switch away from AUTO a record without a partition key fails as invalid, with the
// reason, instead of being sent.

// autoQueue is the queue of every record on a stream that distributes records itself.
const autoQueue = "*"

// Describer is the part of the Kinesis client DescribeStream uses.
type Describer interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// StreamSettings is what the producer needs to know of a stream beyond its shards.
type StreamSettings struct {
	// MaxRecordBytes is the record size limit (partition key + data).
	MaxRecordBytes int
	// ServiceDistributed says the stream distributes records itself
	// (RecordDistributionStrategy AUTO).
	ServiceDistributed bool
}

// DescribeStream reads stream's settings with DescribeStreamSummary, retrying by policy.
// A summary without MaxRecordSizeInKiB (a service or emulator that predates large records)
// means the default 1 MiB; one without RecordDistributionStrategy, keys as usual.
func DescribeStream(ctx context.Context, api Describer, stream string, policy backoff.Policy) (StreamSettings, error) {
	var out *kinesis.DescribeStreamSummaryOutput
	err := backoff.Do(ctx, policy, func(ctx context.Context) error {
		var err error
		out, err = api.DescribeStreamSummary(ctx, streamarn.SummaryInput(stream))
		return err
	}, nil)
	if err != nil {
		return StreamSettings{}, err
	}
	s := StreamSettings{MaxRecordBytes: batch.DefaultMaxRecordBytes}
	sum := out.StreamDescriptionSummary
	if sum == nil {
		return s, nil
	}
	if sum.MaxRecordSizeInKiB != nil {
		// Clamp to what the service documents (1024..10240 KiB), so a stray value can
		// neither refuse every record nor make requests the service would reject whole.
		s.MaxRecordBytes = min(max(int(*sum.MaxRecordSizeInKiB)<<10, batch.DefaultMaxRecordBytes), batch.MaxRecordBytes)
	}
	s.ServiceDistributed = sum.RecordDistributionStrategy == types.RecordDistributionStrategyAuto
	return s, nil
}

// validate refuses a record the service would refuse: one without a partition key, unless
// the stream distributes records itself, or with a malformed key.
func validate(rec kpl.UserRecord, serviceDistributed bool) error {
	if serviceDistributed && rec.PartitionKey == "" {
		rec.PartitionKey = "-" // any valid key: the service ignores it
	}
	return rec.Validate()
}

// ServiceDistributed reports whether the producer writes as to a stream that distributes
// records itself.
func (p *Producer) ServiceDistributed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.auto
}

// checkDistribution reads the stream's strategy again (not under p.mu) and adopts it. A
// failed read changes nothing: the next map or result tries again.
func (p *Producer) checkDistribution(ctx context.Context) {
	s, err := DescribeStream(ctx, p.api, p.cfg.Stream, p.cfg.Retry)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setDistributed(s.ServiceDistributed)
}

// checkDistributionFor reads the strategy again when m is a newer map than the one it was
// last read for; the first map comes with the strategy New was given. Not under p.mu.
func (p *Producer) checkDistributionFor(ctx context.Context, m *route.Map) {
	p.mu.Lock()
	due := p.autoChecked != 0 && m.Generation() > p.autoChecked
	p.autoChecked = max(p.autoChecked, m.Generation())
	p.mu.Unlock()
	if due {
		p.checkDistribution(ctx)
	}
}

// setDistributed switches the producer to a stream that distributes records itself, or
// back. To AUTO, the records held in open and queued aggregates are placed again as
// records of their own; away from it, the queued records without a partition key fail as
// invalid, and the others are routed by their keys again. p.mu is held.
func (p *Producer) setDistributed(auto bool) {
	if auto == p.auto {
		return
	}
	p.auto = auto
	p.stats.switches.Add(1)
	var items []*batch.Item
	if auto {
		items = p.aggs.Dissolve(func(string) bool { return true })
	}
	for shard, q := range p.queues {
		kept := q[:0]
		for _, e := range q {
			if auto && !e.Aggregated() && shard == autoQueue {
				kept = append(kept, e)
				continue
			}
			p.queued--
			p.queuedBytes -= e.Size()
			items = append(items, e.Items...)
		}
		p.queues[shard] = kept
	}
	p.placeAgain(items)
	p.compact()
}

// placeAgain places items afresh after a switch of the stream's strategy; those the
// stream now refuses (no partition key once it no longer distributes records itself) fail
// as invalid. p.mu is held.
func (p *Producer) placeAgain(items []*batch.Item) {
	for _, it := range items {
		if err := validate(it.Record, p.auto); err != nil {
			p.fail([]*batch.Item{it}, CodeInvalid, fmt.Sprintf("invalid message: %v (the stream no longer distributes records itself)", err))
			continue
		}
		p.place(it)
	}
}
