package queue_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/queue"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

var fast = backoff.Policy{Retries: 30, Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond}

type env struct {
	t   *testing.T
	ctx context.Context
	srv *kinesistest.Server
	kc  *kinesis.Client
	arn string
}

// newEnv starts a server with an ON_DEMAND stream "s" and a queue "q" on it made with cfg.
func newEnv(t *testing.T, cfg kinesistest.QueueConfig, opts ...kinesistest.Option) *env {
	t.Helper()
	srv := kinesistest.StartT(t, append(opts, kinesistest.WithOnDemandStream("s", 2, ""))...)
	arn, err := srv.CreateQueue("q", "s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	kc := srv.Client(func(o *kinesis.Options) { o.Retryer = aws.NopRetryer{} })
	return &env{t: t, ctx: ctx, srv: srv, kc: kc, arn: arn}
}

func (e *env) put(n int) []string {
	e.t.Helper()
	var want []string
	for start := 0; start < n; start += 500 {
		in := &kinesis.PutRecordsInput{StreamName: aws.String("s")}
		for i := start; i < min(n, start+500); i++ {
			d := "r" + strconv.Itoa(i)
			want = append(want, d)
			in.Records = append(in.Records, types.PutRecordsRequestEntry{PartitionKey: aws.String("k" + strconv.Itoa(i)), Data: []byte(d)})
		}
		out, err := e.kc.PutRecords(e.ctx, in)
		if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
			e.t.Fatalf("PutRecords: %v %+v", err, out)
		}
	}
	slices.Sort(want)
	return want
}

func (e *env) pool(cfg queue.Config) *queue.Pool {
	cfg.QueueARN = e.arn
	if cfg.Visibility == 0 {
		cfg.Visibility = 30 * time.Second
	}
	if cfg.ProcessingTimeout == 0 {
		cfg.ProcessingTimeout = 2 * time.Minute
	}
	if cfg.Wait == 0 {
		cfg.Wait = time.Second
	}
	cfg.Policy = fast
	cfg.Logf = e.t.Logf
	p := queue.NewPool(e.kc, cfg)
	e.t.Cleanup(func() { p.Stop(context.Background()) })
	return p
}

// takeAll takes from p until it has n records.
func (e *env) takeAll(p *queue.Pool, n int) []queue.Record {
	e.t.Helper()
	var got []queue.Record
	for len(got) < n {
		recs, err := p.Take(e.ctx, 100, time.Second)
		if err != nil {
			e.t.Fatalf("Take after %d records: %v", len(got), err)
		}
		got = append(got, recs...)
	}
	return got
}

func datas(recs []queue.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Data)
	}
	slices.Sort(out)
	return out
}

func entries(recs []queue.Record) []queue.Entry {
	out := make([]queue.Entry, len(recs))
	for i, r := range recs {
		out[i] = queue.Entry{Handle: r.Handle, Received: r.Received}
	}
	return out
}

