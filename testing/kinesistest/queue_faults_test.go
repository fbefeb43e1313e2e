package kinesistest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func TestQueueThrottlingFault(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	e.srv.SetFaults(kinesistest.Faults{QueueThrottleRate: 1, Operations: []string{"ReceiveQueueRecords", "ListQueues"}})
	_, err := e.receiveErr(arn, 10)
	wantErrorType[*types.ThrottlingException](t, err)
	_, err = e.kc.ListQueues(e.ctx, &kinesis.ListQueuesInput{})
	wantErrorType[*types.ThrottlingException](t, err)
	if _, err := e.kc.DescribeQueue(e.ctx, &kinesis.DescribeQueueInput{QueueARN: &arn}); err != nil {
		t.Errorf("DescribeQueue, not among the fault's operations: %v", err)
	}
	// The SDK's retryer retries ThrottlingException: a client that retries gets through
	// once the fault is off (here: the first attempt is throttled, the retry is not).
	e.srv.SetFaults(kinesistest.Faults{QueueThrottleRate: 0.5, Seed: 2, Operations: []string{"ReceiveQueueRecords"}})
	retrying := e.srv.Client()
	for range 5 {
		if _, err := retrying.ReceiveQueueRecords(e.ctx, &kinesis.ReceiveQueueRecordsInput{QueueARN: &arn, WaitTimeSeconds: aws.Int32(0)}); err != nil {
			t.Errorf("retrying client: %v", err)
		}
	}
}

func TestQueueEntryFaults(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	e.putN("s", 3)
	hs := handles(e.receive(arn, 10))
	e.srv.SetFaults(kinesistest.Faults{QueueEntryThrottleRate: 1})
	for h, code := range e.ack(arn, hs...) {
		if code != "ThrottlingException" {
			t.Errorf("ack %s: %q, want ThrottlingException", h, code)
		}
	}
	e.srv.SetFaults(kinesistest.Faults{QueueEntryInternalFailureRate: 1})
	for h, code := range e.setVisibility(arn, 100, hs...) {
		if code != "InternalFailureException" {
			t.Errorf("visibility %s: %q, want InternalFailureException", h, code)
		}
	}
	// Failed entries changed nothing: the records are in flight with their first handles
	// and the receive's 30 s.
	if st := e.stats(arn); st.InFlight != 3 || st.Acked != 0 {
		t.Errorf("stats %+v", st)
	}
	e.srv.SetFaults(kinesistest.Faults{})
	e.clock.Advance(29 * time.Second)
	for h, code := range e.ack(arn, hs...) {
		if code != "" {
			t.Errorf("ack %s without faults: %s", h, code)
		}
	}

	// The same seed fails the same entries.
	pattern := func() string {
		e := newQueueEnv(t, kinesistest.WithFaults(kinesistest.Faults{Seed: 3, QueueEntryThrottleRate: 0.3, QueueEntryInternalFailureRate: 0.3}))
		arn := e.queue("q", kinesistest.QueueConfig{})
		e.putN("s", 10)
		recs := e.receive(arn, 10)
		res := e.ack(arn, handles(recs)...)
		var codes []string
		for _, r := range recs {
			codes = append(codes, res[*r.ReceiptHandle]+"/"+string(r.Data))
		}
		return strings.Join(codes, ",")
	}
	a, b := pattern(), pattern()
	if a != b || !strings.Contains(a, "ThrottlingException") || !strings.Contains(a, "InternalFailureException") || !strings.Contains(a, "/r") {
		t.Errorf("seeded entry faults:\n%s\n%s", a, b)
	}
}

