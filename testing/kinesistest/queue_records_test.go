package kinesistest_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func TestReceiveAndAcknowledge(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	seqs := e.putN("s", 25)
	e.clock.Advance(time.Second)
	got := e.drain(arn)
	if d := datas(got); !slices.Equal(d, wantNames(25)) {
		t.Fatalf("received %v, want r0..r24 once each", d)
	}
	seen := map[string]bool{}
	for _, r := range got {
		data := string(r.Data)
		wantID, err := e.srv.RecordID("s", seqs[data])
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(r.RecordId) != wantID || aws.ToString(r.PartitionKey) != "k"+data[1:] || aws.ToInt32(r.ReceiveCount) != 1 ||
			!r.ApproximateArrivalTimestamp.Equal(t0) || !r.FirstReceiveTimestamp.Equal(t0.Add(time.Second)) {
			t.Errorf("%s: id %s (want %s), key %s, count %d, arrival %v, first receive %v", data, aws.ToString(r.RecordId), wantID,
				aws.ToString(r.PartitionKey), aws.ToInt32(r.ReceiveCount), r.ApproximateArrivalTimestamp, r.FirstReceiveTimestamp)
		}
		h := aws.ToString(r.ReceiptHandle)
		if seen[h] || len(h) < 1 || len(h) > 1024 {
			t.Errorf("receipt handle %q repeated or of a bad length", h)
		}
		seen[h] = true
	}
	if st := e.stats(arn); st.InFlight != 25 || st.Visible != 0 || st.Received != 25 {
		t.Errorf("after receiving: %+v", st)
	}
	hs := handles(got)
	for start := 0; start < len(hs); start += 10 {
		for h, code := range e.ack(arn, hs[start:min(start+10, len(hs))]...) {
			if code != "" {
				t.Errorf("ack %s: %s", h, code)
			}
		}
	}
	if st := e.stats(arn); st.InFlight != 0 || st.Acked != 25 || st.StaleHandles != 0 {
		t.Errorf("after acknowledging: %+v", st)
	}
	acked, err := e.srv.QueueAckedRecordIDs(arn)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if acked[aws.ToString(r.RecordId)] != 1 {
			t.Errorf("record %s acked %d times, want 1", aws.ToString(r.RecordId), acked[aws.ToString(r.RecordId)])
		}
	}
	// Acknowledged records never come back; a second acknowledgement fails.
	e.clock.Advance(time.Hour)
	if again := e.drain(arn); len(again) != 0 {
		t.Errorf("after acks and an hour: received %v", datas(again))
	}
	if res := e.ack(arn, hs[0]); res[hs[0]] != "InvalidArgumentException" {
		t.Errorf("second ack: %v", res)
	}
	recs, _ := e.srv.QueueRecords(arn)
	if len(recs) != 25 || recs[0].State != "ACKED" || recs[0].Acks != 1 || recs[0].Deliveries != 1 {
		t.Errorf("QueueRecords after acks: %d records, first %+v", len(recs), recs[0])
	}
}

// TestDeliveryOrderShuffledAndSeeded: delivery is not in arrival order, and the same seed
// gives the same order.
func TestDeliveryOrderShuffledAndSeeded(t *testing.T) {
	order := func(seed int64) string {
		e := newQueueEnv(t, kinesistest.WithQueueSeed(seed))
		arn := e.queue("q", kinesistest.QueueConfig{})
		e.putN("s", 40)
		var got []string
		for _, r := range e.drain(arn) {
			got = append(got, string(r.Data))
		}
		return strings.Join(got, ",")
	}
	var inOrder []string
	for i := range 40 {
		inOrder = append(inOrder, "r"+strconv.Itoa(i))
	}
	a, b, c := order(7), order(7), order(8)
	if a == strings.Join(inOrder, ",") {
		t.Errorf("delivered in arrival order: %s", a)
	}
	if a != b {
		t.Errorf("seed 7 gave two orders:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 gave the same order %s", a)
	}
}

