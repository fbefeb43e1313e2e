package kinesistest_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestQueueOperationsThroughEndpointOverride: the SDK sends queue operations to
// {queueId}.data-kinesis-queues.{region}.amazonaws.com and friends unless an endpoint is
// configured; configured (here by AWS_ENDPOINT_URL_KINESIS, as a user of another process
// would), every queue operation reaches the test server, even with the account-ID
// endpoint mode "required", which would otherwise route by account.
func TestQueueOperationsThroughEndpointOverride(t *testing.T) {
	srv, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateOnDemandStream("s", 1, ""); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL_KINESIS", srv.URL())
	t.Setenv("AWS_CA_BUNDLE", "") // plain HTTP; a bundle would need the SDK's own HTTP client
	ctx := t.Context()
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithAccountIDEndpointMode(aws.AccountIDEndpointModeRequired),
		config.WithCredentialsProvider(credentials.StaticCredentialsProvider{Value: aws.Credentials{
			AccessKeyID: "test", SecretAccessKey: "test", AccountID: kinesistest.AccountID,
		}}),
		config.WithHTTPClient(kinesistest.HTTPClient()),
		config.WithRetryMaxAttempts(1),
	)
	if err != nil {
		t.Fatal(err)
	}
	kc := kinesis.NewFromConfig(cfg)
	created, err := kc.CreateQueue(ctx, &kinesis.CreateQueueInput{QueueName: aws.String("q"),
		StreamConfigurationList: []types.QueueStreamConfiguration{{StreamARN: aws.String(srv.StreamARN("s"))}},
		QueueAttributes: &types.QueueAttributes{VisibilityTimeoutSeconds: aws.Int32(0),
			DeadLetterConfiguration: &types.DeadLetterConfiguration{TargetType: types.TargetTypeBuiltIn, MaxReceiveCount: aws.Int32(1)}}})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	arn := created.QueueDescription.QueueARN
	must := func(op string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	_, err = kc.DescribeQueue(ctx, &kinesis.DescribeQueueInput{QueueARN: arn})
	must("DescribeQueue", err)
	_, err = kc.ListQueues(ctx, &kinesis.ListQueuesInput{})
	must("ListQueues", err)
	_, err = kc.UpdateQueue(ctx, &kinesis.UpdateQueueInput{QueueARN: arn, QueueAttributes: &types.QueueAttributes{VisibilityTimeoutSeconds: aws.Int32(0)}})
	must("UpdateQueue", err)
	_, err = kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{
		{PartitionKey: aws.String("a"), Data: []byte("a")}, {PartitionKey: aws.String("b"), Data: []byte("b")}}})
	must("PutRecords", err)
	// Visibility 0 and MaxReceiveCount 1: each record is received once, then a dead letter.
	recs, err := kc.ReceiveQueueRecords(ctx, &kinesis.ReceiveQueueRecordsInput{QueueARN: arn, WaitTimeSeconds: aws.Int32(0), Limit: aws.Int32(1)})
	must("ReceiveQueueRecords", err)
	ack, err := kc.AcknowledgeQueueRecords(ctx, &kinesis.AcknowledgeQueueRecordsInput{QueueARN: arn,
		Entries: []types.AcknowledgeQueueRecordsRequestEntry{{ReceiptHandle: recs.QueueRecords[0].ReceiptHandle}}})
	must("AcknowledgeQueueRecords", err)
	vis, err := kc.UpdateQueueRecordsVisibility(ctx, &kinesis.UpdateQueueRecordsVisibilityInput{QueueARN: arn,
		Entries: []types.UpdateQueueRecordsVisibilityRequestEntry{{ReceiptHandle: recs.QueueRecords[0].ReceiptHandle, VisibilityTimeoutSeconds: aws.Int32(5)}}})
	must("UpdateQueueRecordsVisibility", err)
	if len(ack.Failed) != 1 || len(vis.Failed) != 1 { // visibility 0: the handle was dead at once
		t.Errorf("ack %+v, visibility %+v: want both failed (visibility 0)", ack.Failed, vis.Failed)
	}
	recs, err = kc.ReceiveQueueRecords(ctx, &kinesis.ReceiveQueueRecordsInput{QueueARN: arn, WaitTimeSeconds: aws.Int32(0)})
	must("ReceiveQueueRecords", err)
	if len(recs.QueueRecords) != 1 {
		t.Fatalf("second receive: %d records, want the one never received", len(recs.QueueRecords))
	}
	dead, err := kc.ReceiveDeadLetterQueueRecords(ctx, &kinesis.ReceiveDeadLetterQueueRecordsInput{QueueARN: arn, WaitTimeSeconds: aws.Int32(0), Limit: aws.Int32(1),
		VisibilityTimeoutSeconds: aws.Int32(60)})
	must("ReceiveDeadLetterQueueRecords", err)
	if len(dead.QueueRecords) != 1 {
		t.Fatalf("dead letters: %d, want 1", len(dead.QueueRecords))
	}
	h := dead.QueueRecords[0].ReceiptHandle
	_, err = kc.UpdateDeadLetterQueueRecordsVisibility(ctx, &kinesis.UpdateDeadLetterQueueRecordsVisibilityInput{QueueARN: arn,
		Entries: []types.UpdateDeadLetterQueueRecordsVisibilityRequestEntry{{ReceiptHandle: h, VisibilityTimeoutSeconds: aws.Int32(60)}}})
	must("UpdateDeadLetterQueueRecordsVisibility", err)
	restored, err := kc.RestoreDeadLetterQueueRecords(ctx, &kinesis.RestoreDeadLetterQueueRecordsInput{QueueARN: arn,
		Entries: []types.RestoreDeadLetterQueueRecordsRequestEntry{{ReceiptHandle: h}}})
	must("RestoreDeadLetterQueueRecords", err)
	_, err = kc.AcknowledgeDeadLetterQueueRecords(ctx, &kinesis.AcknowledgeDeadLetterQueueRecordsInput{QueueARN: arn,
		Entries: []types.AcknowledgeDeadLetterQueueRecordsRequestEntry{{ReceiptHandle: h}}})
	must("AcknowledgeDeadLetterQueueRecords", err)
	_, err = kc.DeleteQueue(ctx, &kinesis.DeleteQueueInput{QueueARN: arn})
	must("DeleteQueue", err)
	if len(restored.Successful) != 1 {
		t.Errorf("restore %+v", restored)
	}
	for _, op := range []string{"CreateQueue", "DescribeQueue", "ListQueues", "UpdateQueue", "ReceiveQueueRecords", "AcknowledgeQueueRecords",
		"UpdateQueueRecordsVisibility", "ReceiveDeadLetterQueueRecords", "UpdateDeadLetterQueueRecordsVisibility",
		"RestoreDeadLetterQueueRecords", "AcknowledgeDeadLetterQueueRecords", "DeleteQueue"} {
		if srv.CallCount(op) == 0 {
			t.Errorf("the server never saw %s", op)
		}
	}
}

