package kinesistest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/fxamacker/cbor/v2"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func TestCreateQueueDefaults(t *testing.T) {
	e := newQueueEnv(t)
	d := e.createQueue("orders", "s")
	arn := aws.ToString(d.QueueARN)
	if !strings.HasPrefix(arn, "arn:aws:kinesis:us-east-1:123456789012:queue/") || strings.Contains(arn, "orders") {
		t.Errorf("QueueARN %s: want arn:aws:kinesis:us-east-1:123456789012:queue/<opaque id, not the name>", arn)
	}
	check := func(d *types.QueueDescription) {
		t.Helper()
		if aws.ToString(d.QueueName) != "orders" || d.QueueStatus != types.QueueStatusActive || !d.QueueCreationTimestamp.Equal(t0) {
			t.Errorf("description %s %s %v", aws.ToString(d.QueueName), d.QueueStatus, d.QueueCreationTimestamp)
		}
		if len(d.StreamConfigurationList) != 1 {
			t.Fatalf("StreamConfigurationList %+v, want one entry", d.StreamConfigurationList)
		}
		c := d.StreamConfigurationList[0]
		if aws.ToString(c.StreamARN) != e.srv.StreamARN("s") || c.StartingPosition.Type != types.QueueStartingPositionTypeLatest ||
			c.StartingPosition.Timestamp == nil || !c.StartingPosition.Timestamp.Equal(t0) {
			t.Errorf("stream configuration %s %+v, want s from LATEST at %v", aws.ToString(c.StreamARN), c.StartingPosition, t0)
		}
		a := d.QueueAttributes
		if aws.ToInt32(a.VisibilityTimeoutSeconds) != 30 || a.DeadLetterConfiguration.TargetType != types.TargetTypeBuiltIn ||
			aws.ToInt32(a.DeadLetterConfiguration.MaxReceiveCount) != 6 {
			t.Errorf("attributes visibility %d, dead letters %s after %d; want 30, BUILT_IN after 6",
				aws.ToInt32(a.VisibilityTimeoutSeconds), a.DeadLetterConfiguration.TargetType, aws.ToInt32(a.DeadLetterConfiguration.MaxReceiveCount))
		}
	}
	check(d)
	desc, err := e.kc.DescribeQueue(e.ctx, &kinesis.DescribeQueueInput{QueueARN: d.QueueARN})
	if err != nil {
		t.Fatal(err)
	}
	check(desc.QueueDescription)
	if got, err := e.srv.QueueARN("orders"); err != nil || got != arn {
		t.Errorf("QueueARN(orders) = %s, %v; want %s", got, err, arn)
	}

	// A queue counts in QueueCount, not in ConsumerCount.
	if _, err := e.srv.RegisterConsumer("s", "efo"); err != nil {
		t.Fatal(err)
	}
	sum, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	if err != nil {
		t.Fatal(err)
	}
	if got := sum.StreamDescriptionSummary; aws.ToInt32(got.QueueCount) != 1 || aws.ToInt32(got.ConsumerCount) != 1 {
		t.Errorf("QueueCount %d, ConsumerCount %d; want 1 and 1", aws.ToInt32(got.QueueCount), aws.ToInt32(got.ConsumerCount))
	}
}

func TestCreateQueueStartingPositions(t *testing.T) {
	e := newQueueEnv(t)
	e.put("s", "a", "at-0")
	e.clock.Advance(time.Minute)
	e.put("s", "b", "at-1m")
	e.clock.Advance(time.Minute)
	e.put("s", "c", "at-2m")

	trim := e.createQueue("trim", "s", startAt(types.QueueStartingPositionTypeTrimHorizon))
	at := e.createQueue("at", "s", func(in *kinesis.CreateQueueInput) {
		in.StreamConfigurationList[0].StartingPosition = &types.QueueStartingPosition{
			Type: types.QueueStartingPositionTypeAtTimestamp, Timestamp: aws.Time(t0.Add(time.Minute)),
		}
	})
	early := e.createQueue("early", "s", func(in *kinesis.CreateQueueInput) {
		in.StreamConfigurationList[0].StartingPosition = &types.QueueStartingPosition{
			Type: types.QueueStartingPositionTypeAtTimestamp, Timestamp: aws.Time(t0.Add(-48 * time.Hour)),
		}
	})
	latest := e.createQueue("latest", "s")
	for _, c := range []struct {
		d         *types.QueueDescription
		wantStart time.Time
		want      []string
	}{
		{trim, t0, []string{"at-0", "at-1m", "at-2m"}},
		{at, t0.Add(time.Minute), []string{"at-1m", "at-2m"}},
		// Before the stream existed: the earliest time it can be read from.
		{early, t0, []string{"at-0", "at-1m", "at-2m"}},
		{latest, t0.Add(2 * time.Minute), nil},
	} {
		name := aws.ToString(c.d.QueueName)
		if ts := c.d.StreamConfigurationList[0].StartingPosition.Timestamp; ts == nil || !ts.Equal(c.wantStart) {
			t.Errorf("%s: starting timestamp %v, want %v", name, ts, c.wantStart)
		}
		if got := datas(e.drain(aws.ToString(c.d.QueueARN))); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s delivered %v, want %v", name, got, c.want)
		}
	}
	e.put("s", "d", "later")
	for _, d := range []*types.QueueDescription{trim, at, early, latest} {
		if got := datas(e.drain(aws.ToString(d.QueueARN))); len(got) != 1 || got[0] != "later" {
			t.Errorf("%s: after a put delivered %v, want [later]", aws.ToString(d.QueueName), got)
		}
	}
}