func TestRecordIDSameInEveryQueueOfTheStream(t *testing.T) {
	e := newQueueEnv(t)
	if err := e.srv.CreateOnDemandStream("other", 1, ""); err != nil {
		t.Fatal(err)
	}
	a := e.queue("a", kinesistest.QueueConfig{})
	b := e.queue("b", kinesistest.QueueConfig{})
	c, err := e.srv.CreateQueue("c", "other", kinesistest.QueueConfig{})
	if err != nil {
		t.Fatal(err)
	}
	e.putN("s", 5)
	e.putN("other", 5)
	ids := func(arn string) map[string]string {
		out := map[string]string{}
		for _, r := range e.drain(arn) {
			out[string(r.Data)] = aws.ToString(r.RecordId)
		}
		return out
	}
	ia, ib, ic := ids(a), ids(b), ids(c)
	if len(ia) != 5 {
		t.Fatalf("queue a delivered %v", ia)
	}
	for data, id := range ia {
		if ib[data] != id {
			t.Errorf("%s: RecordId %s in queue a, %s in queue b", data, id, ib[data])
		}
		if ic[data] == id {
			t.Errorf("%s: RecordId %s on two streams", data, id)
		}
	}
	// An acknowledgement in one queue does not touch the other.
	e.put("s", "k", "x")
	ra, rb := e.receive(a, 10), e.receive(b, 10)
	e.ack(a, handles(ra)...)
	if st := e.stats(b); st.InFlight != 6 || st.Acked != 0 {
		t.Errorf("queue b after an ack in queue a: %+v", st)
	}
	if res := e.ack(a, handles(rb)...); res[handles(rb)[0]] != "InvalidArgumentException" {
		t.Errorf("queue b's handle acknowledged in queue a: %v", res)
	}
}

// TestVisibilityExpiryRedelivers: a record not acknowledged within its visibility comes
// back with ReceiveCount+1 and a new handle; the old handle is dead.
func TestVisibilityExpiryRedelivers(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	e.put("s", "k", "v")
	first := e.receive(arn, 10)
	e.clock.Advance(29 * time.Second)
	if got := e.receive(arn, 10); len(got) != 0 {
		t.Fatalf("received %v before the visibility ran out", datas(got))
	}
	e.clock.Advance(time.Second)
	second := e.receive(arn, 10)
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("first %v, second %v", datas(first), datas(second))
	}
	f, s := first[0], second[0]
	if aws.ToString(s.RecordId) != aws.ToString(f.RecordId) || aws.ToInt32(s.ReceiveCount) != 2 ||
		aws.ToString(s.ReceiptHandle) == aws.ToString(f.ReceiptHandle) || !s.FirstReceiveTimestamp.Equal(t0) {
		t.Errorf("redelivery: id %s/%s, count %d, same handle %v, first receive %v", aws.ToString(f.RecordId), aws.ToString(s.RecordId),
			aws.ToInt32(s.ReceiveCount), aws.ToString(s.ReceiptHandle) == aws.ToString(f.ReceiptHandle), s.FirstReceiveTimestamp)
	}
	res := e.ack(arn, *f.ReceiptHandle, *s.ReceiptHandle)
	if res[*f.ReceiptHandle] != "InvalidArgumentException" || res[*s.ReceiptHandle] != "" {
		t.Errorf("ack old and new handle: %v", res)
	}
	if st := e.stats(arn); st.Expired != 1 || st.Redelivered != 1 || st.StaleHandles != 1 || st.Acked != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v", st)
	}
	// A handle whose visibility ran out is dead even before the record is received again.
	e.put("s", "k", "w")
	h := handles(e.receive(arn, 10))[0]
	e.clock.Advance(30 * time.Second)
	if res := e.ack(arn, h); res[h] != "InvalidArgumentException" {
		t.Errorf("ack after the visibility ran out: %v", res)
	}
}

