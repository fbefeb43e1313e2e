package kinesistest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// poll is one ReceiveQueueRecords call running in the background.
type poll struct {
	done    chan struct{}
	recs    []types.QueueRecord
	err     error
	elapsed time.Duration
}

// startPoll starts a long poll of wait seconds on the normal (or dead-letter) side and
// returns once the server has it waiting.
func (e *env) startPoll(ctx context.Context, arn string, wait int32, dead bool) *poll {
	e.t.Helper()
	before := e.stats(arn).Polling
	p := &poll{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		start := time.Now()
		if dead {
			out, err := e.kc.ReceiveDeadLetterQueueRecords(ctx, &kinesis.ReceiveDeadLetterQueueRecordsInput{QueueARN: &arn, WaitTimeSeconds: aws.Int32(wait)})
			if err == nil {
				p.recs = out.QueueRecords
			}
			p.err = err
		} else {
			out, err := e.kc.ReceiveQueueRecords(ctx, &kinesis.ReceiveQueueRecordsInput{QueueARN: &arn, WaitTimeSeconds: aws.Int32(wait)})
			if err == nil {
				p.recs = out.QueueRecords
			}
			p.err = err
		}
		p.elapsed = time.Since(start)
	}()
	e.waitQueue(arn, func(st kinesistest.QueueStats) bool { return st.Polling > before })
	return p
}

// result waits for the poll's answer, at most limit.
func (p *poll) result(t *testing.T, limit time.Duration) ([]types.QueueRecord, error) {
	t.Helper()
	select {
	case <-p.done:
		return p.recs, p.err
	case <-time.After(limit):
		t.Fatalf("the long poll did not end within %v", limit)
		return nil, nil
	}
}

func (e *env) waitQueue(arn string, cond func(kinesistest.QueueStats) bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	if err := e.srv.WaitQueue(ctx, arn, cond); err != nil {
		e.t.Fatal(err)
	}
}