func (e *env) stats() kinesistest.QueueStats {
	st, err := e.srv.QueueStats(e.arn)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func TestPoolReceivesAndAcknowledgesEveryRecord(t *testing.T) {
	e := newEnv(t, kinesistest.QueueConfig{})
	want := e.put(437)
	p := e.pool(queue.Config{Receivers: 4})
	got := e.takeAll(p, len(want))
	if d := datas(got); !slices.Equal(d, want) {
		t.Fatalf("received %d records, want %d: %v", len(d), len(want), d)
	}
	done, err := p.Settler().Ack(e.ctx, entries(got))
	if err != nil || len(done.Lost) != 0 {
		t.Fatalf("Ack: lost %v, err %v", done.Lost, err)
	}
	st := e.stats()
	if st.Acked != int64(len(want)) || st.InFlight != 0 || st.Visible != 0 || st.Redelivered != 0 {
		t.Fatalf("queue after the acks: %+v", st)
	}
	if s := done.Stats; s.Acks != int64(len(want)) || len(s.AckLagMs) != len(want) {
		t.Fatalf("Ack's stats: acks %d lags %d, want %d each", s.Acks, len(s.AckLagMs), len(want))
	}
	// The acknowledgements are the Ack's caller's to report, not the pool's.
	if s := p.TakeStats(); s.Records != int64(len(want)) || s.Acks != 0 || len(s.AckLagMs) != 0 {
		t.Fatalf("pool stats: records %d acks %d lags %d, want %d records and no acks", s.Records, s.Acks, len(s.AckLagMs), len(want))
	}
}

func TestHolderExtendsUntilTheProcessingTimeout(t *testing.T) {
	e := newEnv(t, kinesistest.QueueConfig{})
	want := e.put(25)
	start := time.Now()
	p := e.pool(queue.Config{Visibility: time.Second, ProcessingTimeout: 4 * time.Second})
	got := e.takeAll(p, len(want))
	// Held past three visibility timeouts: nothing came back.
	if err := e.srv.WaitQueue(e.ctx, e.arn, func(st kinesistest.QueueStats) bool {
		return e.srv.CallCount("UpdateQueueRecordsVisibility") >= 3
	}); err != nil {
		t.Fatal(err)
	}
	if st := e.stats(); st.InFlight != len(want) || st.Expired != 0 {
		t.Fatalf("held records: %+v, want %d in flight and none expired", st, len(want))
	}
	// Let go at the processing timeout: they come back.
	if err := e.srv.WaitQueue(e.ctx, e.arn, func(st kinesistest.QueueStats) bool { return st.Visible == len(want) }); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 4*time.Second {
		t.Fatalf("records came back after %v, before the processing timeout", el)
	}
	s := p.TakeStats()
	// The pool goes on receiving, so records let go may be received and let go again.
	if s.Released < int64(len(got)) || s.Extensions < int64(len(got)) {
		t.Fatalf("stats: released %d, extensions %d; want at least %d each", s.Released, s.Extensions, len(got))
	}
}

func TestStaleHandlesAreCountedNotFatal(t *testing.T) {
	e := newEnv(t, kinesistest.QueueConfig{})
	want := e.put(12)
	p := e.pool(queue.Config{})
	got := e.takeAll(p, len(want))
	if _, err := e.srv.ExpireQueueInFlight(e.arn); err != nil {
		t.Fatal(err)
	}
	done, err := p.Settler().Ack(e.ctx, entries(got))
	if err != nil {
		t.Fatalf("Ack of stale handles: %v", err)
	}
	if len(done.Lost) != len(want) {
		t.Fatalf("lost %d handles, want %d", len(done.Lost), len(want))
	}
	if s := done.Stats; s.StaleHandles != int64(len(want)) || s.FailedAcks != int64(len(want)) || s.Acks != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The records come back and are acknowledged by their new handles.
	again := e.takeAll(p, len(want))
	if d := datas(again); !slices.Equal(d, want) {
		t.Fatalf("redelivered %v", d)
	}
	if done, err := p.Settler().Ack(e.ctx, entries(again)); err != nil || len(done.Lost) != 0 {
		t.Fatalf("Ack: lost %v, err %v", done.Lost, err)
	}
}

func TestFaultsAreRiddenOut(t *testing.T) {
	e := newEnv(t, kinesistest.QueueConfig{}, kinesistest.WithFaults(kinesistest.Faults{
		QueueThrottleRate: 0.3, QueueEntryThrottleRate: 0.2, QueueEntryInternalFailureRate: 0.1, ServerErrorRate: 0.1,
		Operations: []string{"ReceiveQueueRecords", "AcknowledgeQueueRecords", "UpdateQueueRecordsVisibility"},
	}))
	want := e.put(300)
	p := e.pool(queue.Config{Receivers: 3})
	got := e.takeAll(p, len(want))
	done, err := p.Settler().Ack(e.ctx, entries(got))
	if err != nil || len(done.Lost) != 0 {
		t.Fatalf("Ack: lost %v, err %v", done.Lost, err)
	}
	ids, err := e.srv.QueueAckedRecordIDs(e.arn)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(want) {
		t.Fatalf("acked %d record ids, want %d", len(ids), len(want))
	}
	if d := datas(got); !slices.Equal(d, want) {
		t.Fatalf("received %v", d)
	}
	if s := p.TakeStats(); s.Throttles == 0 || s.Retries == 0 {
		t.Fatalf("no receive retries counted under faults: %+v", s)
	}
	if s := done.Stats; s.Retries == 0 || s.Acks != int64(len(want)) {
		t.Fatalf("Ack's stats under faults: %+v, want retries and %d acks", s, len(want))
	}
}

func TestDeadLettersAreReceivedAndRestored(t *testing.T) {
	e := newEnv(t, kinesistest.QueueConfig{MaxReceiveCount: 1})
	want := e.put(15)
	p := e.pool(queue.Config{})
	e.takeAll(p, len(want))
	p.Stop(e.ctx)
	if _, err := e.srv.ExpireQueueInFlight(e.arn); err != nil {
		t.Fatal(err)
	}
	if st := e.stats(); st.DeadVisible != len(want) {
		t.Fatalf("dead letters %+v, want %d", st, len(want))
	}
	dead := e.pool(queue.Config{Side: queue.DeadLetter})
	got := e.takeAll(dead, len(want))
	if d := datas(got); !slices.Equal(d, want) {
		t.Fatalf("dead letters %v", d)
	}
	half := len(got) / 2
	if done, err := dead.Settler().Restore(e.ctx, entries(got[:half])); err != nil || len(done.Lost) != 0 || done.Stats.Restores != int64(half) {
		t.Fatalf("Restore: %+v %v", done, err)
	}
	if done, err := dead.Settler().Ack(e.ctx, entries(got[half:])); err != nil || len(done.Lost) != 0 {
		t.Fatalf("Ack: %v %v", done.Lost, err)
	}
	st := e.stats()
	if st.Restored != int64(half) || st.DeadAcked != int64(len(got)-half) || st.Visible != half {
		t.Fatalf("after restore and discard: %+v", st)
	}
}

func TestPoolStopReleasesBufferedRecords(t *testing.T) {
	e := newEnv(t, kinesistest.QueueConfig{})
	want := e.put(40)
	p := e.pool(queue.Config{Receivers: 2, MaxBuffered: 40})
	first, err := p.Take(e.ctx, 1, 5*time.Second)
	if err != nil || len(first) != 1 {
		t.Fatalf("Take: %v %v", first, err)
	}
	if err := e.srv.WaitQueue(e.ctx, e.arn, func(st kinesistest.QueueStats) bool { return st.Received == int64(len(want)) }); err != nil {
		t.Fatal(err)
	}
	p.Stop(e.ctx)
	// Everything but the taken record is visible again at once; the taken one stays in flight.
	if st := e.stats(); st.Visible != len(want)-1 || st.InFlight != 1 {
		t.Fatalf("after Stop: %+v", st)
	}
}

func TestPoolStopsWhenNothingTakesFromIt(t *testing.T) {
	e := newEnv(t, kinesistest.QueueConfig{})
	want := e.put(40)
	p := e.pool(queue.Config{Receivers: 2, MaxBuffered: 40, IdleStop: 300 * time.Millisecond})
	first, err := p.Take(e.ctx, 1, 5*time.Second)
	if err != nil || len(first) != 1 {
		t.Fatalf("Take: %v %v", first, err)
	}
	// Nothing takes again: the pool stops its long polls and lets go of what it buffered;
	// the record taken stays in flight, held.
	idle := func(st kinesistest.QueueStats) bool {
		return st.Polling == 0 && st.Visible == len(want)-1 && st.InFlight == 1
	}
	if err := e.srv.WaitQueue(e.ctx, e.arn, idle); err != nil {
		t.Fatalf("the idle pool: %v (%+v)", err, e.stats())
	}
	if n := p.Buffered(); n != 0 {
		t.Fatalf("the idle pool buffers %d records; want 0", n)
	}
	// A Take starts it again, and every record is taken once.
	got := append(first, e.takeAll(p, len(want)-1)...)
	if d := datas(got); !slices.Equal(d, want) {
		t.Fatalf("taken %v; want %v", d, want)
	}
}

func TestPoolReceivesForEachCallAtOnce(t *testing.T) {
	e := newEnv(t, kinesistest.QueueConfig{})
	p := e.pool(queue.Config{Receivers: 2})
	polling := func(n int) {
		t.Helper()
		if err := e.srv.WaitQueue(e.ctx, e.arn, func(st kinesistest.QueueStats) bool { return st.Polling == n }); err != nil {
			t.Fatalf("waiting for %d long polls: %v (%+v)", n, err, e.stats())
		}
		if got := p.Receivers(); got != n {
			t.Fatalf("%d receivers; want %d", got, n)
		}
	}
	end1 := p.Call()
	if recs, err := p.Take(e.ctx, 10, 0); err != nil || len(recs) != 0 {
		t.Fatalf("Take of an empty queue: %v, %v", recs, err)
	}
	polling(2)
	end2 := p.Call()
	polling(4)
	// A third call after one ended runs beside one other: still two at once.
	end1()
	end3 := p.Call()
	polling(4)
	end2()
	end3()
	// Stopped and started again by a single call, the pool receives for one.
	p.Stop(e.ctx)
	defer p.Call()()
	if _, err := p.Take(e.ctx, 10, 0); err != nil {
		t.Fatal(err)
	}
	polling(2)
}

// receiveProbe calls before ahead of each ReceiveQueueRecords of the real client.
type receiveProbe struct {
	queue.API
	before func()
}

func (r receiveProbe) ReceiveQueueRecords(ctx context.Context, in *kinesis.ReceiveQueueRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.ReceiveQueueRecordsOutput, error) {
	r.before()
	return r.API.ReceiveQueueRecords(ctx, in, opts...)
}

func TestPoolBuffersUpToItsBytes(t *testing.T) {
	e := newEnv(t, kinesistest.QueueConfig{})
	want := e.put(100)
	// Any record buffered fills a byte bound of 1: the receiver receives only into an empty
	// buffer, though the bound in records is far.
	var (
		p        *queue.Pool
		mu       sync.Mutex
		buffered []int
	)
	probe := receiveProbe{API: e.kc, before: func() {
		mu.Lock()
		defer mu.Unlock()
		buffered = append(buffered, p.Buffered())
	}}
	p = queue.NewPool(probe, queue.Config{QueueARN: e.arn, Receivers: 1, MaxBuffered: 1000, MaxBufferedBytes: 1,
		Visibility: 30 * time.Second, ProcessingTimeout: time.Minute, Wait: time.Second, Policy: fast, Logf: t.Logf})
	t.Cleanup(func() { p.Stop(context.Background()) })
	var got []queue.Record
	for len(got) < len(want) {
		recs, err := p.Take(e.ctx, 1, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, recs...)
	}
	if d := datas(got); !slices.Equal(d, want) {
		t.Fatalf("taken %v; want %v", d, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, n := range buffered {
		if n != 0 {
			t.Fatalf("receive %d began with %d records buffered; want 0 (records buffered at each receive: %v)", i+1, n, buffered)
		}
	}
	if len(buffered) < 10 {
		t.Fatalf("%d receives; want at least 10 for 100 records", len(buffered))
	}
}

// ackBarrier holds each AcknowledgeQueueRecords of the real client until want of them are
// under way at once.
type ackBarrier struct {
	queue.API
	want    int
	mu      sync.Mutex
	waiting int
	all     chan struct{}
}

func (b *ackBarrier) AcknowledgeQueueRecords(ctx context.Context, in *kinesis.AcknowledgeQueueRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.AcknowledgeQueueRecordsOutput, error) {
	b.mu.Lock()
	b.waiting++
	if b.waiting == b.want {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.API.AcknowledgeQueueRecords(ctx, in, opts...)
}

func TestSettlerAcknowledgesBatchesAtOnce(t *testing.T) {
	e := newEnv(t, kinesistest.QueueConfig{})
	want := e.put(100)
	p := e.pool(queue.Config{Receivers: 2})
	got := e.takeAll(p, len(want))
	// 100 entries are 10 calls, all under way at once, or the barrier never opens.
	barrier := &ackBarrier{API: e.kc, want: 10, all: make(chan struct{})}
	s := queue.NewSettler(barrier, e.arn, queue.Normal, fast, t.Logf)
	done, err := s.Ack(e.ctx, entries(got))
	if err != nil || len(done.Lost) != 0 || done.Stats.Acks != int64(len(want)) {
		t.Fatalf("Ack: %+v, %v; want %d acknowledgements", done, err, len(want))
	}
	if st := e.stats(); st.Acked != int64(len(want)) || st.InFlight != 0 {
		t.Fatalf("the queue: %+v; want every record acknowledged", st)
	}
}
