package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
)

func TestRunServesStreamsUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--streams", "demo:2,solo", "--limits", "--fault-seed", "3",
			"--consumer-activation-delay", "0s", "--subscription-lifetime", "1m", "--subscription-heartbeat", "50ms"}, w, io.Discard)
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listen line: %v (run: %v)", err, <-done)
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, "kinesis-server listening on "))
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("listen line %q", line)
	}
	go io.Copy(io.Discard, out) //nolint:errcheck // nothing else is printed

	kc := kinesis.New(kinesis.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(url),
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		RetryMaxAttempts: 1,
	})
	streams, err := kc.ListStreams(ctx, &kinesis.ListStreamsInput{})
	if err != nil {
		t.Fatalf("ListStreams: %v", err)
	}
	if got := strings.Join(streams.StreamNames, ","); got != "demo,solo" {
		t.Errorf("streams %s, want demo,solo", got)
	}
	shards, err := kc.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("demo")})
	if err != nil || len(shards.Shards) != 2 {
		t.Fatalf("ListShards(demo): %v, %+v", err, shards)
	}
	put, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("demo"), PartitionKey: aws.String("k"), Data: []byte("hello")})
	if err != nil {
		t.Fatalf("PutRecord: %v", err)
	}
	it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("demo"), ShardId: put.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatalf("GetShardIterator: %v", err)
	}
	recs, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil || len(recs.Records) != 1 || string(recs.Records[0].Data) != "hello" {
		t.Fatalf("GetRecords: %v, %+v", err, recs)
	}

	// Enhanced fan-out: a consumer is ACTIVE at once with a zero activation
	// delay, and a subscription from TRIM_HORIZON delivers the record.
	reg, err := kc.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String("arn:aws:kinesis:us-east-1:123456789012:stream/demo"), ConsumerName: aws.String("app"),
	})
	if err != nil || reg.Consumer.ConsumerStatus != types.ConsumerStatusActive {
		t.Fatalf("RegisterStreamConsumer: %v, %+v", err, reg)
	}
	firstEvent := func(consumerARN *string) (types.SubscribeToShardEventStream, bool, error) {
		sub, err := kc.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
			ConsumerARN: consumerARN, ShardId: put.ShardId,
			StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
		})
		if err != nil {
			t.Fatalf("SubscribeToShard: %v", err)
		}
		ev, ok := <-sub.GetStream().Events()
		sub.GetStream().Close()
		return ev, ok, sub.GetStream().Err()
	}
	ev, ok, streamErr := firstEvent(reg.Consumer.ConsumerARN)
	if !ok && streamErr != nil && strings.Contains(streamErr.Error(), "use of closed network connection") {
		// Seen once in about ten full CI runs on a loaded machine, never in 600 runs of
		// this test six at once: the client's own end of the connection closed before
		// the first event, with nothing cancelled and no fault configured. Unexplained;
		// one more subscription, by a second consumer (the first may not subscribe to the
		// shard again for 5 s), must then deliver the record as the first would have.
		t.Logf("the first subscription ended before its first event (%v); subscribing once more", streamErr)
		again, err := kc.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{
			StreamARN: aws.String("arn:aws:kinesis:us-east-1:123456789012:stream/demo"), ConsumerName: aws.String("app-again"),
		})
		if err != nil {
			t.Fatalf("RegisterStreamConsumer: %v", err)
		}
		ev, ok, streamErr = firstEvent(again.Consumer.ConsumerARN)
	}
	m, isEvent := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
	if !ok || !isEvent || len(m.Value.Records) != 1 || string(m.Value.Records[0].Data) != "hello" {
		t.Fatalf("first event %#v (open %v, Err %v)", ev, ok, streamErr)
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

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--streams", "demo:zero"},
		{"--streams", "demo:0"},
		{"--streams", "demo:1:fast"},
		{"--streams", "demo:1:auto:x"},
		{"--server-error-rate", "2"},
		{"--iterator-ttl", "0s"},
		{"--consumer-activation-delay", "-1s"},
		{"--subscription-lifetime", "0s"},
		{"--subscription-heartbeat", "0s"},
		{"--subscription-drop-rate", "1.5"},
		{"--event-latency", "-1s"},
		{"--no-such-flag"},
		{"--credentials", "id-without-secret"},
		{"--credentials", "a:b,:c"},
		{"--cert-file", "/tmp/never.pem"},
		{"extra"},
	} {
		if err := run(t.Context(), append([]string{"--addr", "127.0.0.1:0"}, args...), io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

func TestParseStreams(t *testing.T) {
	got, err := parseStreams(" a:3, b ,,c:1,d:2:on-demand,e:4:auto,f:1:provisioned")
	if err != nil {
		t.Fatal(err)
	}
	want := []streamSpec{
		{name: "a", shards: 3, mode: "provisioned"}, {name: "b", shards: 1, mode: "provisioned"}, {name: "c", shards: 1, mode: "provisioned"},
		{name: "d", shards: 2, mode: "on-demand"}, {name: "e", shards: 4, mode: "auto"}, {name: "f", shards: 1, mode: "provisioned"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseStreams = %+v, want %+v", got, want)
	}
}

// TestRunServesTLSWithSignatureChecks starts the TLS port and signature
// checks from flags, reaches the TLS URL with the certificate the server
// wrote, and sees a wrong secret refused.
func TestRunServesTLSWithSignatureChecks(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	certFile := t.TempDir() + "/cert.pem"
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--tls-addr", "127.0.0.1:0", "--cert-file", certFile,
			"--credentials", "AKIAONE:secret-one,AKIATWO:secret-two"}, w, io.Discard)
		w.Close()
	}()
	r := bufio.NewReader(out)
	var lines []string
	for range 3 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the start lines: %v (run: %v)", err, <-done)
		}
		lines = append(lines, strings.TrimSpace(line))
	}
	go io.Copy(io.Discard, out) //nolint:errcheck // nothing else is printed
	want := " (certificate " + certFile + ")"
	if !strings.HasPrefix(lines[1], "kinesis-server listening on https://127.0.0.1:") || !strings.HasSuffix(lines[1], want) ||
		lines[2] != "kinesis-server checks SigV4 signatures for 2 access keys" {
		t.Fatalf("start lines %q", lines)
	}
	tlsURL := strings.TrimSuffix(strings.TrimPrefix(lines[1], "kinesis-server listening on "), want)
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	client := func(id, secret string) *kinesis.Client {
		return kinesis.New(kinesis.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(tlsURL), RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(id, secret, ""),
			HTTPClient:  &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}},
		})
	}
	if _, err := client("AKIATWO", "secret-two").ListStreams(ctx, &kinesis.ListStreamsInput{}); err != nil {
		t.Fatalf("ListStreams over TLS, signed with a configured key: %v", err)
	}
	_, err = client("AKIATWO", "secret-one").ListStreams(ctx, &kinesis.ListStreamsInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" {
		t.Fatalf("ListStreams with a wrong secret: %v, want InvalidSignatureException", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
	if _, err := os.Stat(certFile); err != nil {
		t.Errorf("the certificate file is gone after shutdown: %v", err)
	}
}

// startRun runs the program with args on a free port and returns a client of
// it; the program stops when the test ends.
func startRun(t *testing.T, args ...string) *kinesis.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), w, io.Discard)
		w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run after cancel: %v", err)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("reading the listen line: %v", err)
	}
	go io.Copy(io.Discard, out) //nolint:errcheck // nothing else is printed
	return kinesis.New(kinesis.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(strings.TrimSpace(strings.TrimPrefix(line, "kinesis-server listening on "))),
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		RetryMaxAttempts: 1,
	})
}