// TestQueueLifecycleStates follows a queue through CREATING, ACTIVE, UPDATING and
// DELETING with a transition delay, and what each state refuses.
func TestQueueLifecycleStates(t *testing.T) {
	e := newQueueEnv(t, kinesistest.WithQueueTransitionDelay(10*time.Second))
	d := e.createQueue("q", "s")
	arn := aws.ToString(d.QueueARN)
	if d.QueueStatus != types.QueueStatusCreating || d.StreamConfigurationList[0].StartingPosition.Timestamp != nil {
		t.Errorf("new queue %s with starting timestamp %v; want CREATING without one (LATEST not yet resolved)",
			d.QueueStatus, d.StreamConfigurationList[0].StartingPosition.Timestamp)
	}
	at := e.createQueue("at", "s", func(in *kinesis.CreateQueueInput) {
		in.StreamConfigurationList[0].StartingPosition = &types.QueueStartingPosition{Type: types.QueueStartingPositionTypeAtTimestamp, Timestamp: aws.Time(t0.Add(time.Hour))}
	})
	if ts := at.StreamConfigurationList[0].StartingPosition.Timestamp; ts == nil || !ts.Equal(t0.Add(time.Hour)) {
		t.Errorf("CREATING AT_TIMESTAMP queue reports %v, want the timestamp given", ts)
	}
	msg := "Queue q under account 123456789012 is not ACTIVE, instead in state CREATING."
	_, err := e.receiveErr(arn, 10)
	wantAPIError(t, err, "ResourceInUseException", msg)
	_, err = e.kc.UpdateQueue(e.ctx, &kinesis.UpdateQueueInput{QueueARN: &arn, QueueAttributes: &types.QueueAttributes{VisibilityTimeoutSeconds: aws.Int32(5)}})
	wantAPIError(t, err, "ResourceInUseException", msg)
	_, err = e.kc.DeleteQueue(e.ctx, &kinesis.DeleteQueueInput{QueueARN: &arn})
	wantAPIError(t, err, "ResourceInUseException", msg)
	_, err = e.kc.AcknowledgeQueueRecords(e.ctx, &kinesis.AcknowledgeQueueRecordsInput{QueueARN: &arn,
		Entries: []types.AcknowledgeQueueRecordsRequestEntry{{ReceiptHandle: aws.String("h")}}})
	wantAPIError(t, err, "ResourceInUseException", msg)
	// Records put while CREATING are delivered once ACTIVE (LATEST is the creation time).
	e.put("s", "k", "early")

	e.clock.Advance(10 * time.Second)
	desc, err := e.kc.DescribeQueue(e.ctx, &kinesis.DescribeQueueInput{QueueARN: &arn})
	if err != nil {
		t.Fatal(err)
	}
	if desc.QueueDescription.QueueStatus != types.QueueStatusActive || !aws.ToTime(desc.QueueDescription.StreamConfigurationList[0].StartingPosition.Timestamp).Equal(t0) {
		t.Errorf("after the delay: %s, starting at %v; want ACTIVE from %v", desc.QueueDescription.QueueStatus,
			desc.QueueDescription.StreamConfigurationList[0].StartingPosition.Timestamp, t0)
	}

	// UPDATING: the answer shows the new attributes, receives go on with the old ones.
	up, err := e.kc.UpdateQueue(e.ctx, &kinesis.UpdateQueueInput{QueueARN: &arn, QueueAttributes: &types.QueueAttributes{VisibilityTimeoutSeconds: aws.Int32(5)}})
	if err != nil {
		t.Fatal(err)
	}
	if up.QueueDescription.QueueStatus != types.QueueStatusUpdating || aws.ToInt32(up.QueueDescription.QueueAttributes.VisibilityTimeoutSeconds) != 5 ||
		aws.ToInt32(up.QueueDescription.QueueAttributes.DeadLetterConfiguration.MaxReceiveCount) != 6 {
		t.Errorf("UpdateQueue answered %s with visibility %d, max receives %d; want UPDATING, 5, 6 (unchanged)", up.QueueDescription.QueueStatus,
			aws.ToInt32(up.QueueDescription.QueueAttributes.VisibilityTimeoutSeconds), aws.ToInt32(up.QueueDescription.QueueAttributes.DeadLetterConfiguration.MaxReceiveCount))
	}
	_, err = e.kc.UpdateQueue(e.ctx, &kinesis.UpdateQueueInput{QueueARN: &arn, QueueAttributes: &types.QueueAttributes{VisibilityTimeoutSeconds: aws.Int32(7)}})
	wantAPIError(t, err, "ResourceInUseException", "Queue q under account 123456789012 is not ACTIVE, instead in state UPDATING.")
	got := e.receive(arn, 10)
	if len(got) != 1 || string(got[0].Data) != "early" {
		t.Fatalf("receive while UPDATING: %v", datas(got))
	}
	recs, _ := e.srv.QueueRecords(arn)
	if want := e.clock.Now().Add(30 * time.Second); len(recs) != 1 || !recs[0].VisibleAt.Equal(want) {
		t.Errorf("record received while UPDATING visible again at %v, want %v (the old 30 s)", recs[0].VisibleAt, want)
	}
	e.clock.Advance(10 * time.Second)
	e.put("s", "k", "after-update")
	if got := e.receive(arn, 10); len(got) != 1 || string(got[0].Data) != "after-update" {
		t.Fatalf("receive after the update: %v", datas(got))
	}
	recs, _ = e.srv.QueueRecords(arn)
	if want := e.clock.Now().Add(5 * time.Second); !recs[1].VisibleAt.Equal(want) {
		t.Errorf("record received after the update visible again at %v, want %v (the new 5 s)", recs[1].VisibleAt, want)
	}
	held := handles(got)

	// DELETING: listed, receives refused, handles invalid; then gone.
	if _, err := e.kc.DeleteQueue(e.ctx, &kinesis.DeleteQueueInput{QueueARN: &arn}); err != nil {
		t.Fatal(err)
	}
	_, err = e.kc.DeleteQueue(e.ctx, &kinesis.DeleteQueueInput{QueueARN: &arn})
	wantAPIError(t, err, "ResourceInUseException", "Queue q under account 123456789012 is not ACTIVE, instead in state DELETING.")
	_, err = e.receiveErr(arn, 10)
	wantAPIError(t, err, "ResourceInUseException", "Queue q under account 123456789012 is not ACTIVE, instead in state DELETING.")
	if res := e.ack(arn, held...); res[held[0]] != "InvalidArgumentException" {
		t.Errorf("ack while DELETING: %v, want InvalidArgumentException", res)
	}
	list, err := e.kc.ListQueues(e.ctx, &kinesis.ListQueuesInput{})
	if err != nil || len(list.QueueSummaries) != 2 || list.QueueSummaries[0].QueueStatus != types.QueueStatusDeleting {
		t.Fatalf("ListQueues while DELETING: %v %+v", err, list)
	}
	e.clock.Advance(10 * time.Second)
	_, err = e.kc.DescribeQueue(e.ctx, &kinesis.DescribeQueueInput{QueueARN: &arn})
	wantAPIError(t, err, "ResourceNotFoundException", "Queue "+arn+" under account 123456789012 not found.")
	_, err = e.kc.AcknowledgeQueueRecords(e.ctx, &kinesis.AcknowledgeQueueRecordsInput{QueueARN: &arn,
		Entries: []types.AcknowledgeQueueRecordsRequestEntry{{ReceiptHandle: &held[0]}}})
	wantAPIError(t, err, "ResourceNotFoundException", "")
	// The name is free again, for a queue with another ARN.
	again := e.createQueue("q", "s")
	if aws.ToString(again.QueueARN) == arn {
		t.Errorf("a queue created again under the same name got the same ARN %s", arn)
	}
	// The stream's records are untouched.
	if recs, _ := e.srv.StreamRecords("s"); len(recs) != 2 {
		t.Errorf("stream holds %d records after the queue's deletion, want 2", len(recs))
	}
}

