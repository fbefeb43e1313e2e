package kinesisio

// What the read loop does with a batch of Kinesis records: deaggregate, claim and emit the
// user records, and fold the batch into the shard's backlog estimate.

import (
	"bytes"
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// observeBacklog adds the records of a GetRecords response or SubscribeToShard event to the
// shard's byte rate, reports the resulting backlog estimate (with the newest
// MillisBehindLatest, plus held, the data fetched ahead after the response) to the tracker,
// whose progress it becomes, and returns it.
func (r *shardReader) observeBacklog(ctx context.Context, rt *sdf.LockRTracker, key shardKey, records []types.Record, millisBehind *int64, held int64) float64 {
	s := rateSample{bytes: dataBytes(records)}
	if n := len(records); n > 0 {
		s.head = int64(len(records[0].Data))
		s.firstMs = aws.ToTime(records[0].ApproximateArrivalTimestamp).UnixMilli()
		s.last = aws.ToTime(records[n-1].ApproximateArrivalTimestamp).UnixMilli()
	}
	b := memos.observe(key, s, len(records), aws.ToInt64(millisBehind), time.Now()) + float64(held)
	rt.Mu.Lock()
	if t, ok := rt.Rt.(*shardTracker); ok {
		t.setBacklog(b)
	}
	rt.Mu.Unlock()
	backlogBytes.Set(ctx, int64(b))
	return b
}

// dataBytes is the size of the records' data.
func dataBytes(records []types.Record) int64 {
	var n int64
	for i := range records {
		n += int64(len(records[i].Data))
	}
	return n
}

// emitRecords claims and emits the user records of one GetRecords response or
// SubscribeToShard event. It reports done when the restriction has ended. When the call's
// budget (st.limit) runs out first it stops and returns the index of the first record not
// wholly emitted (len(records) when every one was): that record may be an aggregate emitted
// in part, and emitting records[next:] again with st.skip at st.lastClaim's position goes on
// exactly where it stopped.
func (r *shardReader) emitRecords(ctx context.Context, st *readState, rt *sdf.LockRTracker, records []types.Record, emit func(beam.EventTime, Record)) (next int, done bool, err error) {
	var n, size int64
	defer func() {
		recordsRead.Inc(ctx, n)
		bytesRead.Inc(ctx, size)
		recordsPerCall.Update(ctx, int64(len(records)))
	}()
	now := time.Now()
	var users [1]kpl.UserRecord
	for i := range records {
		kr := &records[i]
		seq := aws.ToString(kr.SequenceNumber)
		arrival := aws.ToTime(kr.ApproximateArrivalTimestamp)
		urs, aggregated := r.userRecords(ctx, st, kr, users[:0])
		for sub := range urs {
			u := &urs[sub]
			pos := recordPosition{Seq: seq, Sub: int64(sub)}
			if st.skip != nil {
				if pos.compare(*st.skip) <= 0 {
					continue
				}
				st.skip = nil
			}
			claim := recordClaim{Pos: pos, Last: sub == len(urs)-1, ArrivalMs: arrival.UnixMilli(), Bytes: int64(len(u.Data))}
			if !rt.TryClaim(claim) {
				return i, true, rt.GetError()
			}
			rec := Record{
				StreamName:                  st.streamName,
				ShardID:                     st.d.ShardID,
				PartitionKey:                u.PartitionKey,
				ExplicitHashKey:             u.ExplicitHashKey,
				SequenceNumber:              seq,
				SubSequenceNumber:           int64(sub),
				ApproximateArrivalTimestamp: arrival,
				Data:                        orEmpty(u.Data),
				Aggregated:                  aggregated,
			}
			emit(mtime.FromTime(r.policy.eventTime(&rec, now)), rec)
			st.lastClaim = &claim
			st.emitted++
			n++
			size += int64(len(u.Data))
			if rt.IsDone() {
				return i, true, nil
			}
			if st.spent() {
				if claim.Last {
					return i + 1, false, nil
				}
				return i, false, nil
			}
		}
	}
	return len(records), false, nil
}

// userRecords returns the user records of one Kinesis record: the record itself unless it is
// a KPL aggregate and deaggregation is on. Following the KCL, a record that carries the KPL
// magic but fails its checksum or does not parse is passed through whole (and counted), and
// an aggregate holding a user record outside the shard's hash range is dropped whole (and
// counted): the producer routed it to the wrong shard, and the right shard has it too.
// Unlike the KCL, such an aggregate is kept whole on a stream that distributes records
// itself (RecordDistributionStrategy AUTO), where hash keys say nothing of the shard and no
// other shard has its records.
func (r *shardReader) userRecords(ctx context.Context, st *readState, kr *types.Record, buf []kpl.UserRecord) ([]kpl.UserRecord, bool) {
	raw := append(buf, kpl.UserRecord{PartitionKey: aws.ToString(kr.PartitionKey), Data: kr.Data})
	if !r.spec.Deaggregate {
		return raw, false
	}
	urs, ok, err := kpl.Deaggregate(kr.Data)
	if !ok || err != nil {
		if bytes.HasPrefix(kr.Data, kpl.Magic[:]) {
			aggregatesPassed.Inc(ctx, 1)
			why := "bad checksum or body"
			if err != nil {
				why = err.Error()
			}
			log.Warnf(ctx, "kinesisio: record %s of %v starts like a KPL aggregate but is not a valid one (%s); passing it through whole", aws.ToString(kr.SequenceNumber), st.d, why)
		}
		return raw, false
	}
	for i := range urs {
		if !st.hr.contains(urs[i]) {
			if r.serviceDistributed(ctx, st.d) {
				aggregatesKeptOnAuto.Inc(ctx, 1)
				return urs, true
			}
			aggregatesOutOfRange.Inc(ctx, 1)
			log.Warnf(ctx, "kinesisio: aggregate %s of %v holds user records outside the shard's hash range; dropping it as the KCL does", aws.ToString(kr.SequenceNumber), st.d)
			return nil, true
		}
	}
	return urs, true
}

// distributionRecheck is how long a reader goes by what it last read of a stream's record
// distribution strategy.
const distributionRecheck = time.Minute

// serviceDistributed reports whether d's stream distributes records itself, as
// DescribeStreamSummary said at most distributionRecheck ago. The reader asks only when it
// meets an aggregate outside its shard's range, which is rare on a keyed stream. If the
// stream cannot be described, it reports false: the KCL's rule.
func (r *shardReader) serviceDistributed(ctx context.Context, d shardDescriptor) bool {
	r.distMu.Lock()
	defer r.distMu.Unlock()
	if time.Since(r.distChecked) < distributionRecheck {
		return r.distAuto
	}
	sum, err := r.api.DescribeStreamSummary(ctx, d.Stream)
	if err != nil {
		log.Warnf(ctx, "kinesisio: describing stream %s for its record distribution strategy: %v; taking it as keyed", d.Stream, err)
		return false
	}
	r.distChecked, r.distAuto = time.Now(), sum.RecordDistributionStrategy == types.RecordDistributionStrategyAuto
	return r.distAuto
}