func TestReceiveVisibilityPerCall(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{VisibilityTimeout: time.Minute})
	e.putN("s", 2)
	vis := func(sec int32) func(*kinesis.ReceiveQueueRecordsInput) {
		return func(in *kinesis.ReceiveQueueRecordsInput) { in.VisibilityTimeoutSeconds = aws.Int32(sec) }
	}
	if got := e.receive(arn, 1, vis(5)); len(got) != 1 {
		t.Fatal(got)
	}
	if got := e.receive(arn, 1); len(got) != 1 {
		t.Fatal(got)
	}
	e.clock.Advance(5 * time.Second)
	if got := e.receive(arn, 10, vis(0)); len(got) != 1 || aws.ToInt32(got[0].ReceiveCount) != 2 {
		t.Fatalf("after 5 s: %v, want the record received with 5 s", got)
	}
	// Visibility 0: visible again at once.
	if got := e.receive(arn, 10); len(got) != 1 || aws.ToInt32(got[0].ReceiveCount) != 3 {
		t.Fatalf("after a receive with visibility 0: %v", got)
	}
	e.clock.Advance(55 * time.Second)
	if got := e.receive(arn, 10); len(got) != 1 || aws.ToInt32(got[0].ReceiveCount) != 2 {
		t.Fatalf("after a minute: %v, want the record received with the queue's 60 s", got)
	}
}

func TestReceiveValidation(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	for _, c := range []struct {
		mutate  func(*kinesis.ReceiveQueueRecordsInput)
		message string
	}{
		{func(in *kinesis.ReceiveQueueRecordsInput) { in.Limit = aws.Int32(0) }, "Value '0' at 'limit' failed to satisfy constraint: Member must have value between 1 and 10"},
		{func(in *kinesis.ReceiveQueueRecordsInput) { in.Limit = aws.Int32(11) }, "Value '11' at 'limit'"},
		{func(in *kinesis.ReceiveQueueRecordsInput) { in.WaitTimeSeconds = aws.Int32(21) }, "Value '21' at 'waitTimeSeconds' failed to satisfy constraint: Member must have value between 0 and 20"},
		{func(in *kinesis.ReceiveQueueRecordsInput) { in.WaitTimeSeconds = aws.Int32(-1) }, "Value '-1' at 'waitTimeSeconds'"},
		{func(in *kinesis.ReceiveQueueRecordsInput) { in.VisibilityTimeoutSeconds = aws.Int32(43201) },
			"Value '43201' at 'visibilityTimeoutSeconds' failed to satisfy constraint: Member must have value between 0 and 43200"},
	} {
		_, err := e.receiveErr(arn, 10, c.mutate)
		wantAPIError(t, err, "ValidationException", "")
		if !strings.Contains(err.Error(), "1 validation error detected: "+c.message) {
			t.Errorf("%v, want it to say %q", err, c.message)
		}
	}
	_, err := e.kc.ReceiveDeadLetterQueueRecords(e.ctx, &kinesis.ReceiveDeadLetterQueueRecordsInput{QueueARN: &arn, Limit: aws.Int32(11)})
	wantAPIError(t, err, "ValidationException", "")
}