// hostRecorder is an HTTP client that records where the SDK sends a request and fails it.
type hostRecorder struct{ url *string }

func (h hostRecorder) Do(r *http.Request) (*http.Response, error) {
	*h.url = r.URL.String()
	return nil, errors.New("not sent")
}

// TestQueueDefaultEndpoints records where the SDK sends queue operations without an
// endpoint override: nowhere a test server listens, whatever the account-ID mode. This is
// why a client of the test server must set BaseEndpoint (or AWS_ENDPOINT_URL_KINESIS).
func TestQueueDefaultEndpoints(t *testing.T) {
	const arn = "arn:aws:kinesis:us-east-1:123456789012:queue/q1abc"
	for _, c := range []struct {
		mode    aws.AccountIDEndpointMode
		account string
		create  string // CreateQueue and ListQueues
	}{
		{aws.AccountIDEndpointModePreferred, "", "https://kinesis-queues.us-east-1.amazonaws.com/"},
		{aws.AccountIDEndpointModePreferred, "123456789012", "https://123456789012.control-kinesis-queues.us-east-1.amazonaws.com/"},
		{aws.AccountIDEndpointModeDisabled, "123456789012", "https://kinesis-queues.us-east-1.amazonaws.com/"},
		{aws.AccountIDEndpointModeRequired, "123456789012", "https://123456789012.control-kinesis-queues.us-east-1.amazonaws.com/"},
	} {
		var url string
		kc := kinesis.New(kinesis.Options{Region: "us-east-1", AccountIDEndpointMode: c.mode, RetryMaxAttempts: 1,
			Credentials: credentials.StaticCredentialsProvider{Value: aws.Credentials{AccessKeyID: "a", SecretAccessKey: "b", AccountID: c.account}},
			HTTPClient:  hostRecorder{&url}})
		ctx := context.Background()
		for _, call := range []struct {
			want string
			run  func() error
		}{
			{c.create, func() error { _, err := kc.ListQueues(ctx, &kinesis.ListQueuesInput{}); return err }},
			{c.create, func() error {
				_, err := kc.CreateQueue(ctx, &kinesis.CreateQueueInput{QueueName: aws.String("q"),
					StreamConfigurationList: []types.QueueStreamConfiguration{{StreamARN: aws.String("arn:aws:kinesis:us-east-1:123456789012:stream/s")}}})
				return err
			}},
			{"https://q1abc.control-kinesis-queues.us-east-1.amazonaws.com/", func() error {
				_, err := kc.DescribeQueue(ctx, &kinesis.DescribeQueueInput{QueueARN: aws.String(arn)})
				return err
			}},
			{"https://q1abc.data-kinesis-queues.us-east-1.amazonaws.com/", func() error {
				_, err := kc.ReceiveQueueRecords(ctx, &kinesis.ReceiveQueueRecordsInput{QueueARN: aws.String(arn)})
				return err
			}},
			{"https://q1abc.data-kinesis-queues.us-east-1.amazonaws.com/", func() error {
				_, err := kc.AcknowledgeQueueRecords(ctx, &kinesis.AcknowledgeQueueRecordsInput{QueueARN: aws.String(arn),
					Entries: []types.AcknowledgeQueueRecordsRequestEntry{{ReceiptHandle: aws.String("h")}}})
				return err
			}},
		} {
			url = ""
			if err := call.run(); err == nil || url != call.want {
				t.Errorf("mode %s, account %q: sent to %q (%v), want %s", c.mode, c.account, url, err, call.want)
			}
		}
	}
	// The mode "required" without an account ID fails in the client.
	kc := kinesis.New(kinesis.Options{Region: "us-east-1", AccountIDEndpointMode: aws.AccountIDEndpointModeRequired, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""), HTTPClient: hostRecorder{new(string)}})
	if _, err := kc.ListQueues(context.Background(), &kinesis.ListQueuesInput{}); err == nil {
		t.Error("ListQueues with account-ID mode required and no account succeeded")
	}
}
