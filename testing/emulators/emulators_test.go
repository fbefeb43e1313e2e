package emulators_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/emulators"
)

// TestStartStop starts each emulator, checks that it answers, and stops it.
func TestStartStop(t *testing.T) {
	for _, kind := range []emulators.Kind{emulators.KinesisLocal, emulators.Kinesalite} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			e := emulators.StartT(t, kind)
			out, err := e.Client().ListStreams(context.Background(), &kinesis.ListStreamsInput{})
			if err != nil {
				t.Fatalf("ListStreams: %v\n%s", err, e.Output())
			}
			if len(out.StreamNames) != 0 {
				t.Errorf("fresh %s lists streams %q, want none", kind, out.StreamNames)
			}
			if err := e.Stop(); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 }).ListStreams(context.Background(), &kinesis.ListStreamsInput{}); err == nil {
				t.Errorf("%s still answers after Stop", kind)
			}
		})
	}
}

// TestServesOnWhenAClientGoesAwayMidRequest sends half a request to dynalite and kinesalite
// and closes the connection, as a killed job does: both rethrow the request's "aborted"
// error, which ended them for every other client until client-gone.cjs. Each must answer the
// next client, and its output must say the client went away.
func TestServesOnWhenAClientGoesAwayMidRequest(t *testing.T) {
	for _, c := range []struct {
		kind   emulators.Kind
		target string
	}{
		{emulators.Dynalite, "DynamoDB_20120810.ListTables"},
		{emulators.Kinesalite, "Kinesis_20131202.ListStreams"},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			t.Parallel()
			e := emulators.StartT(t, c.kind)
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL(), "http://"))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: %s\r\nContent-Length: 100\r\n\r\n{\"Limit\":", c.target)
			// The headers and part of the body arrive before the close: the emulator has begun
			// the request when it sees the connection end. Wait for the guard's line, or for
			// the process to end.
			conn.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			for !strings.Contains(e.Output(), "went away") {
				if ended, err := e.Exited(); ended {
					t.Fatalf("%s ended when a client went away mid-request: %v\n%s", c.kind, err, e.Output())
				}
				select {
				case <-ctx.Done():
					t.Fatalf("%s did not log the client that went away:\n%s", c.kind, e.Output())
				case <-time.After(10 * time.Millisecond):
				}
			}
			if c.kind == emulators.Dynalite {
				_, err = e.DynamoDB(func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }).ListTables(ctx, &dynamodb.ListTablesInput{})
			} else {
				_, err = e.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 }).ListStreams(ctx, &kinesis.ListStreamsInput{})
			}
			if err != nil {
				t.Fatalf("%s does not answer after a client went away mid-request: %v\n%s", c.kind, err, e.Output())
			}
		})
	}
}