func TestUpdateQueueRecordsVisibility(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	e.putN("s", 2)
	got := e.receive(arn, 10)
	if len(got) != 2 {
		t.Fatal(got)
	}
	keep, release := *got[0].ReceiptHandle, *got[1].ReceiptHandle
	e.clock.Advance(20 * time.Second)
	// One call, mixed outcomes, each entry on its own.
	res := e.setVisibility(arn, 60, keep, "not-a-handle")
	if res[keep] != "" || res["not-a-handle"] != "InvalidArgumentException" {
		t.Fatalf("extend: %v", res)
	}
	if res := e.setVisibility(arn, 0, release); res[release] != "" {
		t.Fatalf("release: %v", res)
	}
	// Released: visible at once, with a new handle; the old one is dead.
	again := e.receive(arn, 10)
	if len(again) != 1 || aws.ToString(again[0].RecordId) != aws.ToString(got[1].RecordId) || aws.ToInt32(again[0].ReceiveCount) != 2 {
		t.Fatalf("after the release: %v", again)
	}
	if res := e.setVisibility(arn, 10, release); res[release] != "InvalidArgumentException" {
		t.Errorf("the released record's old handle: %v", res)
	}
	e.ack(arn, *again[0].ReceiptHandle)
	// Extended: 60 s from the call, not from the receive.
	e.clock.Advance(59 * time.Second)
	if got := e.receive(arn, 10); len(got) != 0 {
		t.Fatalf("59 s after extending by 60 s: %v", datas(got))
	}
	e.clock.Advance(time.Second)
	if back := e.receive(arn, 10); len(back) != 1 || aws.ToString(back[0].RecordId) != aws.ToString(got[0].RecordId) {
		t.Fatalf("60 s after extending: %v", datas(back))
	}

	entries := func(n int, sec int32, h string) []types.UpdateQueueRecordsVisibilityRequestEntry {
		out := make([]types.UpdateQueueRecordsVisibilityRequestEntry, n)
		for i := range out {
			out[i] = types.UpdateQueueRecordsVisibilityRequestEntry{ReceiptHandle: aws.String(h), VisibilityTimeoutSeconds: aws.Int32(sec)}
		}
		return out
	}
	for _, c := range []struct {
		entries []types.UpdateQueueRecordsVisibilityRequestEntry
		message string
	}{
		{entries(11, 1, "h"), "1 validation error detected: Value '[11 entries]' at 'entries' failed to satisfy constraint: Member must have length between 1 and 10"},
		{entries(0, 1, "h"), "Value '[0 entries]' at 'entries'"},
		{entries(1, 43201, "h"), "Value '43201' at 'entries.1.member.visibilityTimeoutSeconds' failed to satisfy constraint: Member must have value between 0 and 43200"},
		{entries(1, -1, "h"), "Value '-1' at 'entries.1.member.visibilityTimeoutSeconds'"},
		{entries(1, 1, strings.Repeat("h", 1025)), "at 'entries.1.member.receiptHandle' failed to satisfy constraint: Member must have length between 1 and 1024"},
		{entries(1, 1, ""), "Value '' at 'entries.1.member.receiptHandle'"},
	} {
		_, err := e.kc.UpdateQueueRecordsVisibility(e.ctx, &kinesis.UpdateQueueRecordsVisibilityInput{QueueARN: &arn, Entries: c.entries})
		wantAPIError(t, err, "ValidationException", "")
		if !strings.Contains(err.Error(), c.message) {
			t.Errorf("%v, want it to say %q", err, c.message)
		}
	}
	eleven := make([]types.AcknowledgeQueueRecordsRequestEntry, 11)
	for i := range eleven {
		eleven[i].ReceiptHandle = aws.String("h")
	}
	_, err := e.kc.AcknowledgeQueueRecords(e.ctx, &kinesis.AcknowledgeQueueRecordsInput{QueueARN: &arn, Entries: eleven})
	wantAPIError(t, err, "ValidationException", "1 validation error detected: Value '[11 entries]' at 'entries' failed to satisfy constraint: Member must have length between 1 and 10")
}