func TestQueueTransportFaults(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	e.putN("s", 2)

	e.srv.SetFaults(kinesistest.Faults{ServerErrorRate: 1, Operations: []string{"ReceiveQueueRecords"}})
	_, err := e.receiveErr(arn, 10)
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() < 500 {
		t.Errorf("server error fault: %v", err)
	}

	// The answer to a receive is lost: the records are in flight all the same and come
	// back when their visibility runs out.
	e.srv.SetFaults(kinesistest.Faults{DropAfterProcessingRate: 1, Operations: []string{"ReceiveQueueRecords"}})
	if _, err := e.receiveErr(arn, 10); err == nil {
		t.Fatal("receive with its answer dropped succeeded")
	}
	if st := e.stats(arn); st.InFlight != 2 {
		t.Errorf("after a lost answer: %+v", st)
	}
	e.srv.SetFaults(kinesistest.Faults{DropConnectionRate: 1, Operations: []string{"ReceiveQueueRecords"}})
	e.clock.Advance(30 * time.Second)
	if _, err := e.receiveErr(arn, 10); err == nil {
		t.Fatal("receive with its connection dropped succeeded")
	}
	e.srv.SetFaults(kinesistest.Faults{Latency: 200 * time.Millisecond, Operations: []string{"ReceiveQueueRecords"}})
	start := time.Now()
	got := e.receive(arn, 10)
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("receive with 200 ms latency took %v", took)
	}
	if len(got) != 2 || aws.ToInt32(got[0].ReceiveCount) != 2 {
		t.Errorf("after the lost answer and the visibility: %+v", got)
	}
}

// TestRedeliveryAfterAcknowledgement: the service's "rare" redelivery of an acknowledged
// record. The entry succeeds and its handle is spent, but the record comes back when its
// visibility runs out.
func TestRedeliveryAfterAcknowledgement(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	e.put("s", "k", "v")
	first := e.receive(arn, 10)
	e.srv.SetFaults(kinesistest.Faults{QueueRedeliverAfterAckRate: 1})
	h := *first[0].ReceiptHandle
	if res := e.ack(arn, h); res[h] != "" {
		t.Fatalf("ack: %v", res)
	}
	if res := e.ack(arn, h); res[h] != "InvalidArgumentException" {
		t.Errorf("second ack of the handle: %v", res)
	}
	e.srv.SetFaults(kinesistest.Faults{})
	if got := e.receive(arn, 10); len(got) != 0 {
		t.Fatalf("before the visibility ran out: %v", datas(got))
	}
	e.clock.Advance(30 * time.Second)
	again := e.receive(arn, 10)
	if len(again) != 1 || aws.ToString(again[0].RecordId) != aws.ToString(first[0].RecordId) || aws.ToInt32(again[0].ReceiveCount) != 2 {
		t.Fatalf("redelivery after the ack: %+v", again)
	}
	e.ack(arn, *again[0].ReceiptHandle)
	acked, _ := e.srv.QueueAckedRecordIDs(arn)
	if acked[aws.ToString(first[0].RecordId)] != 2 {
		t.Errorf("acked ids %v, want the record twice", acked)
	}
	if st := e.stats(arn); st.Acked != 2 || st.RedeliveredAfterAck != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestExpireQueueInFlight(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{VisibilityTimeout: time.Hour})
	e.putN("s", 3)
	e.receive(arn, 2)
	if n, err := e.srv.ExpireQueueInFlight(arn); err != nil || n != 2 {
		t.Fatalf("ExpireQueueInFlight: %d, %v", n, err)
	}
	got := e.drain(arn)
	if len(got) != 3 {
		t.Fatalf("after expiring: %v", datas(got))
	}
	recs, _ := e.srv.QueueRecords(arn)
	counts := map[int]int{}
	for _, r := range recs {
		counts[r.ReceiveCount]++
		if r.State != "IN_FLIGHT" || !r.VisibleAt.Equal(t0.Add(time.Hour)) {
			t.Errorf("record %+v", r)
		}
	}
	if counts[1] != 1 || counts[2] != 2 {
		t.Errorf("receive counts %v, want one 1 and two 2", counts)
	}
}

// TestQueueFaultsValidated: queue fault rates are probabilities, and the two entry rates
// share one draw.
func TestQueueFaultsValidated(t *testing.T) {
	for _, f := range []kinesistest.Faults{
		{QueueThrottleRate: 1.5},
		{QueueEntryThrottleRate: -0.1},
		{QueueRedeliverAfterAckRate: 2},
		{QueueEntryThrottleRate: 0.6, QueueEntryInternalFailureRate: 0.6},
	} {
		if _, err := kinesistest.Start(kinesistest.WithFaults(f)); err == nil {
			t.Errorf("Start with %+v succeeded", f)
		}
	}
	if _, err := kinesistest.Start(kinesistest.WithQueueInFlightLimit(0)); err == nil {
		t.Error("Start with an in-flight limit of 0 succeeded")
	}
	if _, err := kinesistest.Start(kinesistest.WithQueueTransitionDelay(-time.Second)); err == nil {
		t.Error("Start with a negative queue transition delay succeeded")
	}
}