func TestLongPollWakesOnPut(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	p := e.startPoll(e.ctx, arn, 20, false)
	// While it waits, the queue and the stream answer other calls.
	if _, err := e.kc.DescribeQueue(e.ctx, &kinesis.DescribeQueueInput{QueueARN: &arn}); err != nil {
		t.Fatal(err)
	}
	e.put("s", "k", "wake")
	recs, err := p.result(t, 10*time.Second)
	if err != nil || len(recs) != 1 || string(recs[0].Data) != "wake" {
		t.Fatalf("long poll: %v %v", err, datas(recs))
	}
	if st := e.stats(arn); st.Polling != 0 || st.EmptyReceives != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestLongPollEndsOnItsWait(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	p := e.startPoll(e.ctx, arn, 1, false)
	recs, err := p.result(t, 10*time.Second)
	if err != nil || len(recs) != 0 || p.elapsed < time.Second {
		t.Fatalf("a 1 s poll of an empty queue: %v, %d records after %v", err, len(recs), p.elapsed)
	}
	// On a manual clock, moving the clock past the wait ends it too.
	p = e.startPoll(e.ctx, arn, 20, false)
	e.clock.Advance(20 * time.Second)
	recs, err = p.result(t, 10*time.Second)
	if err != nil || len(recs) != 0 || p.elapsed > 10*time.Second {
		t.Fatalf("a 20 s poll with the clock moved 20 s: %v, %d records after %v", err, len(recs), p.elapsed)
	}
	if st := e.stats(arn); st.EmptyReceives != 2 || st.Polling != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestLongPollWakesOnVisibilityTimeout: a record whose visibility runs out on the server
// clock, or that a consumer releases, wakes a waiting receive.
func TestLongPollWakesOnVisibilityTimeout(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	e.put("s", "k", "v")
	first := e.receive(arn, 10)
	p := e.startPoll(e.ctx, arn, 20, false)
	e.clock.Advance(30 * time.Second)
	recs, err := p.result(t, 10*time.Second)
	if err != nil || len(recs) != 1 || aws.ToInt32(recs[0].ReceiveCount) != 2 {
		t.Fatalf("poll over a visibility timeout: %v %+v", err, recs)
	}
	p = e.startPoll(e.ctx, arn, 20, false)
	e.setVisibility(arn, 0, *recs[0].ReceiptHandle)
	recs, err = p.result(t, 10*time.Second)
	if err != nil || len(recs) != 1 || aws.ToString(recs[0].RecordId) != aws.ToString(first[0].RecordId) {
		t.Fatalf("poll over a release: %v %+v", err, recs)
	}
	// The dead-letter side waits the same way: the record's 6th receive times out.
	for i := 0; i < 3; i++ {
		e.clock.Advance(30 * time.Second)
		e.receive(arn, 10)
	}
	p = e.startPoll(e.ctx, arn, 20, true)
	e.clock.Advance(30 * time.Second)
	recs, err = p.result(t, 10*time.Second)
	if err != nil || len(recs) != 1 || aws.ToInt32(recs[0].ReceiveCount) != 7 {
		t.Fatalf("dead-letter poll: %v %+v", err, recs)
	}
}

// TestLongPollWithSystemClock: on the wall clock a record whose visibility runs out during
// a long poll wakes it when it does.
func TestLongPollWithSystemClock(t *testing.T) {
	srv, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateOnDemandStream("s", 1, ""); err != nil {
		t.Fatal(err)
	}
	arn, err := srv.CreateQueue("q", "s", kinesistest.QueueConfig{VisibilityTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	kc := srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	if _, err := kc.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	first, err := kc.ReceiveQueueRecords(t.Context(), &kinesis.ReceiveQueueRecordsInput{QueueARN: &arn, WaitTimeSeconds: aws.Int32(0)})
	if err != nil || len(first.QueueRecords) != 1 {
		t.Fatalf("first receive: %v", err)
	}
	start := time.Now()
	again, err := kc.ReceiveQueueRecords(t.Context(), &kinesis.ReceiveQueueRecordsInput{QueueARN: &arn, WaitTimeSeconds: aws.Int32(10)})
	elapsed := time.Since(start)
	if err != nil || len(again.QueueRecords) != 1 || aws.ToInt32(again.QueueRecords[0].ReceiveCount) != 2 || elapsed > 5*time.Second {
		t.Fatalf("a 10 s poll over a 1 s visibility: %v, %d records after %v", err, len(again.QueueRecords), elapsed)
	}
}

func TestLongPollEndsWhenTheClientGoesAway(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	ctx, cancel := context.WithCancel(e.ctx)
	p := e.startPoll(ctx, arn, 20, false)
	cancel()
	if _, err := p.result(t, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled poll: %v", err)
	}
	// The server stops waiting too.
	e.waitQueue(arn, func(st kinesistest.QueueStats) bool { return st.Polling == 0 })
	// A record put now is still there for the next receive.
	e.put("s", "k", "v")
	if got := e.receive(arn, 10); len(got) != 1 {
		t.Errorf("after the cancelled poll: %v", datas(got))
	}
}

func TestLongPollEndsOnShutdown(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	p := e.startPoll(e.ctx, arn, 20, false)
	start := time.Now()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Close took %v with a long poll open", took)
	}
	if recs, err := p.result(t, 10*time.Second); err != nil || len(recs) != 0 {
		t.Errorf("poll at shutdown: %v, %d records; want an empty answer", err, len(recs))
	}
}

func TestLongPollEndsWhenTheQueueIsDeleted(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	p := e.startPoll(e.ctx, arn, 20, false)
	if _, err := e.kc.DeleteQueue(e.ctx, &kinesis.DeleteQueueInput{QueueARN: &arn}); err != nil {
		t.Fatal(err)
	}
	if recs, err := p.result(t, 10*time.Second); err != nil || len(recs) != 0 {
		t.Errorf("poll of a deleted queue: %v, %d records; want an empty answer", err, len(recs))
	}
}