// TestDeadLetters: after MaxReceiveCount receives without an acknowledgement a record is a
// dead letter, read, extended, acknowledged or restored (ReceiveCount reset) on its own side.
func TestDeadLetters(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{MaxReceiveCount: 3, VisibilityTimeout: 10 * time.Second})
	e.putN("s", 2)
	cycle := func() []types.QueueRecord {
		got := e.receive(arn, 10)
		e.clock.Advance(10 * time.Second)
		return got
	}
	for i := 1; i <= 3; i++ {
		if got := cycle(); len(got) != 2 || aws.ToInt32(got[0].ReceiveCount) != int32(i) {
			t.Fatalf("receive %d: %v", i, got)
		}
	}
	if got := e.receive(arn, 10); len(got) != 0 {
		t.Fatalf("after 3 receives: %v, want nothing (dead letters)", got)
	}
	if st := e.stats(arn); st.DeadLettered != 2 || st.DeadVisible != 2 || st.Visible != 0 {
		t.Errorf("stats %+v", st)
	}
	dead := e.receiveDead(arn, 1)
	if len(dead) != 1 || aws.ToInt32(dead[0].ReceiveCount) != 4 {
		t.Fatalf("dead letter %v, want one with ReceiveCount 4", dead)
	}
	dh := *dead[0].ReceiptHandle
	// The normal operations refuse a dead letter's handle, and the other way round.
	if res := e.ack(arn, dh); res[dh] != "InvalidArgumentException" {
		t.Errorf("AcknowledgeQueueRecords with a dead letter's handle: %v", res)
	}
	vis, err := e.kc.UpdateDeadLetterQueueRecordsVisibility(e.ctx, &kinesis.UpdateDeadLetterQueueRecordsVisibilityInput{QueueARN: &arn,
		Entries: []types.UpdateDeadLetterQueueRecordsVisibilityRequestEntry{{ReceiptHandle: &dh, VisibilityTimeoutSeconds: aws.Int32(100)}}})
	if err != nil || len(vis.Successful) != 1 {
		t.Fatalf("UpdateDeadLetterQueueRecordsVisibility: %v %+v", err, vis)
	}
	e.clock.Advance(99 * time.Second)
	other := e.receiveDead(arn, 10)
	if len(other) != 1 || aws.ToString(other[0].RecordId) == aws.ToString(dead[0].RecordId) {
		t.Fatalf("the other dead letter: %v", other)
	}
	e.clock.Advance(time.Second)
	dead = e.receiveDead(arn, 10)
	if len(dead) != 1 || aws.ToInt32(dead[0].ReceiveCount) != 5 {
		t.Fatalf("the extended dead letter after 100 s: %v", dead)
	}
	restore, err := e.kc.RestoreDeadLetterQueueRecords(e.ctx, &kinesis.RestoreDeadLetterQueueRecordsInput{QueueARN: &arn,
		Entries: []types.RestoreDeadLetterQueueRecordsRequestEntry{{ReceiptHandle: dead[0].ReceiptHandle}, {ReceiptHandle: &dh}}})
	if err != nil || len(restore.Successful) != 1 || len(restore.Failed) != 1 || aws.ToString(restore.Failed[0].ErrorCode) != "InvalidArgumentException" {
		t.Fatalf("RestoreDeadLetterQueueRecords: %v %+v", err, restore)
	}
	back := e.receive(arn, 10)
	if len(back) != 1 || aws.ToString(back[0].RecordId) != aws.ToString(dead[0].RecordId) || aws.ToInt32(back[0].ReceiveCount) != 1 {
		t.Fatalf("restored record: %v, want it with ReceiveCount 1", back)
	}
	ackDead, err := e.kc.AcknowledgeDeadLetterQueueRecords(e.ctx, &kinesis.AcknowledgeDeadLetterQueueRecordsInput{QueueARN: &arn,
		Entries: []types.AcknowledgeDeadLetterQueueRecordsRequestEntry{{ReceiptHandle: other[0].ReceiptHandle}, {ReceiptHandle: back[0].ReceiptHandle}}})
	if err != nil || len(ackDead.Successful) != 1 || len(ackDead.Failed) != 1 {
		t.Fatalf("AcknowledgeDeadLetterQueueRecords: %v %+v", err, ackDead)
	}
	if st := e.stats(arn); st.DeadAcked != 1 || st.Restored != 1 || st.DeadVisible != 0 || st.DeadInFlight != 0 || st.InFlight != 1 {
		t.Errorf("stats %+v", st)
	}
	// The restored record may go through 3 more receives, then it is a dead letter again.
	e.clock.Advance(10 * time.Second)
	cycle()
	cycle()
	if got := e.receive(arn, 10); len(got) != 0 {
		t.Fatalf("restored record after 3 more receives: %v", got)
	}
	if got := e.receiveDead(arn, 10); len(got) != 1 {
		t.Fatalf("dead letters after the restored record's 3 receives: %v", got)
	}
}

