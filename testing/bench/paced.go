package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// Row 2 reads the same user records twice, stored plain and in KPL aggregates, with the
// server enforcing the service's per-shard read limits for both reads: 5 GetRecords calls
// and 2 MiB a second, and a large answer's refusal (a call that returns B bytes leaves the
// shard's allowance B - 2 MiB in debt, which refuses its reads until paid for, as the service
// does after an answer of up to 10 MiB). Both reads are then paced by what the service
// allows, as they would be on Kinesis: the plain read by refusals it retries, the
// deaggregating read by the wait it keeps after each answer over 2 MiB. Row 1 reads without
// limits, so it measures the connector's own cost, and an unpaced plain read cannot be the
// baseline of a paced one.
//
// Before each read the bench reads 2 MiB from every shard itself, so that both reads start
// with the shard's one-second allowance spent, as a shard read continuously has it: the row
// compares pacing, not the first second's burst (which a short read of plain records would
// otherwise spend at once, while the deaggregating read counts its wait after a large answer
// from the answer's full size, as the service's documented refusal does).

// pacedBytesPerShard is the service's read rate of a shard, shared by its polling
// consumers.
const pacedBytesPerShard = 2 << 20

// pacedStream is one of row 2's streams: its size as the service counts it against the
// read rate (data and partition keys) and its largest GetRecords answer.
type pacedStream struct {
	name                   string
	records                int // Kinesis records
	bytes, largestAnswer   int64
	shards                 int
	userRecords            int64
	perShardRate, fraction float64 // after the read: MiB/s per shard, share of shards × 2 MiB/s
}

// measure reads the stream's stored records: their bytes, and the largest answer a
// GetRecords call of 10,000 records (the read's default) and at most 10 MiB (the service's
// cap) gives from the start of each shard.
func (ps *pacedStream) measure(srv *kinesistest.Server) error {
	recs, err := srv.StreamRecords(ps.name)
	if err != nil {
		return fmt.Errorf("listing stream %s: %w", ps.name, err)
	}
	ps.records = len(recs)
	var page, pageRecords int64
	shard := ""
	for _, r := range recs {
		size := int64(len(r.Data) + len(r.PartitionKey))
		ps.bytes += size
		if r.ShardID != shard || pageRecords == 10_000 || (pageRecords > 0 && page+size > 10<<20) {
			page, pageRecords, shard = 0, 0, r.ShardID
		}
		page += size
		pageRecords++
		ps.largestAnswer = max(ps.largestAnswer, page)
	}
	return nil
}

// spendAllowance reads 2 MiB (data and partition keys) from the start of each of the
// stream's shards, at most 10,000 records a call, sized after the stream's mean record.
func spendAllowance(ctx context.Context, client *kinesis.Client, ps *pacedStream) error {
	mean := max(1, ps.bytes/int64(ps.records))
	for i := range ps.shards {
		shard := fmt.Sprintf("shardId-%012d", i)
		it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName: aws.String(ps.name), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return fmt.Errorf("spending the allowance of %s/%s: %w", ps.name, shard, err)
		}
		iter := it.ShardIterator
		for spent := int64(0); spent < pacedBytesPerShard && iter != nil; {
			limit := min(10_000, max(1, (pacedBytesPerShard-spent)/mean))
			out, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(int32(limit))})
			if err != nil {
				return fmt.Errorf("spending the allowance of %s/%s: %w", ps.name, shard, err)
			}
			if len(out.Records) == 0 {
				break
			}
			for _, r := range out.Records {
				spent += int64(len(r.Data) + len(aws.ToString(r.PartitionKey)))
			}
			iter = out.NextShardIterator
		}
	}
	return nil
}

// pacedTime is how long a paced read took: from its first record to the end of the job.
// Unlike row 1's steady time (first record to last) it includes the wait after the last
// large answer, which keeps the shard's read, and the runner's next shard, waiting.
func pacedTime(r readRun) time.Duration { return r.Total - r.Startup }

// pacedRate is a paced read's user records per second over pacedTime.
func pacedRate(r readRun) float64 {
	if pacedTime(r) <= 0 {
		return 0
	}
	return float64(r.Records) / pacedTime(r).Seconds()
}