func TestQueueTransitionLimit(t *testing.T) {
	e := newQueueEnv(t, kinesistest.WithQueueTransitionDelay(time.Second))
	for i := range 5 {
		e.createQueue("q"+strconv.Itoa(i), "s")
	}
	_, err := e.kc.CreateQueue(e.ctx, &kinesis.CreateQueueInput{QueueName: aws.String("q5"),
		StreamConfigurationList: []types.QueueStreamConfiguration{{StreamARN: aws.String(e.srv.StreamARN("s"))}}})
	wantAPIError(t, err, "LimitExceededException", "Account 123456789012 already has 5 queues in CREATING or DELETING status, the maximum.")
	wantErrorType[*types.LimitExceededException](t, err)
	e.clock.Advance(time.Second)
	e.createQueue("q5", "s")
}

func TestCreateQueueErrors(t *testing.T) {
	e := newQueueEnv(t, kinesistest.WithTransitionDelay(time.Minute))
	if err := e.srv.CreateStream("prov", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("young"),
		StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand}}); err != nil {
		t.Fatal(err)
	}
	e.createQueue("taken", "s")
	stream := func(name string) func(*kinesis.CreateQueueInput) {
		return func(in *kinesis.CreateQueueInput) {
			in.StreamConfigurationList[0].StreamARN = aws.String(e.srv.StreamARN(name))
		}
	}
	attrs := func(a types.QueueAttributes) func(*kinesis.CreateQueueInput) {
		return func(in *kinesis.CreateQueueInput) { in.QueueAttributes = &a }
	}
	dl := func(typ types.TargetType, n *int32) func(*kinesis.CreateQueueInput) {
		return attrs(types.QueueAttributes{DeadLetterConfiguration: &types.DeadLetterConfiguration{TargetType: typ, MaxReceiveCount: n}})
	}
	start := func(typ types.QueueStartingPositionType, ts *time.Time) func(*kinesis.CreateQueueInput) {
		return func(in *kinesis.CreateQueueInput) {
			in.StreamConfigurationList[0].StartingPosition = &types.QueueStartingPosition{Type: typ, Timestamp: ts}
		}
	}
	tags := map[string]string{}
	for i := range 51 {
		tags["t"+strconv.Itoa(i)] = "v"
	}
	for _, c := range []struct {
		name    string
		queue   string
		mutate  func(*kinesis.CreateQueueInput)
		code    string
		message string
	}{
		{"long name", strings.Repeat("n", 129), nil, "ValidationException", "at 'queueName' failed to satisfy constraint: Member must have length between 1 and 128"},
		{"bad name", "a b", nil, "ValidationException", "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+"},
		{"no stream configuration", "q", func(in *kinesis.CreateQueueInput) { in.StreamConfigurationList = []types.QueueStreamConfiguration{} },
			"ValidationException", "at 'streamConfigurationList' failed to satisfy constraint: Member must have length between 1 and 1"},
		{"two streams", "q", func(in *kinesis.CreateQueueInput) {
			in.StreamConfigurationList = append(in.StreamConfigurationList, in.StreamConfigurationList[0])
		}, "ValidationException", "Member must have length between 1 and 1"},
		{"bad stream ARN", "q", func(in *kinesis.CreateQueueInput) {
			in.StreamConfigurationList[0].StreamARN = aws.String("arn:aws:kinesis:us-east-1:1:stream/s")
		},
			"ValidationException", "at 'streamConfigurationList.1.member.streamARN'"},
		{"bad starting type", "q", start("EARLIEST", nil), "ValidationException", "satisfy enum value set: [TRIM_HORIZON, LATEST, AT_TIMESTAMP]"},
		{"AT_TIMESTAMP without timestamp", "q", start(types.QueueStartingPositionTypeAtTimestamp, nil), "ValidationException",
			"StartingPosition Timestamp is required when its Type is AT_TIMESTAMP."},
		{"LATEST with timestamp", "q", start(types.QueueStartingPositionTypeLatest, aws.Time(t0)), "ValidationException",
			"StartingPosition Timestamp can only be specified when its Type is AT_TIMESTAMP, not LATEST."},
		{"visibility -1", "q", attrs(types.QueueAttributes{VisibilityTimeoutSeconds: aws.Int32(-1)}), "ValidationException",
			"Value '-1' at 'queueAttributes.visibilityTimeoutSeconds' failed to satisfy constraint: Member must have value between 0 and 43200"},
		{"visibility 43201", "q", attrs(types.QueueAttributes{VisibilityTimeoutSeconds: aws.Int32(43201)}), "ValidationException", "Value '43201'"},
		{"max receives 0", "q", dl(types.TargetTypeBuiltIn, aws.Int32(0)), "ValidationException",
			"at 'queueAttributes.deadLetterConfiguration.maxReceiveCount' failed to satisfy constraint: Member must have value between 1 and 1000"},
		{"max receives 1001", "q", dl(types.TargetTypeBuiltIn, aws.Int32(1001)), "ValidationException", "Value '1001'"},
		{"BUILT_IN without max receives", "q", dl(types.TargetTypeBuiltIn, nil), "ValidationException",
			"MaxReceiveCount is required when the DeadLetterConfiguration's TargetType is BUILT_IN."},
		{"NONE with max receives", "q", dl(types.TargetTypeNone, aws.Int32(3)), "ValidationException",
			"MaxReceiveCount can only be specified when the DeadLetterConfiguration's TargetType is BUILT_IN."},
		{"bad target type", "q", dl("S3", aws.Int32(3)), "ValidationException", "satisfy enum value set: [BUILT_IN, NONE]"},
		{"51 tags", "q", func(in *kinesis.CreateQueueInput) { in.Tags = tags }, "ValidationException", "at 'tags'"},
		{"missing stream", "q", stream("nope"), "ResourceNotFoundException", "Stream nope under account 123456789012 not found."},
		{"provisioned stream", "q", stream("prov"), "ValidationException",
			"Queues are not supported for stream prov under account 123456789012 because it is in PROVISIONED capacity mode; queues need ON_DEMAND."},
		{"stream CREATING", "q", stream("young"), "ResourceInUseException", "Stream young under account 123456789012 not ACTIVE, instead in state CREATING"},
		{"name taken", "taken", nil, "ResourceInUseException", "Queue taken under account 123456789012 already exists."},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := &kinesis.CreateQueueInput{QueueName: aws.String(c.queue),
				StreamConfigurationList: []types.QueueStreamConfiguration{{StreamARN: aws.String(e.srv.StreamARN("s"))}}}
			if c.mutate != nil {
				c.mutate(in)
			}
			_, err := e.kc.CreateQueue(e.ctx, in)
			wantAPIError(t, err, c.code, "")
			if !strings.Contains(err.Error(), c.message) {
				t.Errorf("error %v, want it to say %q", err, c.message)
			}
		})
	}
}

