package kinesisio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/readapi"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

// readSpec is the configuration a shard reader carries to the workers. Its fields are
// exported because Beam serialises DoFns as JSON. Client holds credentials when static keys
// are configured; its String method redacts them and it is never logged whole.
type readSpec struct {
	Stream string
	// ReadID names the transform in the worker's pacing keys (pacing.go).
	ReadID               string
	Client               clientConfig
	Retry                retryConfig
	FailOnDataLoss       bool
	MaxFetchTime         time.Duration
	MaxRecordsPerFetch   int64
	MaxRecordsPerRead    int32
	IdleTimeBetweenReads time.Duration
	PollInterval         time.Duration
	WatermarkPolicy      int64
	EventTimeFn          eventTimeSpec
	IdleThreshold        time.Duration
	Deaggregate          bool
	MaxRecords           int64
	// PropagationDelay is how long a stored record may take to become readable: a caught-up
	// read sent at t proves only that nothing that arrived before t minus it is unread.
	PropagationDelay time.Duration
	// ConsumerName or ConsumerARN, when set, make the reader subscribe with enhanced fan-out
	// (efo.go) instead of polling. NoSubscriptionReuse closes each subscription at the end of
	// its ProcessElement call instead of leaving it open for the next (for measurements).
	ConsumerName        string
	ConsumerARN         string
	NoSubscriptionReuse bool
	// Checkpoint names the checkpoint table (checkpoint.go), if any.
	Checkpoint checkpointSpec
	// Cut is the windowing of the sinks a held commit waits for (held.go): the reader ends
	// a commit token at the last record of each window. Zero: one token per call.
	Cut windowCut
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
		WatermarkPolicy:      cfg.read.watermarkPolicy,
		IdleThreshold:        cfg.read.idleThreshold,
		Deaggregate:          cfg.read.deaggregate,
		MaxRecords:           cfg.read.maxRecords,
		PropagationDelay:     cfg.read.propagationDelay,
		ConsumerName:         cfg.read.consumerName,
		ConsumerARN:          cfg.read.consumerARN,
		NoSubscriptionReuse:  cfg.read.noSubscriptionReuse,
		Checkpoint:           newCheckpointSpec(cfg),
	}
	if cfg.read.timestampFn != nil {
		// Validated when the option was applied.
		s.EventTimeFn, _ = encodeEventTimeFn(cfg.read.timestampFn)
	}
	return s
}