func TestRunCreatesOnDemandAndAutoStreamsAndThrottlesLargeReads(t *testing.T) {
	ctx := t.Context()
	kc := startRun(t, "--streams", "od:2:on-demand,auto:3:auto,prov:1", "--large-read-throttle")
	for name, want := range map[string]string{"od": "ON_DEMAND USER_PARTITION_KEY 2", "auto": "ON_DEMAND AUTO 3", "prov": "PROVISIONED  1"} {
		s, err := kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatalf("DescribeStreamSummary(%s): %v", name, err)
		}
		d := s.StreamDescriptionSummary
		if got := fmt.Sprint(d.StreamModeDetails.StreamMode, " ", d.RecordDistributionStrategy, " ", *d.OpenShardCount); got != want {
			t.Errorf("stream %s: %s, want %s", name, got, want)
		}
	}
	var shards []string
	for range 3 {
		put, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("auto"), Data: []byte("no key")})
		if err != nil {
			t.Fatalf("PutRecord without a key on the auto stream: %v", err)
		}
		shards = append(shards, *put.ShardId)
	}
	if got := strings.Join(shards, ","); got != "shardId-000000000000,shardId-000000000001,shardId-000000000002" {
		t.Errorf("keyless records went to %s, want one to each shard", got)
	}

	// A 4 MiB page pauses the shard for 2 s of wall clock.
	if _, err := kc.UpdateMaxRecordSize(ctx, &kinesis.UpdateMaxRecordSizeInput{
		StreamARN: aws.String("arn:aws:kinesis:us-east-1:123456789012:stream/prov"), MaxRecordSizeInKiB: aws.Int32(4096),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("prov"), PartitionKey: aws.String("k"), Data: make([]byte, 4<<20-1)}); err != nil {
		t.Fatal(err)
	}
	it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("prov"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil || len(recs.Records) != 1 {
		t.Fatalf("GetRecords: %v", err)
	}
	_, err = kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: recs.NextShardIterator})
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Errorf("GetRecords right after a 4 MiB page: %v, want ProvisionedThroughputExceededException", err)
	}
}
