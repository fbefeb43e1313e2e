package preflight

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/awsconf"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// isolate leaves Run no AWS settings but the test's.
func isolate(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
}

// A failed check is matched with kinesisio's errors, as the connector's own errors are, and
// keeps the SDK's error for errors.As.
func TestAFailedCheckMatchesKinesisiosErrors(t *testing.T) {
	isolate(t)
	expired := kinesistest.Credential{AccessKeyID: "ASIAEXPIRED", SecretAccessKey: "s", SessionToken: "tok", Expires: time.Now().Add(-time.Minute)}
	srv, err := kinesistest.Start(kinesistest.WithCredentials(kinesistest.TestCredential, expired))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("real", 1); err != nil {
		t.Fatal(err)
	}
	key := awsconf.Settings{Endpoint: srv.URL(), AccessKeyID: kinesistest.TestCredential.AccessKeyID, SecretAccessKey: kinesistest.TestCredential.SecretAccessKey}
	stream := func(name string) []Stream { return []Stream{{Name: name, Flag: "--stream"}} }
	ctx := context.Background()
	for _, c := range []struct {
		name string
		plan Plan
		kind error
	}{
		{"a stream that does not exist", Plan{Kinesis: key, Streams: stream("missing")}, kinesisio.ErrStreamNotFound},
		{"no credentials", Plan{Kinesis: awsconf.Settings{Endpoint: srv.URL()}, Streams: stream("real")}, kinesisio.ErrNoCredentials},
		{"an expired token", Plan{Kinesis: awsconf.Settings{Endpoint: srv.URL(), AccessKeyID: expired.AccessKeyID, SecretAccessKey: expired.SecretAccessKey, SessionToken: expired.SessionToken},
			Streams: stream("real")}, kinesisio.ErrAccessDenied},
		{"an unreachable endpoint", Plan{Kinesis: awsconf.Settings{Endpoint: "http://127.0.0.1:1", AccessKeyID: "k", SecretAccessKey: "s"}, Streams: stream("real")}, nil},
	} {
		_, err := Run(ctx, c.plan)
		var e *Error
		if !errors.As(err, &e) || strings.Contains(e.Line, "\n") {
			t.Errorf("%s: %v; want an *Error of one line", c.name, err)
			continue
		}
		for _, kind := range []error{kinesisio.ErrStreamNotFound, kinesisio.ErrNoCredentials, kinesisio.ErrAccessDenied} {
			if got := errors.Is(err, kind); got != (kind == c.kind) {
				t.Errorf("%s: errors.Is(err, %v) = %v: %v", c.name, kind, got, err)
			}
		}
	}
	if notes, err := Run(ctx, Plan{Kinesis: key, Streams: stream("real")}); err != nil || notes != nil {
		t.Errorf("a stream that exists: %v, %q", err, notes)
	}
	if notes, err := Run(ctx, Plan{Kinesis: awsconf.Settings{Endpoint: "http://127.0.0.1:1"}}); err != nil || notes != nil {
		t.Errorf("no streams (the embedded demo) must check nothing: %v, %q", err, notes)
	}
}

// A queue is checked with DescribeQueue: one that exists passes, a missing one fails in one
// line naming the flag.
func TestTheQueueIsDescribed(t *testing.T) {
	isolate(t)
	srv, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateOnDemandStream("s", 1, ""); err != nil {
		t.Fatal(err)
	}
	arn, err := srv.CreateQueue("q", "s", kinesistest.QueueConfig{})
	if err != nil {
		t.Fatal(err)
	}
	key := awsconf.Settings{Endpoint: srv.URL(), AccessKeyID: kinesistest.TestCredential.AccessKeyID, SecretAccessKey: kinesistest.TestCredential.SecretAccessKey}
	ctx := context.Background()
	if notes, err := Run(ctx, Plan{Kinesis: key, Queues: []Queue{{ARN: arn, Flag: "--queue"}}}); err != nil || notes != nil {
		t.Errorf("a queue that exists: %v, %q", err, notes)
	}
	missing := strings.TrimSuffix(arn, arn[strings.LastIndex(arn, "/")+1:]) + "nosuchqueue"
	_, err = Run(ctx, Plan{Kinesis: key, Queues: []Queue{{ARN: missing, Flag: "--queue"}}})
	var e *Error
	if !errors.As(err, &e) || strings.Contains(e.Line, "\n") || !strings.Contains(e.Line, "does not exist at "+srv.URL()) || !strings.Contains(e.Line, "check --queue") {
		t.Errorf("a missing queue: %v; want one line saying it does not exist and to check --queue", err)
	}
}
