package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestRunCreatesQueues: --queues creates queues at start, on the on-demand streams of
// --streams or on on-demand streams of their own, and prints each one's ARN.
func TestRunCreatesQueues(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--streams", "work:2:on-demand,prov:1",
			"--queues", "jobs:work:60, fresh:new ", "--queue-seed", "4"}, w, io.Discard)
		w.Close()
	}()
	r := bufio.NewReader(out)
	var lines []string
	for range 4 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the start lines: %v (run: %v)", err, <-done)
		}
		lines = append(lines, strings.TrimSpace(line))
	}
	go io.Copy(io.Discard, out) //nolint:errcheck // nothing else is printed
	url, ok := strings.CutPrefix(lines[0], "kinesis-server listening on ")
	if !ok || lines[2] != "kinesis-server created stream new (on-demand, 4 shards) for queue fresh" {
		t.Fatalf("start lines %q", lines)
	}
	arns := map[string]string{}
	for _, line := range []string{lines[1], lines[3]} {
		head, arn, ok := strings.Cut(line, ": ")
		if !ok || !strings.HasPrefix(arn, "arn:aws:kinesis:us-east-1:123456789012:queue/") {
			t.Fatalf("queue line %q", line)
		}
		arns[head] = arn
	}
	jobs, fresh := arns["kinesis-server queue jobs on stream work"], arns["kinesis-server queue fresh on stream new"]
	if jobs == "" || fresh == "" {
		t.Fatalf("queue lines %q", lines[1:])
	}

	kc := kinesis.New(kinesis.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	for arn, want := range map[string]string{jobs: "jobs work 60", fresh: "fresh new 30"} {
		d, err := kc.DescribeQueue(ctx, &kinesis.DescribeQueueInput{QueueARN: aws.String(arn)})
		if err != nil {
			t.Fatalf("DescribeQueue(%s): %v", arn, err)
		}
		q := d.QueueDescription
		stream := strings.TrimPrefix(aws.ToString(q.StreamConfigurationList[0].StreamARN), "arn:aws:kinesis:us-east-1:123456789012:stream/")
		if got := fmt.Sprint(aws.ToString(q.QueueName), " ", stream, " ", aws.ToInt32(q.QueueAttributes.VisibilityTimeoutSeconds)); got != want {
			t.Errorf("queue %s, want %s", got, want)
		}
	}
	sum, err := kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("new")})
	if err != nil || sum.StreamDescriptionSummary.StreamModeDetails.StreamMode != types.StreamModeOnDemand || aws.ToInt32(sum.StreamDescriptionSummary.QueueCount) != 1 {
		t.Fatalf("stream new: %v %+v", err, sum)
	}
	if _, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("work"), PartitionKey: aws.String("k"), Data: []byte("job")}); err != nil {
		t.Fatal(err)
	}
	got, err := kc.ReceiveQueueRecords(ctx, &kinesis.ReceiveQueueRecordsInput{QueueARN: aws.String(jobs), WaitTimeSeconds: aws.Int32(5)})
	if err != nil || len(got.QueueRecords) != 1 || string(got.QueueRecords[0].Data) != "job" {
		t.Fatalf("ReceiveQueueRecords: %v %+v", err, got)
	}
	ack, err := kc.AcknowledgeQueueRecords(ctx, &kinesis.AcknowledgeQueueRecordsInput{QueueARN: aws.String(jobs),
		Entries: []types.AcknowledgeQueueRecordsRequestEntry{{ReceiptHandle: got.QueueRecords[0].ReceiptHandle}}})
	if err != nil || len(ack.Successful) != 1 {
		t.Fatalf("AcknowledgeQueueRecords: %v %+v", err, ack)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after cancel: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}
}

func TestRunRejectsBadQueues(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--queues", "q"}, "want name:stream[:visibility]"},
		{[]string{"--queues", "q:s:x:y"}, "want name:stream[:visibility]"},
		{[]string{"--queues", ":s"}, "want name:stream[:visibility]"},
		{[]string{"--queues", "q:s:soon"}, `visibility "soon" is neither seconds nor a duration`},
		{[]string{"--queues", "q:s:43201"}, "must be whole seconds between 0 and 43200"},
		{[]string{"--queues", "q:s:1.5s"}, "must be whole seconds between 0 and 43200"},
		{[]string{"--streams", "p:1", "--queues", "q:p"}, "stream p is provisioned, and queues need an on-demand stream; give it as p:N:on-demand (or auto) in --streams"},
		{[]string{"--queues", "q:s,q:t"}, "Queue q under account 123456789012 already exists."},
		{[]string{"--queue-in-flight-limit", "0"}, "WithQueueInFlightLimit"},
		{[]string{"--queue-entry-throttle-rate", "1.5"}, "QueueEntryThrottleRate"},
	} {
		err := run(t.Context(), append([]string{"--addr", "127.0.0.1:0"}, c.args...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("run(%q) = %v, want an error saying %q", c.args, err, c.says)
		}
	}
}

func TestParseQueues(t *testing.T) {
	got, err := parseQueues(" a:s, b:t:60 ,,c:u:2m,d:v:0")
	if err != nil {
		t.Fatal(err)
	}
	want := []queueSpec{{"a", "s", 0}, {"b", "t", time.Minute}, {"c", "u", 2 * time.Minute}, {"d", "v", 0}}
	if !slices.Equal(got, want) {
		t.Errorf("parseQueues = %+v, want %+v", got, want)
	}
}

// TestAdminQueues: the admin endpoint lists queues with their stats and expires what a
// queue has in flight, as a harness in another process needs for a worker kill.
func TestAdminQueues(t *testing.T) {
	srv, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateOnDemandStream("s", 1, ""); err != nil {
		t.Fatal(err)
	}
	arn, err := srv.CreateQueue("q", "s", kinesistest.QueueConfig{VisibilityTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(adminHandler(srv))
	defer admin.Close()
	kc := srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	ctx := t.Context()
	if _, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.ReceiveQueueRecords(ctx, &kinesis.ReceiveQueueRecordsInput{QueueARN: &arn, WaitTimeSeconds: aws.Int32(0)}); err != nil {
		t.Fatal(err)
	}
	get := func() []queueState {
		t.Helper()
		resp, err := http.Get(admin.URL + "/queues")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out []queueState
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /queues: %d %v", resp.StatusCode, err)
		}
		return out
	}
	if qs := get(); len(qs) != 1 || qs[0].Name != "q" || qs[0].ARN != arn || qs[0].Stream != "s" || qs[0].Status != "ACTIVE" || qs[0].Stats.InFlight != 1 {
		t.Fatalf("GET /queues = %+v", qs)
	}
	resp, err := http.Post(admin.URL+"/queues/expire?arn="+arn, "", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	var expired map[string]int
	json.NewDecoder(resp.Body).Decode(&expired) //nolint:errcheck // checked below
	resp.Body.Close()
	if resp.StatusCode != 200 || expired["expired"] != 1 {
		t.Errorf("POST /queues/expire = %d %v", resp.StatusCode, expired)
	}
	if qs := get(); qs[0].Stats.InFlight != 0 || qs[0].Stats.Visible != 1 {
		t.Errorf("after expiring: %+v", qs[0].Stats)
	}
	resp, err = http.Post(admin.URL+"/queues/expire?arn=arn:aws:kinesis:us-east-1:123456789012:queue/none", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("POST /queues/expire of an unknown queue = %d, want 404", resp.StatusCode)
	}
}