func TestDeadLettersOff(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{NoDeadLetter: true, VisibilityTimeout: time.Second})
	e.put("s", "k", "v")
	for i := 1; i <= 10; i++ {
		got := e.receive(arn, 10)
		if len(got) != 1 || aws.ToInt32(got[0].ReceiveCount) != int32(i) {
			t.Fatalf("receive %d: %v", i, got)
		}
		e.clock.Advance(time.Second)
	}
	// Lowering MaxReceiveCount below a record's count makes it a dead letter when next met.
	if _, err := e.kc.UpdateQueue(e.ctx, &kinesis.UpdateQueueInput{QueueARN: &arn, QueueAttributes: &types.QueueAttributes{
		DeadLetterConfiguration: &types.DeadLetterConfiguration{TargetType: types.TargetTypeBuiltIn, MaxReceiveCount: aws.Int32(4)}}}); err != nil {
		t.Fatal(err)
	}
	if got := e.receive(arn, 10); len(got) != 0 {
		t.Fatalf("after MaxReceiveCount 4: %v", got)
	}
	if got := e.receiveDead(arn, 10); len(got) != 1 {
		t.Fatalf("dead letters: %v", got)
	}
}

// TestDeleteQueueInvalidatesHandles: deleting a queue ends its handles and delivery, not
// the stream's records or other queues.
func TestDeleteQueueInvalidatesHandles(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	other := e.queue("other", kinesistest.QueueConfig{})
	e.putN("s", 3)
	held := handles(e.receive(arn, 10))
	if _, err := e.kc.DeleteQueue(e.ctx, &kinesis.DeleteQueueInput{QueueARN: &arn}); err != nil {
		t.Fatal(err)
	}
	_, err := e.kc.AcknowledgeQueueRecords(e.ctx, &kinesis.AcknowledgeQueueRecordsInput{QueueARN: &arn,
		Entries: []types.AcknowledgeQueueRecordsRequestEntry{{ReceiptHandle: &held[0]}}})
	wantAPIError(t, err, "ResourceNotFoundException", "")
	// A queue created again under the name does not take the old handles.
	again := e.queue("q", kinesistest.QueueConfig{})
	if res := e.ack(again, held...); res[held[0]] != "InvalidArgumentException" {
		t.Errorf("old handles on the new queue: %v", res)
	}
	if got := e.drain(other); len(got) != 3 {
		t.Errorf("the other queue delivered %d records, want 3", len(got))
	}
	if recs, _ := e.srv.StreamRecords("s"); len(recs) != 3 {
		t.Errorf("stream holds %d records, want 3", len(recs))
	}
}

// TestQueueRecordsLeaveWithRetention: a record never acknowledged, in flight or a dead
// letter, leaves the queue when it leaves the stream's retention.
func TestQueueRecordsLeaveWithRetention(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{MaxReceiveCount: 1, VisibilityTimeout: time.Hour})
	e.put("s", "k", "old")
	e.put("s", "k", "dead")
	dead := e.receive(arn, 1)
	held := e.receive(arn, 1)
	e.clock.Advance(time.Hour) // "dead" and "old": both received once, now dead letters
	if st := e.stats(arn); st.DeadVisible != 2 {
		t.Fatalf("stats %+v", st)
	}
	held = e.receiveDead(arn, 1)
	e.clock.Advance(11 * time.Hour)
	e.put("s", "k", "young")
	e.clock.Advance(13 * time.Hour) // 25 h after the first two
	if got := e.receive(arn, 10); len(got) != 1 || string(got[0].Data) != "young" {
		t.Fatalf("after 25 h: %v, want [young]", datas(got))
	}
	if got := e.receiveDead(arn, 10); len(got) != 0 {
		t.Errorf("dead letters after 25 h: %v", datas(got))
	}
	if res := e.ack(arn, handles(dead)...); res[handles(dead)[0]] != "ResourceNotFoundException" {
		t.Errorf("ack of a record gone with retention: %v", res)
	}
	ack, err := e.kc.AcknowledgeDeadLetterQueueRecords(e.ctx, &kinesis.AcknowledgeDeadLetterQueueRecordsInput{QueueARN: &arn,
		Entries: []types.AcknowledgeDeadLetterQueueRecordsRequestEntry{{ReceiptHandle: held[0].ReceiptHandle}}})
	if err != nil || len(ack.Failed) != 1 || aws.ToString(ack.Failed[0].ErrorCode) != "ResourceNotFoundException" {
		t.Errorf("dead-letter ack of a record gone with retention: %v %+v", err, ack)
	}
	if st := e.stats(arn); st.Trimmed != 2 || st.DeadVisible != 0 || st.DeadInFlight != 0 || st.InFlight != 1 {
		t.Errorf("stats %+v", st)
	}
	// A longer retention does not bring them back.
	if _, err := e.kc.IncreaseStreamRetentionPeriod(e.ctx, &kinesis.IncreaseStreamRetentionPeriodInput{StreamName: aws.String("s"), RetentionPeriodHours: aws.Int32(48)}); err != nil {
		t.Fatal(err)
	}
	if recs, _ := e.srv.QueueRecords(arn); len(recs) != 1 || string(recs[0].Data) != "young" {
		t.Errorf("QueueRecords after the increase: %+v", recs)
	}
}

