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
		opt  ReadOption
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
		msg := mustPanic(t, func() { buildConfig(targetRead, []ReadOption{c.opt}) })
		for _, w := range append([]string{"kinesisio.Read"}, c.want...) {
			if !strings.Contains(msg, w) {
				t.Errorf("panic %q does not mention %q", msg, w)
			}
		}
	}
}

func TestClientOptionsAreAcceptedByEveryTransform(t *testing.T) {
	opts := []ClientOption{
		WithRegion("eu-west-1"),
		WithEndpoint("http://127.0.0.1:4567"),
		WithStaticCredentials("AKIDEXAMPLE", "secret"),
		WithSessionToken("token"),
		WithAssumeRole("arn:aws:iam::123456789012:role/reader", "beam-session"),
		WithProfile("dev"),
		WithRetries(5, 100*time.Millisecond, 2*time.Second),
	}
	for _, dir := range []target{targetRead, targetReadBounded, targetWrite} {
		cfg := buildConfig(dir, opts)
		want := clientConfig{Region: "eu-west-1", Endpoint: "http://127.0.0.1:4567", AccessKeyID: "AKIDEXAMPLE",
			SecretAccessKey: "secret", SessionToken: "token", RoleARN: "arn:aws:iam::123456789012:role/reader",
			RoleSessionName: "beam-session", Profile: "dev"}
		if cfg.client != want {
			t.Errorf("%v: client config = %v, want %v", dir, cfg.client, want)
		}
		if cfg.retry != (retryConfig{NumRetries: 5, RetryInterval: 100 * time.Millisecond, MaxRetryInterval: 2 * time.Second}) {
			t.Errorf("%v: retry config = %+v", dir, cfg.retry)
		}
	}
}

func TestNilAndZeroOptionsPanicNamingTheTransform(t *testing.T) {
	for _, c := range []struct {
		build func()
		want  []string
	}{
		{func() { buildConfig(targetRead, []ReadOption{nil}) }, []string{"kinesisio.Read", "a nil option", "kinesisio.With"}},
		{func() { buildConfig(targetWrite, []WriteOption{nil}) }, []string{"kinesisio.Write", "a nil option"}},
		{func() { buildConfig(targetRead, []ReadOption{ClientOption{}}) }, []string{"kinesisio.Read", "a zero kinesisio.ClientOption"}},
		{func() { buildConfig(targetReadBounded, []ReadOption{SourceOption{}}) }, []string{"kinesisio.ReadBounded", "a zero kinesisio.SourceOption"}},
		{func() { buildConfig(targetWrite, []WriteOption{ClientOption{}}) }, []string{"kinesisio.Write", "a zero kinesisio.ClientOption"}},
	} {
		msg := mustPanic(t, c.build)
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("panic %q does not mention %q", msg, w)
			}
		}
	}
}

func TestClientConfigStringRedactsCredentials(t *testing.T) {
	cfg := buildConfig(targetRead, []ReadOption{
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