// shardReader reads shards: the polling loop shared by the unbounded and bounded shard
// reading DoFns. It is built on the worker from a readSpec.
type shardReader struct {
	spec   readSpec
	api    *readapi.Client
	policy watermarkPolicy
	retry  backoff.Policy
	// cp is the checkpoint table, or nil.
	cp *checkpointer

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
	var cp *checkpointer
	if spec.Checkpoint.enabled() {
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

// pacingKey is the shard's key in the worker's pacer and memo cache: the read and the shard.
func (r *shardReader) pacingKey(d shardDescriptor) string { return shardKey(r.spec.ReadID, d) }

// shardKey is the key of shard d of the read readID in the worker's pacer and memo cache.
func shardKey(readID string, d shardDescriptor) string {
	return readID + "/" + d.Stream + "/" + d.ShardID
}

// readState is what one call of process knows beyond the restriction.
type readState struct {
	d shardDescriptor
	// streamName is the stream's name, also when the read was given its ARN.
	streamName string
	hr         hashRange
	start      shardRestriction // where the iterator was opened: the restriction, or the trim horizon after data loss
	iterator   string
	skip       *recordPosition // records up to here were claimed before this restriction
	lastClaim  *recordClaim    // the last record claimed in this call
	emitted    int64
	// limit, when positive, is how many user records this call emits before it checkpoints
	// (WithMaxRecordsPerFetch, for the unbounded reader); the checkpoint may fall inside an
	// aggregate.
	limit int64
}

// newReadState is the state of a call that reads d from rest.
func (r *shardReader) newReadState(d shardDescriptor, rest shardRestriction, bounded bool) readState {
	st := readState{d: d, streamName: streamarn.Name(d.Stream), hr: d.hashRange(), start: rest, skip: rest.skipThrough()}
	if !bounded {
		st.limit = r.spec.MaxRecordsPerFetch
	}
	return st
}

// spent says the call has emitted as many records as it may.
func (st *readState) spent() bool { return st.limit > 0 && st.emitted >= st.limit }

// process reads the shard d from the restriction in rt, emitting each user record after
// claiming it. An unbounded reader (we != nil) returns after a bounded amount of work or when
// caught up, asking to be resumed; a bounded one loops until its restriction is done.
//
// An unbounded reader rides out Kinesis being unreachable: a call whose retries
// (WithRetries) ran out on throttling, 5xx or a connection error returns to the runner at
// its last claimed position and is resumed later, with a warning and the unavailable
// counter, instead of failing the bundle (on Prism that would end the job). Other errors,
// and every error of a bounded read, fail the call.
func (r *shardReader) process(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, d shardDescriptor, emit func(beam.EventTime, Record)) (sdf.ProcessContinuation, error) {
	cont, err := r.processOnce(ctx, we, rt, d, emit)
	var final noRideOut
	if err == nil || we == nil || backoff.Classify(err) == backoff.Fatal || errors.As(err, &final) || rt.GetError() != nil {
		return cont, err
	}
	wait := r.retry.Max
	readUnavailable.Inc(ctx, 1)
	calls.notBefore(r.pacingKey(d), time.Now().Add(wait))
	log.Warnf(ctx, "%v; Kinesis did not answer within the %d retries of WithRetries: reading %v again from its last position in %v", err, r.retry.Retries, d, wait)
	return sdf.ResumeProcessingIn(wait), nil
}

// noRideOut is an error the unbounded reader fails on even when its text reads as a
// transient one (the SDK classifies any error that mentions "connection reset" as
// retryable): subscriptions that keep ending before their first event.
type noRideOut struct{ error }

func (e noRideOut) Unwrap() error { return e.error }

// processOnce is process without riding out an unreachable Kinesis.
func (r *shardReader) processOnce(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, d shardDescriptor, emit func(beam.EventTime, Record)) (sdf.ProcessContinuation, error) {
	defer func() { reportCalls(ctx, r.api.TakeStats()) }()
	if r.spec.enhancedFanOut() {
		return r.processEFO(ctx, we, rt, d, emit)
	}
	bounded := we == nil
	rest := rt.GetRestriction().(shardRestriction)
	key := r.pacingKey(d)
	if rest.Empty {
		calls.forget(key)
		memos.forget(key)
		return sdf.StopProcessing(), nil
	}
	// A call that comes before the shard's next read is due (the runner did not wait as
	// asked) waits, or is resumed later, before it opens an iterator.
	if wait := calls.wait(key, time.Now()); bounded {
		if err := backoff.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("kinesisio: reading %v: %w", d, err)
		}
	} else if cont, held, err := holdOff(ctx, wait); held || err != nil {
		return cont, err
	}
	rs := r.newReadState(d, rest, bounded)
	st := &rs
	if it, ok := memos.takeIterator(key, rest.start(), time.Now()); ok {
		// The last call on this worker stopped exactly where this one starts.
		st.iterator = it
		iteratorsReused.Inc(ctx, 1)
	} else if err := r.open(ctx, st); err != nil {
		return r.readError(ctx, rt, st, "", err)
	} else if rest.Claimed == 0 && rest.VerifiedMs == 0 {
		log.Infof(ctx, "kinesisio: opened %v at %s", d, rest.startString())
	} else {
		log.Debugf(ctx, "kinesisio: resumed %v at %s", d, rest.startString())
	}
	// checkpoint ends an unbounded call that has consumed every record of the responses it
	// fetched: it leaves the next iterator and the backlog for the call that resumes at the
	// checkpoint, and asks to be resumed after wait.
	var backlog float64
	checkpoint := func(wait time.Duration) (sdf.ProcessContinuation, error) {
		at := rest.after(st.lastClaim).start()
		now := time.Now()
		memos.parkIterator(key, at, st.iterator, now)
		memos.setBacklog(key, at, backlog, now)
		return sdf.ResumeProcessingIn(wait), nil
	}

	callStart := time.Now()
	var lastCall time.Time
	// While one response is being emitted, the next one is already being fetched: the
	// reader then keeps up with a plain GetRecords loop.
	var next chan fetchResult
	cancelNext := func() {}
	defer func() { cancelNext() }()
	for {
		var f fetchResult
		if next != nil {
			f, next = <-next, nil
		} else {
			if r.spec.IdleTimeBetweenReads > 0 && !lastCall.IsZero() {
				if err := backoff.Sleep(ctx, time.Until(lastCall.Add(r.spec.IdleTimeBetweenReads))); err != nil {
					return nil, fmt.Errorf("kinesisio: reading %v: %w", d, err)
				}
			}
			f = r.fetch(ctx, d, st.iterator)
		}
		lastCall = f.sent
		sent, out, err := f.sent, f.out, f.err
		if err != nil {
			var expired *types.ExpiredIteratorException
			switch {
			case errors.As(err, &expired):
				// Iterators live five minutes; renew from the last claimed record.
				expiredIterators.Inc(ctx, 1)
				log.Debugf(ctx, "kinesisio: iterator of %v expired; renewing it", d)
				if err := r.renew(ctx, st); err != nil {
					return nil, err
				}
				continue
			case backoff.Classify(err) == backoff.Throttled:
				log.Warnf(ctx, "kinesisio: %v still throttled after %d retries; waiting %v", d, r.retry.Retries, r.retry.Max)
				if bounded {
					if err := backoff.Sleep(ctx, r.retry.Max); err != nil {
						return nil, fmt.Errorf("kinesisio: reading %v: %w", d, err)
					}
					continue
				}
				calls.notBefore(key, time.Now().Add(r.retry.Max))
				return checkpoint(r.retry.Max)
			}
			return r.readError(ctx, rt, st, "", fmt.Errorf("kinesisio: reading %v: %w", d, err))
		}
		caughtUp := out.MillisBehindLatest != nil && *out.MillisBehindLatest == 0
		if out.NextShardIterator != nil && !caughtUp && r.spec.IdleTimeBetweenReads == 0 &&
			(bounded || (st.emitted+int64(len(out.Records)) < r.spec.MaxRecordsPerFetch && time.Since(callStart) < r.spec.MaxFetchTime)) {
			next = make(chan fetchResult, 1)
			fctx, cancel := context.WithCancel(ctx)
			cancelNext = cancel
			go func(ch chan<- fetchResult, it string) { ch <- r.fetch(fctx, d, it) }(next, aws.ToString(out.NextShardIterator))
		}
		backlog = r.observeBacklog(ctx, rt, key, out.Records, out.MillisBehindLatest)

		next, done, err := r.emitRecords(ctx, st, rt, out.Records, emit)
		if err != nil || done {
			return sdf.StopProcessing(), err
		}
		if next < len(out.Records) {
			// The call's budget ran out inside the response, perhaps inside an aggregate:
			// checkpoint after the last record emitted. The response's next iterator is past
			// records not emitted, so none is left for the next call; the records not
			// emitted are unread too.
			memos.setBacklog(key, rest.after(st.lastClaim).start(), backlog+float64(dataBytes(out.Records[next:])), time.Now())
			return sdf.ResumeProcessingIn(0), nil
		}
		if out.MillisBehindLatest != nil {
			millisBehindLatest.Set(ctx, *out.MillisBehindLatest)
		}
		r.policy.afterRead(we, sent, len(out.Records), caughtUp)

		if out.NextShardIterator == nil {
			rt.TryClaim(shardEndClaim{})
			calls.forget(key)
			memos.forget(key)
			log.Infof(ctx, "kinesisio: %v is closed and fully read", d)
			return sdf.StopProcessing(), rt.GetError()
		}
		st.iterator = aws.ToString(out.NextShardIterator)
		if caughtUp {
			if !rt.TryClaim(caughtUpClaim{AtMs: sent.Add(-r.spec.PropagationDelay).UnixMilli()}) {
				if err := rt.GetError(); err != nil {
					return nil, err
				}
				calls.forget(key)
				memos.forget(key)
				log.Infof(ctx, "kinesisio: %v has been read to the end of the read", d)
				return sdf.StopProcessing(), nil
			}
			// At the tip of the shard: after records, read again at once; after an empty
			// answer, wait the poll interval; and never more than the caught-up budget.
			calls.tipRead(key, sent)
			due := calls.nextTipRead(key)
			if len(out.Records) == 0 {
				due = maxTime(due, sent.Add(r.spec.PollInterval))
			}
			wait := time.Until(due)
			if bounded {
				if err := backoff.Sleep(ctx, wait); err != nil {
					return nil, fmt.Errorf("kinesisio: reading %v: %w", d, err)
				}
				continue
			}
			if wait > 0 {
				calls.notBefore(key, due)
				return checkpoint(wait)
			}
		}
		if !bounded && (st.spent() || time.Since(callStart) >= r.spec.MaxFetchTime) {
			return checkpoint(0)
		}
	}
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// observeBacklog adds the records of a GetRecords response or SubscribeToShard event to the
// shard's byte rate, reports the resulting backlog estimate (with the response's
// MillisBehindLatest) to the tracker, whose progress it becomes, and returns it.
func (r *shardReader) observeBacklog(ctx context.Context, rt *sdf.LockRTracker, key string, records []types.Record, millisBehind *int64) float64 {
	s := rateSample{bytes: dataBytes(records)}
	if n := len(records); n > 0 {
		s.head = int64(len(records[0].Data))
		s.firstMs = aws.ToTime(records[0].ApproximateArrivalTimestamp).UnixMilli()
		s.last = aws.ToTime(records[n-1].ApproximateArrivalTimestamp).UnixMilli()
	}
	b := memos.observe(key, s, len(records), aws.ToInt64(millisBehind), time.Now())
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
			aggregatesOutOfRange.Inc(ctx, 1)
			log.Warnf(ctx, "kinesisio: aggregate %s of %v holds user records outside the shard's hash range; dropping it as the KCL does", aws.ToString(kr.SequenceNumber), st.d)
			return nil, true
		}
	}
	return urs, true
}