// TestQueueRequiredMembers sends each queue operation an empty JSON object, as
// clients without the SDK's own checks would: every required member is named.
func TestQueueRequiredMembers(t *testing.T) {
	e := newQueueEnv(t)
	for op, want := range map[string]string{
		"CreateQueue":                            "Value null at 'queueName'",
		"UpdateQueue":                            "Value null at 'queueARN'",
		"DeleteQueue":                            "Value null at 'queueARN'",
		"DescribeQueue":                          "Value null at 'queueARN'",
		"ReceiveQueueRecords":                    "Value null at 'queueARN'",
		"AcknowledgeQueueRecords":                "Value null at 'entries'",
		"UpdateQueueRecordsVisibility":           "Value null at 'entries'",
		"ReceiveDeadLetterQueueRecords":          "Value null at 'queueARN'",
		"AcknowledgeDeadLetterQueueRecords":      "Value null at 'entries'",
		"UpdateDeadLetterQueueRecordsVisibility": "Value null at 'entries'",
		"RestoreDeadLetterQueueRecords":          "Value null at 'entries'",
	} {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL(), strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "Kinesis_20131202."+op)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var eb struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(body, &eb); err != nil || resp.StatusCode != 400 || eb.Type != "ValidationException" || !strings.Contains(eb.Message, want) {
			t.Errorf("%s {}: %d %s, want 400 ValidationException saying %q", op, resp.StatusCode, body, want)
		}
	}
	// ListQueues takes no required member.
	if _, err := e.kc.ListQueues(e.ctx, &kinesis.ListQueuesInput{}); err != nil {
		t.Errorf("ListQueues {}: %v", err)
	}
}

