package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/batch"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/route"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
)

// send makes one PutRecords call for req, retrying whole-request failures, and settles
// every entry: acknowledged, retried, re-routed or failed.
func (p *Producer) send(req *batch.Request) {
	in := &kinesis.PutRecordsInput{Records: make([]types.PutRecordsRequestEntry, len(req.Entries))}
	in.StreamName, in.StreamARN = streamarn.Input(p.cfg.Stream)
	for i, e := range req.Entries {
		e.Attempts++
		for _, it := range e.Items {
			it.Attempts++
		}
		in.Records[i] = types.PutRecordsRequestEntry{Data: e.Record.Data}
		if e.Record.PartitionKey != "" { // none on a stream that distributes records itself
			in.Records[i].PartitionKey = aws.String(e.Record.PartitionKey)
		}
		if e.Record.ExplicitHashKey != "" {
			in.Records[i].ExplicitHashKey = aws.String(e.Record.ExplicitHashKey)
		}
	}
	var out *kinesis.PutRecordsOutput
	sent := time.Now()
	err := backoff.Do(p.ctx, p.cfg.Retry, func(ctx context.Context) error {
		p.stats.calls.Add(1)
		var err error
		out, err = p.api.PutRecords(ctx, in)
		if err == nil && len(out.Records) != len(in.Records) {
			err = fmt.Errorf("PutRecords answered %d results for %d records", len(out.Records), len(in.Records))
		}
		return err
	}, func(int, error, backoff.Class, time.Duration) { p.stats.retries.Add(1) })

	if p.limiter != nil && err == nil {
		// Large records were charged when they left; the service counted them on arrival.
		inFlight := time.Since(sent)
		for _, e := range req.Entries {
			if e.Shard != autoQueue {
				p.limiter.Answered(e.Shard, e.Size(), inFlight)
			}
		}
	}

	// Evidence of resharding needs a fresh map before deciding where records belong, and
	// evidence of a switch of the stream's distribution strategy the strategy.
	var m *route.Map
	if err == nil {
		m = p.mapForResults(req, out)
	}
	if p.switchSuspected(req, out, err) {
		p.checkDistribution(p.ctx)
	}

	p.mu.Lock()
	defer func() {
		p.inflight--
		p.cond.Broadcast()
		p.mu.Unlock()
		p.poke()
	}()
	if m != nil {
		p.adopt(m)
	}
	if err != nil {
		code, reason := describe(err)
		for _, e := range req.Entries {
			if invalidRequest(err) && p.auto != (e.Shard == autoQueue) {
				// Refused for a strategy the stream no longer has: place the records
				// afresh (requeue fails those without a key that now need one).
				p.requeue(e)
				continue
			}
			p.fail(e.Items, code, fmt.Sprintf("PutRecords failed: %s", reason))
		}
		return
	}
	now := time.Now()
	for i, e := range req.Entries {
		res := out.Records[i]
		if res.ErrorCode != nil {
			p.retryOrFail(e, aws.ToString(res.ErrorCode), aws.ToString(res.ErrorMessage), now)
			continue
		}
		landed := aws.ToString(res.ShardId)
		if e.Aggregated() && landed != e.Shard && !p.belongs(landed, e) {
			// The KPL's "wrong shard": readers that check hash ranges drop this aggregate,
			// so its records are routed and sent again.
			p.stats.wrongShard.Add(1)
			p.router.Invalidate()
			for _, it := range e.Items {
				p.place(it)
			}
			continue
		}
		p.stats.kinesisRecords.Add(1)
		p.stats.bytes.Add(int64(e.Size()))
		p.stats.userRecords.Add(int64(len(e.Items)))
		p.resolve(e.Items)
	}
}

// mapForResults returns a fresh shard map when a result shows a record on a shard the
// current map does not know (a resharding), nil otherwise.
func (p *Producer) mapForResults(req *batch.Request, out *kinesis.PutRecordsOutput) *route.Map {
	p.mu.Lock()
	cur := p.m
	p.mu.Unlock()
	evidence := false
	for i, e := range req.Entries {
		if e.Shard == autoQueue {
			continue // the service picks the shard: where it landed says nothing
		}
		res := out.Records[i]
		if res.ErrorCode != nil || aws.ToString(res.ShardId) == e.Shard {
			continue
		}
		if _, ok := cur.Shard(aws.ToString(res.ShardId)); !ok {
			evidence = true
			break
		}
	}
	if !evidence {
		return nil
	}
	p.router.Invalidate()
	m, err := p.router.Current(p.ctx)
	if err != nil {
		return nil
	}
	return m
}

// switchSuspected reports whether a request's outcome hints that the stream switched its
// distribution strategy: an aggregate that landed on a shard other than its own (AUTO
// ignores the explicit hash key), or a request refused as invalid while records without a
// partition key were in it (the stream left AUTO). Not under p.mu.
func (p *Producer) switchSuspected(req *batch.Request, out *kinesis.PutRecordsOutput, err error) bool {
	if err != nil {
		return invalidRequest(err)
	}
	for i, e := range req.Entries {
		res := out.Records[i]
		if e.Aggregated() && res.ErrorCode == nil && aws.ToString(res.ShardId) != e.Shard {
			return true
		}
	}
	return false
}

// invalidRequest reports whether the service refused a whole request as invalid.
func invalidRequest(err error) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode() {
	case "ValidationException", "InvalidArgumentException", "SerializationException":
		return true
	}
	return false
}

// belongs reports whether every record of e lies in the range of shard landed, by the
// map in use (refreshed before when the results showed an unknown shard). p.mu is held.
func (p *Producer) belongs(landed string, e *batch.Entry) bool {
	s, ok := p.m.Shard(landed)
	if !ok {
		return false
	}
	for _, it := range e.Items {
		if !s.Contains(it.Hash) {
			return false
		}
	}
	return true
}

// retryOrFail schedules e for another attempt after a per-entry failure, or fails its
// records when the retries are used up. p.mu is held.
func (p *Producer) retryOrFail(e *batch.Entry, code, msg string, now time.Time) {
	class := backoff.Retryable
	if code == "ProvisionedThroughputExceededException" {
		p.stats.throttled.Add(1)
		class = backoff.Throttled
	}
	if e.Attempts > p.cfg.Retry.Retries {
		p.fail(e.Items, code, fmt.Sprintf("PutRecords failed the record %d times, last with %s: %s", e.Attempts, code, msg))
		return
	}
	p.stats.retries.Add(1)
	e.NotBefore = now.Add(p.cfg.Retry.Delay(e.Attempts-1, class))
	p.delayed = append(p.delayed, e)
}

// resolve marks items acknowledged. p.mu is held.
func (p *Producer) resolve(items []*batch.Item) {
	for _, it := range items {
		p.outstanding--
		p.buffered -= memoryCost(it)
	}
}

// fail reports items as failed. p.mu is held.
func (p *Producer) fail(items []*batch.Item, code, reason string) {
	for _, it := range items {
		p.failures = append(p.failures, Failure{Record: it.Record, Meta: it.Meta, Reason: reason, ErrorCode: code, Attempts: it.Attempts})
	}
	p.stats.failures.Add(int64(len(items)))
	p.resolve(items)
}

// describe returns an error's service code (or a generic one) and a message.
func describe(err error) (code, reason string) {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode(), err.Error()
	}
	if errors.Is(err, context.Canceled) {
		return CodeCanceled, err.Error()
	}
	return "RequestError", err.Error()
}