// fetchResult is one GetRecords call, with its retries.
type fetchResult struct {
	sent time.Time
	out  *kinesis.GetRecordsOutput
	err  error
}

// fetch calls GetRecords with iterator. It is safe to run on another goroutine.
func (r *shardReader) fetch(ctx context.Context, d shardDescriptor, iterator string) fetchResult {
	f := fetchResult{sent: time.Now()}
	f.out, f.err = r.api.GetRecords(ctx, d, iterator, r.spec.MaxRecordsPerRead)
	return f
}

// open gets the iterator at the restriction's start, once the start is checked against
// the trim horizon (checkStart).
func (r *shardReader) open(ctx context.Context, st *readState) error {
	if err := r.checkStart(ctx, st); err != nil {
		return err
	}
	it, err := r.api.ShardIterator(ctx, st.d, st.start.iteratorInput(st.d))
	if st.start.latestInFuture(err) {
		in := st.start.iteratorInput(st.d)
		in.ShardIteratorType, in.Timestamp = types.ShardIteratorTypeLatest, nil
		it, err = r.api.ShardIterator(ctx, st.d, in)
	}
	var invalid *types.InvalidArgumentException
	if _, ok := st.start.sequenceStart(); ok && errors.As(err, &invalid) {
		// Some servers refuse an iterator at a trimmed sequence number.
		if lost, perr := r.startTrimmed(ctx, st.d, st.start.StartSeq); perr == nil && lost != "" {
			if err := r.onDataLoss(ctx, st, lost); err != nil {
				return err
			}
			it, err = r.api.ShardIterator(ctx, st.d, st.start.iteratorInput(st.d))
		}
	}
	if err != nil {
		return fmt.Errorf("kinesisio: opening %v at %s: %w", st.d, st.start.startString(), err)
	}
	st.iterator = it
	return nil
}

// renew replaces an expired iterator, resuming after the last record claimed in this call
// or, if none was, where the iterator was first opened.
func (r *shardReader) renew(ctx context.Context, st *readState) error {
	from := st.start.after(st.lastClaim)
	it, err := r.api.ShardIterator(ctx, st.d, from.iteratorInput(st.d))
	if err != nil {
		return fmt.Errorf("kinesisio: renewing the iterator of %v at %s: %w", st.d, from.startString(), err)
	}
	st.iterator, st.skip = it, from.skipThrough()
	return nil
}