func TestQueueARNErrors(t *testing.T) {
	e := newQueueEnv(t)
	real := e.queue("q", kinesistest.QueueConfig{})
	for _, c := range []struct{ arn, code, message string }{
		{"arn:aws:kinesis:us-east-1:123456789012:stream/s", "ValidationException", `at 'queueARN' failed to satisfy constraint: Member must satisfy regular expression pattern: arn:aws.*:kinesis:.*:\d{12}:queue/\S+`},
		{"nonsense", "ValidationException", "at 'queueARN'"},
		{"arn:aws:kinesis:us-east-1:123456789012:queue/qnothere", "ResourceNotFoundException", "Queue arn:aws:kinesis:us-east-1:123456789012:queue/qnothere under account 123456789012 not found."},
		{strings.Replace(real, "123456789012", "210987654321", 1), "ResourceNotFoundException", "not found"},
	} {
		_, err := e.kc.DescribeQueue(e.ctx, &kinesis.DescribeQueueInput{QueueARN: aws.String(c.arn)})
		wantAPIError(t, err, c.code, "")
		if !strings.Contains(err.Error(), c.message) {
			t.Errorf("DescribeQueue(%s): %v, want it to say %q", c.arn, err, c.message)
		}
		_, err = e.receiveErr(c.arn, 10)
		wantAPIError(t, err, c.code, "")
	}
	// Any region reaches the one namespace, as for streams; answers carry the caller's region.
	west := e.srv.Client(func(o *kinesis.Options) { o.Region = "eu-west-1"; o.RetryMaxAttempts = 1 })
	d, err := west.DescribeQueue(e.ctx, &kinesis.DescribeQueueInput{QueueARN: aws.String(strings.Replace(real, "us-east-1", "eu-west-1", 1))})
	if err != nil || !strings.HasPrefix(aws.ToString(d.QueueDescription.QueueARN), "arn:aws:kinesis:eu-west-1:") ||
		!strings.HasPrefix(aws.ToString(d.QueueDescription.StreamConfigurationList[0].StreamARN), "arn:aws:kinesis:eu-west-1:") {
		t.Errorf("DescribeQueue from eu-west-1: %v %+v", err, d)
	}
}