func TestInFlightLimit(t *testing.T) {
	e := newQueueEnv(t, kinesistest.WithQueueInFlightLimit(25))
	arn := e.queue("q", kinesistest.QueueConfig{})
	e.putN("s", 30)
	var got []types.QueueRecord
	for _, want := range []int{10, 10, 5} {
		recs := e.receive(arn, 10)
		if len(recs) != want {
			t.Fatalf("receive: %d records, want %d", len(recs), want)
		}
		got = append(got, recs...)
	}
	_, err := e.receiveErr(arn, 10)
	wantAPIError(t, err, "LimitExceededException", "Queue q under account 123456789012 has 25 records in flight, the maximum; acknowledge records or change their visibility before receiving more.")
	wantErrorType[*types.LimitExceededException](t, err)
	e.ack(arn, *got[0].ReceiptHandle)
	if recs := e.receive(arn, 10); len(recs) != 1 {
		t.Errorf("after one ack: %d records, want 1", len(recs))
	}
}

// TestInFlightLimitDefault reaches the service's 120,000 records in flight over HTTP.
func TestInFlightLimitDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("puts and receives 120,000 records")
	}
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	e.putN("s", 120_005)
	const workers = 4
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for range 120_000 / 10 / workers {
				recs, err := e.receiveErr(arn, 10)
				if err != nil || len(recs) != 10 {
					errs <- err
					return
				}
			}
			errs <- nil
			_ = w
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.receiveErr(arn, 10)
	wantAPIError(t, err, "LimitExceededException", "")
	if st := e.stats(arn); st.InFlight != 120_000 || st.Visible != 5 {
		t.Errorf("stats %+v", st)
	}
}

// TestKPLAggregateDeliveredWhole: a KPL aggregate is one stream record, so one queue record
// with one RecordId carrying the aggregate's bytes unchanged.
func TestKPLAggregateDeliveredWhole(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	agg := kpl.NewAggregator(1<<20, 100)
	for i := range 3 {
		if err := agg.Add(kpl.UserRecord{PartitionKey: "user" + strconv.Itoa(i), Data: []byte("u" + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := agg.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: &rec.PartitionKey,
		ExplicitHashKey: &rec.ExplicitHashKey, Data: rec.Data}); err != nil {
		t.Fatal(err)
	}
	got := e.receive(arn, 10)
	if len(got) != 1 || string(got[0].Data) != string(rec.Data) || aws.ToString(got[0].PartitionKey) != rec.PartitionKey {
		t.Fatalf("received %d records, want the aggregate whole", len(got))
	}
	users, aggregated, err := kpl.Deaggregate(got[0].Data)
	if err != nil || !aggregated || len(users) != 3 {
		t.Errorf("Deaggregate: %d records, aggregated %v, %v", len(users), aggregated, err)
	}
}

// TestKeylessRecordsHaveNoPartitionKey: records of an AUTO stream written without a key
// come without PartitionKey.
func TestKeylessRecordsHaveNoPartitionKey(t *testing.T) {
	e := newEnv(t)
	if err := e.srv.CreateOnDemandStream("auto", 2, types.RecordDistributionStrategyAuto); err != nil {
		t.Fatal(err)
	}
	arn, err := e.srv.CreateQueue("q", "auto", kinesistest.QueueConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("auto"), Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if got := e.receive(arn, 10); len(got) != 1 || got[0].PartitionKey != nil {
		t.Errorf("keyless record: %+v", got)
	}
}
