package kinesistest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// rawCall sends a JSON 1.1 request without the SDK and returns the status,
// headers and body.
func rawCall(t *testing.T, url, method, target, contentType, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

const json11 = "application/x-amz-json-1.1"

func TestWireResponsesLookLikeTheService(t *testing.T) {
	e := newEnv(t)
	e.createStream("wire", 1)
	e.put("wire", "pk", "hello")

	status, h, body := rawCall(t, e.srv.URL(), "POST", "Kinesis_20131202.ListStreams", json11, "{}")
	if status != 200 || h.Get("Content-Type") != json11 || h.Get("X-Amzn-Requestid") == "" {
		t.Errorf("ListStreams: %d %v %s", status, h, body)
	}

	status, _, body = rawCall(t, e.srv.URL(), "POST", "Kinesis_20131202.GetShardIterator", json11,
		`{"StreamName":"wire","ShardId":"shardId-000000000000","ShardIteratorType":"TRIM_HORIZON"}`)
	var it struct{ ShardIterator string }
	if status != 200 || json.Unmarshal([]byte(body), &it) != nil {
		t.Fatalf("GetShardIterator: %d %s", status, body)
	}
	_, _, body = rawCall(t, e.srv.URL(), "POST", "Kinesis_20131202.GetRecords", json11, `{"ShardIterator":"`+it.ShardIterator+`"}`)
	// Timestamps are epoch seconds with a millisecond fraction; blobs are
	// standard base64.
	for _, want := range []string{`"ApproximateArrivalTimestamp":1772366400.000`, `"Data":"aGVsbG8="`, `"PartitionKey":"pk"`, `"MillisBehindLatest":0`} {
		if !strings.Contains(body, want) {
			t.Errorf("GetRecords body %s lacks %s", body, want)
		}
	}
}

func TestWireErrorsCarryTypeHeaderAndBody(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, method, target, contentType, body string
		status                                  int
		code                                    string
	}{
		{"unknown stream", "POST", "Kinesis_20131202.DescribeStream", json11, `{"StreamName":"none"}`, 400, "ResourceNotFoundException"},
		{"unknown operation", "POST", "Kinesis_20131202.Frobnicate", json11, `{}`, 400, "UnknownOperationException"},
		{"no target", "POST", "", json11, `{}`, 400, "UnknownOperationException"},
		{"malformed JSON", "POST", "Kinesis_20131202.ListStreams", json11, `{"Limit":`, 400, "SerializationException"},
		{"wrong member type", "POST", "Kinesis_20131202.ListStreams", json11, `{"Limit":"ten"}`, 400, "SerializationException"},
		{"GET", "GET", "Kinesis_20131202.ListStreams", json11, "", 400, "UnknownOperationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := rawCall(t, e.srv.URL(), tc.method, tc.target, tc.contentType, tc.body)
			var eb struct {
				Type    string `json:"__type"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal([]byte(body), &eb); err != nil {
				t.Fatalf("error body %q: %v", body, err)
			}
			if status != tc.status || h.Get("X-Amzn-ErrorType") != tc.code || eb.Type != tc.code || eb.Message == "" || h.Get("X-Amzn-Requestid") == "" {
				t.Errorf("got %d, header %q, body %s", status, h.Get("X-Amzn-ErrorType"), body)
			}
		})
	}
}

// syncBuffer is a log destination safe to read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLoggerRecordsStreamsAndErrorsButNoCredentials(t *testing.T) {
	var buf syncBuffer
	e := newEnv(t, kinesistest.WithLogger(log.New(&buf, "", 0)))
	if _, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("logged"), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	_, err := e.kc.DescribeStream(e.ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("missing")})
	wantErrorType[*types.ResourceNotFoundException](t, err)
	out := buf.String()
	if !strings.Contains(out, "created stream logged (PROVISIONED, 2 shards)") ||
		!strings.Contains(out, "DescribeStream -> 400 ResourceNotFoundException: Stream missing under account 123456789012 not found.") {
		t.Errorf("log:\n%s", out)
	}
	for _, secret := range []string{"Authorization", "AKIAKINESISTEST", "kinesistest-secret", "Signature="} {
		if strings.Contains(out, secret) {
			t.Errorf("log contains %q:\n%s", secret, out)
		}
	}
	if got := len(strings.Split(strings.TrimSpace(out), "\n")); got != 2 {
		t.Errorf("log has %d lines, want 2:\n%s", got, out)
	}
}

func TestCallCountCountsEveryRequest(t *testing.T) {
	e := newEnv(t)
	e.createStream("cc", 1)
	for range 3 {
		e.put("cc", "k", "x")
	}
	_, _ = e.kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("none"), PartitionKey: aws.String("k"), Data: []byte("x")})
	if n := e.srv.CallCount("PutRecord"); n != 4 {
		t.Errorf("CallCount(PutRecord) = %d, want 4", n)
	}
	if n := e.srv.CallCount("GetRecords"); n != 0 {
		t.Errorf("CallCount(GetRecords) = %d, want 0", n)
	}
	if got := e.srv.CallCounts(); got["PutRecord"] != 4 || len(got) != 1 {
		t.Errorf("CallCounts = %v", got)
	}
}

func TestStartOnAGivenAddress(t *testing.T) {
	probe, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(probe.URL(), "http://")
	if err := probe.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err := kinesistest.Start(kinesistest.WithAddr(addr))
	if err != nil {
		t.Fatalf("Start(WithAddr(%s)): %v", addr, err)
	}
	defer srv.Close()
	if srv.URL() != "http://"+addr {
		t.Errorf("URL = %s, want http://%s", srv.URL(), addr)
	}
	if _, err := kinesistest.Start(kinesistest.WithAddr(addr)); err == nil {
		t.Error("a second server on the same address started")
	}
	if _, err := srv.Client().ListStreams(t.Context(), &kinesis.ListStreamsInput{}); err != nil {
		t.Errorf("ListStreams with the default client: %v", err)
	}
}

// A client without retries reads many large pages and writes many large
// requests without connection errors: HTTPClient avoids the SDK's race on
// request bodies that a fast local server provokes.
func TestClientWithoutRetriesSurvivesLargeExchanges(t *testing.T) {
	e := newEnv(t)
	e.createStream("large-pages", 1)
	recs := benchEntries(500)
	for range 20 {
		e.putRecords("large-pages", recs)
	}
	for range 2 {
		it := e.iterator("large-pages", sid(0), types.ShardIteratorTypeTrimHorizon)
		for {
			out := e.getRecords(it, 1000)
			if len(out.Records) == 0 {
				break
			}
			it = *out.NextShardIterator
		}
	}
}