func TestUpdateQueueErrors(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	for _, c := range []struct {
		attrs   *types.QueueAttributes
		message string
	}{
		{&types.QueueAttributes{VisibilityTimeoutSeconds: aws.Int32(43201)}, "Member must have value between 0 and 43200"},
		{&types.QueueAttributes{DeadLetterConfiguration: &types.DeadLetterConfiguration{TargetType: types.TargetTypeBuiltIn}}, "MaxReceiveCount is required"},
		{&types.QueueAttributes{DeadLetterConfiguration: &types.DeadLetterConfiguration{TargetType: types.TargetTypeNone, MaxReceiveCount: aws.Int32(2)}}, "MaxReceiveCount can only be specified"},
	} {
		_, err := e.kc.UpdateQueue(e.ctx, &kinesis.UpdateQueueInput{QueueARN: &arn, QueueAttributes: c.attrs})
		wantAPIError(t, err, "ValidationException", "")
		if !strings.Contains(err.Error(), c.message) {
			t.Errorf("UpdateQueue: %v, want it to say %q", err, c.message)
		}
	}
	// Attributes left out stay as they were.
	out, err := e.kc.UpdateQueue(e.ctx, &kinesis.UpdateQueueInput{QueueARN: &arn, QueueAttributes: &types.QueueAttributes{
		DeadLetterConfiguration: &types.DeadLetterConfiguration{TargetType: types.TargetTypeNone}}})
	if err != nil {
		t.Fatal(err)
	}
	if a := out.QueueDescription.QueueAttributes; aws.ToInt32(a.VisibilityTimeoutSeconds) != 30 || a.DeadLetterConfiguration.TargetType != types.TargetTypeNone ||
		a.DeadLetterConfiguration.MaxReceiveCount != nil {
		t.Errorf("after turning dead letters off: visibility %d, %s, max %v", aws.ToInt32(a.VisibilityTimeoutSeconds), a.DeadLetterConfiguration.TargetType, a.DeadLetterConfiguration.MaxReceiveCount)
	}
}

// TestQueuesShareConsumerSlots: a queue takes one of the stream's 20 registered-consumer
// slots (50 under the On-demand Advantage commitment), shared with enhanced fan-out.
func TestQueuesShareConsumerSlots(t *testing.T) {
	e := newQueueEnv(t)
	for i := range 18 {
		if _, err := e.srv.RegisterConsumer("s", "c"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	e.createQueue("q0", "s")
	q1 := e.createQueue("q1", "s")
	full := "Stream s under account 123456789012 already has 20 registered consumers and queues, the maximum."
	_, err := e.kc.CreateQueue(e.ctx, &kinesis.CreateQueueInput{QueueName: aws.String("q2"),
		StreamConfigurationList: []types.QueueStreamConfiguration{{StreamARN: aws.String(e.srv.StreamARN("s"))}}})
	wantAPIError(t, err, "LimitExceededException", full)
	_, err = e.kc.RegisterStreamConsumer(e.ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(e.srv.StreamARN("s")), ConsumerName: aws.String("c18")})
	wantAPIError(t, err, "LimitExceededException", "Stream s under account 123456789012 already has 20 consumers, the maximum.")

	if _, err := e.kc.DeleteQueue(e.ctx, &kinesis.DeleteQueueInput{QueueARN: q1.QueueARN}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.RegisterConsumer("s", "c18"); err != nil {
		t.Errorf("a consumer in the slot the deleted queue freed: %v", err)
	}

	// Under the commitment the stream takes 50.
	if _, err := e.kc.UpdateAccountSettings(e.ctx, &kinesis.UpdateAccountSettingsInput{
		MinimumThroughputBillingCommitment: &types.MinimumThroughputBillingCommitmentInput{Status: types.MinimumThroughputBillingCommitmentInputStatusEnabled},
	}); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 50; i++ {
		e.createQueue("more"+strconv.Itoa(i), "s")
	}
	_, err = e.kc.CreateQueue(e.ctx, &kinesis.CreateQueueInput{QueueName: aws.String("q50"),
		StreamConfigurationList: []types.QueueStreamConfiguration{{StreamARN: aws.String(e.srv.StreamARN("s"))}}})
	wantAPIError(t, err, "LimitExceededException", "Stream s under account 123456789012 already has 50 registered consumers and queues, the maximum.")
	sum, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	if err != nil {
		t.Fatal(err)
	}
	if s := sum.StreamDescriptionSummary; aws.ToInt32(s.QueueCount) != 31 || aws.ToInt32(s.ConsumerCount) != 19 {
		t.Errorf("QueueCount %d, ConsumerCount %d; want 31 and 19", aws.ToInt32(s.QueueCount), aws.ToInt32(s.ConsumerCount))
	}
}

// TestStreamWithQueues: a stream with queues can be neither deleted (whatever
// EnforceConsumerDeletion says) nor switched to PROVISIONED.
func TestStreamWithQueues(t *testing.T) {
	e := newQueueEnv(t)
	d := e.createQueue("q", "s")
	_, err := e.kc.DeleteStream(e.ctx, &kinesis.DeleteStreamInput{StreamName: aws.String("s"), EnforceConsumerDeletion: aws.Bool(true)})
	wantAPIError(t, err, "ResourceInUseException", "Stream s under account 123456789012 has 1 queues; delete them with DeleteQueue before you delete the stream.")
	toProvisioned := &kinesis.UpdateStreamModeInput{StreamARN: aws.String(e.srv.StreamARN("s")),
		StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeProvisioned}}
	_, err = e.kc.UpdateStreamMode(e.ctx, toProvisioned)
	wantAPIError(t, err, "ResourceInUseException", "Stream s under account 123456789012 has 1 queues; delete them with DeleteQueue before you switch the stream to PROVISIONED.")

	if _, err := e.kc.DeleteQueue(e.ctx, &kinesis.DeleteQueueInput{QueueARN: d.QueueARN}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kc.UpdateStreamMode(e.ctx, toProvisioned); err != nil {
		t.Fatalf("UpdateStreamMode without queues: %v", err)
	}
	_, err = e.kc.CreateQueue(e.ctx, &kinesis.CreateQueueInput{QueueName: aws.String("q2"),
		StreamConfigurationList: []types.QueueStreamConfiguration{{StreamARN: aws.String(e.srv.StreamARN("s"))}}})
	wantAPIError(t, err, "ValidationException", "")
	if _, err := e.kc.DeleteStream(e.ctx, &kinesis.DeleteStreamInput{StreamName: aws.String("s")}); err != nil {
		t.Fatalf("DeleteStream without queues: %v", err)
	}
}

func TestUpdateStreamMode(t *testing.T) {
	e := newEnv(t)
	e.createStream("p", 2)
	mode := func(m types.StreamMode) *kinesis.UpdateStreamModeInput {
		return &kinesis.UpdateStreamModeInput{StreamARN: aws.String(e.srv.StreamARN("p")), StreamModeDetails: &types.StreamModeDetails{StreamMode: m}}
	}
	_, err := e.kc.UpdateStreamMode(e.ctx, mode(types.StreamModeProvisioned))
	wantAPIError(t, err, "InvalidArgumentException", "Stream p under account 123456789012 is already in PROVISIONED capacity mode.")
	if _, err := e.kc.UpdateStreamMode(e.ctx, mode(types.StreamModeOnDemand)); err != nil {
		t.Fatal(err)
	}
	sum, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("p")})
	if err != nil || sum.StreamDescriptionSummary.StreamModeDetails.StreamMode != types.StreamModeOnDemand || aws.ToInt32(sum.StreamDescriptionSummary.OpenShardCount) != 2 {
		t.Fatalf("after the switch: %v %+v", err, sum)
	}
	// An ON_DEMAND stream takes queues now.
	e.createQueue("q", "p")
	_, err = e.kc.UpdateStreamMode(e.ctx, &kinesis.UpdateStreamModeInput{StreamARN: aws.String(e.srv.StreamARN("p")), StreamModeDetails: &types.StreamModeDetails{StreamMode: "FAST"}})
	wantAPIError(t, err, "ValidationException", "")

	if err := e.srv.CreateOnDemandStream("auto", 1, types.RecordDistributionStrategyAuto); err != nil {
		t.Fatal(err)
	}
	_, err = e.kc.UpdateStreamMode(e.ctx, &kinesis.UpdateStreamModeInput{StreamARN: aws.String(e.srv.StreamARN("auto")),
		StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeProvisioned}})
	wantAPIError(t, err, "InvalidArgumentException", "")
}

