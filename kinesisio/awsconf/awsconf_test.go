package awsconf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// isolate clears the AWS environment, so that Load sees only the settings under test.
func isolate(t *testing.T) {
	t.Helper()
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_ACCESS_KEY_ID": "",
		"AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_CA_BUNDLE": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
}

func TestLoadRegion(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	if _, err := Load(ctx, Settings{}); !errors.Is(err, ErrNoRegion) {
		t.Errorf("Load without region or endpoint: %v, want ErrNoRegion", err)
	}
	cfg, err := Load(ctx, Settings{Endpoint: "http://127.0.0.1:1"})
	if err != nil || cfg.Region != EndpointRegion {
		t.Errorf("Load with only an endpoint: region %q, %v; want %q", cfg.Region, err, EndpointRegion)
	}
	cfg, err = Load(ctx, Settings{Region: "eu-west-1", Endpoint: "http://127.0.0.1:1"})
	if err != nil || cfg.Region != "eu-west-1" {
		t.Errorf("Load with a region: region %q, %v; want eu-west-1", cfg.Region, err)
	}
	t.Setenv("AWS_REGION", "ap-south-1")
	cfg, err = Load(ctx, Settings{})
	if err != nil || cfg.Region != "ap-south-1" {
		t.Errorf("Load with AWS_REGION set: region %q, %v; want ap-south-1", cfg.Region, err)
	}
}

func TestLoadStaticCredentials(t *testing.T) {
	isolate(t)
	cfg, err := Load(context.Background(), Settings{Region: "us-west-2", AccessKeyID: "AKID", SecretAccessKey: "SECRET", SessionToken: "TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.AccessKeyID != "AKID" || c.SecretAccessKey != "SECRET" || c.SessionToken != "TOKEN" {
		t.Errorf("credentials %q/%q/%q, want AKID/SECRET/TOKEN", c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
	}
}

func TestLoadUnknownProfileNamesTheSource(t *testing.T) {
	isolate(t)
	_, err := Load(context.Background(), Settings{Region: "us-west-2", Profile: "nobody"})
	if err == nil || !strings.Contains(err.Error(), `shared config profile "nobody"`) {
		t.Errorf("Load with a missing profile: %v, want an error naming the profile", err)
	}
}

func TestSettingsRedactCredentials(t *testing.T) {
	s := Settings{Region: "us-east-1", AccessKeyID: "AKIDSECRETID", SecretAccessKey: "wJalrXUtnFEMI", SessionToken: "FwoGZXIvYXdzE", RoleARN: "arn:aws:iam::1:role/r"}
	for _, out := range []string{s.String(), fmt.Sprintf("%v", s), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s), s.CredentialsSource()} {
		for _, secret := range []string{"AKIDSECRETID", "wJalrXUtnFEMI", "FwoGZXIvYXdzE"} {
			if strings.Contains(out, secret) {
				t.Errorf("%q leaks %q", out, secret)
			}
		}
	}
	if got, want := s.CredentialsSource(), "static credentials, assuming role arn:aws:iam::1:role/r"; got != want {
		t.Errorf("CredentialsSource() = %q, want %q", got, want)
	}
}

// doerFunc is an HTTP client made of a function.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

func TestBodyShieldHidesWriterTo(t *testing.T) {
	var got []byte
	var hadWriterTo bool
	c := bodyShieldClient{doerFunc(func(req *http.Request) (*http.Response, error) {
		_, hadWriterTo = req.Body.(io.WriterTo)
		got, _ = io.ReadAll(req.Body)
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})}
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", io.NopCloser(bytes.NewReader([]byte("payload"))))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := req.Body.(io.WriterTo); !ok {
		t.Fatal("the test's body has no WriterTo to hide")
	}
	if _, err := c.Do(req); err != nil {
		t.Fatal(err)
	}
	if hadWriterTo || string(got) != "payload" {
		t.Errorf("the client got a body with WriterTo %v holding %q; want none, holding \"payload\"", hadWriterTo, got)
	}
}