// rate sets the read's rate against the service's: the stream's bytes over the read's
// pacedTime, per shard and as a share of what its shards allow together.
func (ps *pacedStream) rate(r readRun) {
	if pacedTime(r) <= 0 {
		return
	}
	perSecond := float64(ps.bytes) / pacedTime(r).Seconds()
	ps.perShardRate = perSecond / float64(ps.shards) / (1 << 20)
	ps.fraction = perSecond / float64(ps.shards*pacedBytesPerShard)
}

// rowDeaggregate is row 2.
func (b *Bench) rowDeaggregate(ctx context.Context) (Row, error) {
	rs, err := b.readServer()
	if err != nil {
		return Row{}, err
	}
	srv, n, shards := rs.srv, b.cfg.Records, b.cfg.DeaggShards
	if b.cfg.DeaggRecords > 0 {
		n = min(n, b.cfg.DeaggRecords)
	}
	plain := &pacedStream{name: "paced-plain", shards: shards}
	agg := &pacedStream{name: "paced-agg", shards: shards}
	for _, ps := range []*pacedStream{plain, agg} {
		if err := srv.CreateStream(ps.name, shards); err != nil {
			return Row{}, fmt.Errorf("creating stream %s: %w", ps.name, err)
		}
	}
	if err := putPlain(ctx, srv.Client(), plain.name, n); err != nil {
		return Row{}, err
	}
	if err := putAggregated(ctx, srv.Client(), agg.name, n); err != nil {
		return Row{}, err
	}
	for _, ps := range []*pacedStream{plain, agg} {
		if err := ps.measure(srv); err != nil {
			return Row{}, err
		}
	}
	srv.SetLimits(true)
	defer srv.SetLimits(false)
	runs := map[*pacedStream]readRun{}
	for _, ps := range []*pacedStream{plain, agg} {
		if err := spendAllowance(ctx, srv.Client(), ps); err != nil {
			return Row{}, err
		}
		r, err := readBounded(ctx, srv.URL(), ps.name)
		if err != nil {
			return Row{}, err
		}
		if r.Records != int64(n) {
			return Row{}, fmt.Errorf("ReadBounded of %s read %d user records, want %d", ps.name, r.Records, n)
		}
		ps.rate(r)
		runs[ps] = r
		b.cfg.logf("paced ReadBounded of %s: %d user records in %v (first record to the end %v), %.2f MiB/s per shard, %d GetRecords, %d throttled",
			ps.name, r.Records, r.Total.Round(time.Millisecond), pacedTime(r).Round(time.Millisecond), ps.perShardRate, r.Calls, r.Throttles)
	}
	pr, ar := runs[plain], runs[agg]
	against := func(ps *pacedStream, r readRun) string {
		return fmt.Sprintf("%s = %.2f MiB/s per shard, %.2f of the %d × 2 MiB/s the service allows; %s GetRecords, %s refused (throttled)",
			rate(pacedRate(r), "user rec/s"), ps.perShardRate, ps.fraction, ps.shards, group(r.Calls), group(r.Throttles))
	}
	row := Row{
		ID: "2",
		Name: fmt.Sprintf("Deaggregating read, paced: ReadBounded of %s user records in %s KPL aggregates over %s, server read limits on",
			group(int64(n)), group(int64(agg.records)), plural(shards, "shard")),
		Measured: against(agg, ar),
		Baseline: "the same user records stored plain, same limits: " + against(plain, pr),
		Ratio:    pacedRate(ar) / pacedRate(pr),
		Target:   "≥ 0.9× (like for like)",
		Notes: fmt.Sprintf("rates from the first record to the end of the job (waits included), each read starting with its shards' one-second allowance spent; largest answer: aggregates %s (the read waits %.1f s after it, the service's refusal), plain %s; at most %d (aggregates) and %d (plain) of %d shards read at once (Prism runs a bundle's shards one after another); whole-job ratio %.2f×",
			mib(float64(agg.largestAnswer)), float64(agg.largestAnswer)/pacedBytesPerShard, mib(float64(plain.largestAnswer)),
			ar.Overlap, pr.Overlap, shards, ar.rate()/pr.rate()),
		Rate: pacedRate(ar),
		Counts: map[string]int64{"user_records": ar.Records, "plain_records": pr.Records, "kinesis_records": int64(agg.records),
			"largest_answer_bytes": agg.largestAnswer},
	}
	return row, nil
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