func TestListQueuesPaginatorAndFilter(t *testing.T) {
	e := newQueueEnv(t)
	if err := e.srv.CreateOnDemandStream("t", 1, ""); err != nil {
		t.Fatal(err)
	}
	var onS []string
	for i := range 5 {
		name := "s" + strconv.Itoa(i)
		e.createQueue(name, "s")
		onS = append(onS, name)
		e.createQueue("t"+strconv.Itoa(i), "t")
	}
	list := func(in *kinesis.ListQueuesInput) ([]string, int) {
		t.Helper()
		var names []string
		pages := 0
		p := kinesis.NewListQueuesPaginator(e.kc, in)
		for p.HasMorePages() {
			out, err := p.NextPage(e.ctx)
			if err != nil {
				t.Fatalf("ListQueues page %d: %v", pages, err)
			}
			pages++
			for _, q := range out.QueueSummaries {
				names = append(names, aws.ToString(q.QueueName))
				if len(q.Streams) != 1 || q.QueueStatus != types.QueueStatusActive || !q.QueueCreationTimestamp.Equal(t0) {
					t.Errorf("summary %+v", q)
				}
			}
		}
		return names, pages
	}
	filter := func(stream string, created *time.Time) []types.QueueStreamFilter {
		return []types.QueueStreamFilter{{StreamARN: aws.String(e.srv.StreamARN(stream)), StreamCreationTimestamp: created}}
	}
	if names, pages := list(&kinesis.ListQueuesInput{MaxResults: aws.Int32(2), StreamFilter: filter("s", nil)}); strings.Join(names, ",") != strings.Join(onS, ",") || pages != 3 {
		t.Errorf("queues on s: %v in %d pages, want %v in 3", names, pages, onS)
	}
	if names, _ := list(&kinesis.ListQueuesInput{}); len(names) != 10 {
		t.Errorf("all queues: %v, want 10", names)
	}
	if names, _ := list(&kinesis.ListQueuesInput{StreamFilter: filter("t", aws.Time(t0))}); len(names) != 5 || names[0] != "t0" {
		t.Errorf("queues on t created at t0: %v", names)
	}
	if names, _ := list(&kinesis.ListQueuesInput{StreamFilter: filter("t", aws.Time(t0.Add(time.Hour)))}); len(names) != 0 {
		t.Errorf("queues on a t created another time: %v, want none", names)
	}
	if names, _ := list(&kinesis.ListQueuesInput{StreamFilter: append(filter("t", nil), filter("s", nil)...)}); len(names) != 10 {
		t.Errorf("queues on s or t: %v, want 10", names)
	}
	if names, _ := list(&kinesis.ListQueuesInput{StreamFilter: filter("missing", nil)}); len(names) != 0 {
		t.Errorf("queues on a missing stream: %v, want none", names)
	}

	first, err := e.kc.ListQueues(e.ctx, &kinesis.ListQueuesInput{MaxResults: aws.Int32(1), StreamFilter: filter("s", nil)})
	if err != nil || first.NextToken == nil {
		t.Fatalf("first page: %v %+v", err, first)
	}
	_, err = e.kc.ListQueues(e.ctx, &kinesis.ListQueuesInput{NextToken: first.NextToken, StreamFilter: filter("t", nil)})
	wantAPIError(t, err, "InvalidArgumentException", "NextToken was issued for another StreamFilter.")
	_, err = e.kc.ListQueues(e.ctx, &kinesis.ListQueuesInput{NextToken: aws.String("garbage")})
	wantAPIError(t, err, "InvalidArgumentException", "Invalid NextToken.")
	_, err = e.kc.ListQueues(e.ctx, &kinesis.ListQueuesInput{MaxResults: aws.Int32(0)})
	wantAPIError(t, err, "ValidationException", "1 validation error detected: Value '0' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 10000")
	_, err = e.kc.ListQueues(e.ctx, &kinesis.ListQueuesInput{StreamFilter: []types.QueueStreamFilter{}})
	wantAPIError(t, err, "ValidationException", "1 validation error detected: Value '[0 items]' at 'streamFilter' failed to satisfy constraint: Member must have length between 1 and 10000")
	_, err = e.kc.ListQueues(e.ctx, &kinesis.ListQueuesInput{StreamFilter: []types.QueueStreamFilter{{StreamARN: aws.String("arn:x")}}})
	wantAPIError(t, err, "ValidationException", "")
	e.clock.Advance(301 * time.Second)
	_, err = e.kc.ListQueues(e.ctx, &kinesis.ListQueuesInput{NextToken: first.NextToken, StreamFilter: filter("s", nil)})
	wantAPIError(t, err, "ExpiredNextTokenException", "")
}

