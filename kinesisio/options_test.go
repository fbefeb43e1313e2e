package kinesisio

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// mustPanic runs f and returns the panic message, failing the test when f does not panic.
func mustPanic(t *testing.T, f func()) string {
	t.Helper()
	var msg string
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg = fmt.Sprint(r)
			}
		}()
		f()
	}()
	if msg == "" {
		t.Fatalf("expected a panic, got none")
	}
	return msg
}

func TestClientOptionsRejectBadValuesNamingTheOption(t *testing.T) {
	cases := []struct {
		opt  Option
		want []string
	}{
		{WithRegion("EU West"), []string{"WithRegion", `"EU West"`}},
		{WithRegion(""), []string{"WithRegion"}},
		{WithEndpoint("localhost:4567"), []string{"WithEndpoint", "http://"}},
		{WithEndpoint("http://user:pw@host"), []string{"WithEndpoint", "WithStaticCredentials"}},
		{WithStaticCredentials("AKID", ""), []string{"WithStaticCredentials", "non-empty"}},
		{WithSessionToken("tok"), []string{"WithSessionToken", "WithStaticCredentials"}},
		{WithAssumeRole("role/x", "session"), []string{"WithAssumeRole", "role ARN"}},
		{WithAssumeRole("arn:aws:iam::123456789012:role/reader", "a"), []string{"WithAssumeRole", "session name"}},
		{WithProfile(""), []string{"WithProfile"}},
		{WithRetries(-1, time.Second, time.Second), []string{"WithRetries", "negative"}},
		{WithRetries(3, 0, time.Second), []string{"WithRetries", "positive"}},
		{WithRetries(3, 2*time.Second, time.Second), []string{"WithRetries", "maximum retry interval"}},
	}
	for _, c := range cases {
		msg := mustPanic(t, func() { buildConfig("kinesisio.Read", dirRead, []Option{c.opt}) })
		for _, w := range append([]string{"kinesisio.Read"}, c.want...) {
			if !strings.Contains(msg, w) {
				t.Errorf("panic %q does not mention %q", msg, w)
			}
		}
	}
}

func TestClientOptionsAreAcceptedInBothDirections(t *testing.T) {
	opts := []Option{
		WithRegion("eu-west-1"),
		WithEndpoint("http://127.0.0.1:4567"),
		WithStaticCredentials("AKIDEXAMPLE", "secret"),
		WithSessionToken("token"),
		WithAssumeRole("arn:aws:iam::123456789012:role/reader", "beam-session"),
		WithProfile("dev"),
		WithRetries(5, 100*time.Millisecond, 2*time.Second),
	}
	for _, dir := range []direction{dirRead, dirWrite} {
		cfg := buildConfig("kinesisio.Test", dir, opts)
		want := clientConfig{Region: "eu-west-1", Endpoint: "http://127.0.0.1:4567", AccessKeyID: "AKIDEXAMPLE",
			SecretAccessKey: "secret", SessionToken: "token", RoleARN: "arn:aws:iam::123456789012:role/reader",
			RoleSessionName: "beam-session", Profile: "dev"}
		if cfg.client != want {
			t.Errorf("direction %v: client config = %v, want %v", dir, cfg.client, want)
		}
		if cfg.retry != (retryConfig{NumRetries: 5, RetryInterval: 100 * time.Millisecond, MaxRetryInterval: 2 * time.Second}) {
			t.Errorf("direction %v: retry config = %+v", dir, cfg.retry)
		}
	}
}

func TestOptionForOtherDirectionIsRefused(t *testing.T) {
	readOnly := Option{name: "WithSomethingForReads", dirs: dirRead, apply: func(*config) error { return nil }}
	msg := mustPanic(t, func() { buildConfig("kinesisio.Write", dirWrite, []Option{readOnly}) })
	for _, w := range []string{"kinesisio.Write", "WithSomethingForReads", "Read and ReadBounded only"} {
		if !strings.Contains(msg, w) {
			t.Errorf("panic %q does not mention %q", msg, w)
		}
	}
	msg = mustPanic(t, func() { buildConfig("kinesisio.Read", dirRead, []Option{{}}) })
	if !strings.Contains(msg, "zero kinesisio.Option") {
		t.Errorf("zero option panic %q is unclear", msg)
	}
}

func TestClientConfigStringRedactsCredentials(t *testing.T) {
	cfg := buildConfig("kinesisio.Read", dirRead, []Option{
		WithStaticCredentials("AKIDSECRETID", "wJalrXUtnFEMI"), WithSessionToken("FwoGZXIvYXdzE"),
		WithRegion("us-east-1"),
	}).client
	for _, s := range []string{cfg.String(), fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), cfg.credentialsSource()} {
		for _, secret := range []string{"AKIDSECRETID", "wJalrXUtnFEMI", "FwoGZXIvYXdzE"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q leaks %q", s, secret)
			}
		}
		if !strings.Contains(s, "us-east-1") && !strings.Contains(s, "static credentials") {
			t.Errorf("%q lost the non-secret settings", s)
		}
	}
}

func TestValidateStreamName(t *testing.T) {
	validateStreamName("kinesisio.Read", "orders_v2.events-1")
	for _, bad := range []string{"", "has space", "slash/name", strings.Repeat("x", 129)} {
		msg := mustPanic(t, func() { validateStreamName("kinesisio.Read", bad) })
		if !strings.Contains(msg, "stream name") {
			t.Errorf("panic for %q is unclear: %s", bad, msg)
		}
	}
}
