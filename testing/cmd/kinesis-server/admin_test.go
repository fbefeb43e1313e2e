package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestAdminEndpoint drives the admin endpoint as the soak does from another process: the
// records of a stream, faults on and off, an outage of each kind and the server's memory.
func TestAdminEndpoint(t *testing.T) {
	srv, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("s", 2); err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(adminHandler(srv))
	defer admin.Close()
	call := func(method, path string, body []byte, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, admin.URL+path, bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
		}
		return resp.StatusCode
	}
	ctx := context.Background()
	client := srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	put := func() error {
		_, err := client.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("x")})
		return err
	}
	if err := put(); err != nil {
		t.Fatal(err)
	}

	var recs []kinesistest.StoredRecord
	if code := call("GET", "/records?stream=s", nil, &recs); code != 200 || len(recs) != 1 || string(recs[0].Data) != "x" {
		t.Errorf("GET /records = %d, %+v; want the one record", code, recs)
	}
	if code := call("GET", "/records?stream=nope", nil, nil); code != 404 {
		t.Errorf("GET /records of an unknown stream = %d, want 404", code)
	}

	f, _ := json.Marshal(kinesistest.Faults{ServerErrorRate: 1})
	if code := call("PUT", "/faults", f, nil); code != 204 {
		t.Fatalf("PUT /faults = %d", code)
	}
	var ae smithy.APIError
	if err := put(); !errors.As(err, &ae) {
		t.Errorf("PutRecord with every request failing: %v, want a 5xx", err)
	}
	if code := call("PUT", "/faults", []byte(`{"ServerErrorRate": 2}`), nil); code != 400 {
		t.Errorf("PUT /faults with a rate of 2 = %d, want 400", code)
	}
	if code := call("PUT", "/faults", []byte(`{}`), nil); code != 204 {
		t.Fatalf("PUT /faults {} = %d", code)
	}

	if code := call("PUT", "/outage?mode=refuse", nil, nil); code != 204 {
		t.Fatalf("PUT /outage refuse = %d", code)
	}
	// A connection the client kept from before breaks; the next dial is refused.
	if err := put(); err == nil {
		t.Errorf("PutRecord while refusing succeeded")
	}
	if err := put(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("PutRecord while refusing: %v, want connection refused", err)
	}
	if code := call("PUT", "/outage?mode=unavailable", nil, nil); code != 204 {
		t.Fatalf("PUT /outage unavailable = %d", code)
	}
	if err := put(); !errors.As(err, &ae) || ae.ErrorCode() != "ServiceUnavailable" {
		t.Errorf("PutRecord while unavailable: %v, want ServiceUnavailable", err)
	}
	if code := call("PUT", "/outage?mode=later", nil, nil); code != 400 {
		t.Errorf("PUT /outage with an unknown mode = %d, want 400", code)
	}
	if code := call("PUT", "/outage?mode=none", nil, nil); code != 204 {
		t.Fatalf("PUT /outage none = %d", code)
	}
	if err := put(); err != nil {
		t.Errorf("PutRecord after the outage: %v", err)
	}

	var m memoryStats
	if code := call("GET", "/memory", nil, &m); code != 200 || m.HeapAfterGC == 0 || m.Goroutines == 0 || m.RSS == 0 {
		t.Errorf("GET /memory = %d, %+v; want every figure set", code, m)
	}
}