// TestQueueCBOR receives and acknowledges over CBOR, the Java SDKs' protocol:
// the blob a byte string, the timestamps tag 1 over epoch milliseconds.
func TestQueueCBOR(t *testing.T) {
	e := newQueueEnv(t)
	arn := e.queue("q", kinesistest.QueueConfig{})
	e.put("s", "k", "payload")
	status, _, out, _ := cborCall(t, e.srv, "ReceiveQueueRecords", map[string]any{"QueueARN": arn, "WaitTimeSeconds": 0})
	recs, _ := out["QueueRecords"].([]any)
	if status != 200 || len(recs) != 1 {
		t.Fatalf("ReceiveQueueRecords over CBOR: %d %v", status, out)
	}
	rec := recs[0].(map[string]any)
	if data, ok := rec["Data"].([]byte); !ok || string(data) != "payload" {
		t.Errorf("Data %#v, want the byte string payload", rec["Data"])
	}
	var typed struct {
		QueueRecords []struct{ ApproximateArrivalTimestamp, FirstReceiveTimestamp cbor.RawTag }
	}
	if err := cbor.Unmarshal(out["raw"].([]byte), &typed); err != nil {
		t.Fatal(err)
	}
	for _, ts := range []cbor.RawTag{typed.QueueRecords[0].ApproximateArrivalTimestamp, typed.QueueRecords[0].FirstReceiveTimestamp} {
		var ms int64
		if err := cbor.Unmarshal(ts.Content, &ms); ts.Number != 1 || err != nil || ms != t0.UnixMilli() {
			t.Errorf("timestamp tag %d over %x, want tag 1 over %d", ts.Number, ts.Content, t0.UnixMilli())
		}
	}
	status, _, ack, _ := cborCall(t, e.srv, "AcknowledgeQueueRecords", map[string]any{"QueueARN": arn, "Entries": []any{map[string]any{"ReceiptHandle": rec["ReceiptHandle"]}}})
	if ok, _ := ack["Successful"].([]any); status != 200 || len(ok) != 1 {
		t.Errorf("AcknowledgeQueueRecords over CBOR: %d %v", status, ack)
	}
	if st := e.stats(arn); st.Acked != 1 {
		t.Errorf("stats %+v", st)
	}
}
