package kinesistest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

var otherKey = kinesistest.Credential{AccessKeyID: "AKIAOTHERKEY", SecretAccessKey: "other-secret"}

func newSigV4Env(t *testing.T) *env {
	t.Helper()
	return newEnv(t, kinesistest.WithCredentials(kinesistest.TestCredential, otherKey), kinesistest.WithTLS(""))
}

// withKeys makes a client sign with id, secret and token.
func withKeys(id, secret, token string) func(*kinesis.Options) {
	return func(o *kinesis.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(id, secret, token)
	}
}

// TestSigV4AcceptsWhatTheSDKSigns runs calls, a subscription included, signed
// by aws-sdk-go-v2 with each configured key, over HTTP/1.1, h2c and TLS+h2.
func TestSigV4AcceptsWhatTheSDKSigns(t *testing.T) {
	e := newSigV4Env(t)
	e.createStream("signed", 1)
	arn, err := e.srv.RegisterConsumer("signed", "c")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		key    kinesistest.Credential
		url    string
		client *http.Client
	}{
		{"http1", kinesistest.TestCredential, e.srv.URL(), kinesistest.HTTPClient()},
		{"h2c", otherKey, e.srv.URL(), kinesistest.H2CHTTPClient()},
		{"tls-h2", kinesistest.TestCredential, e.srv.TLSURL(), e.srv.TLSHTTPClient()},
	} {
		t.Run(c.name, func(t *testing.T) {
			kc := e.srv.Client(withKeys(c.key.AccessKeyID, c.key.SecretAccessKey, ""), func(o *kinesis.Options) {
				o.BaseEndpoint, o.HTTPClient, o.RetryMaxAttempts = aws.String(c.url), c.client, 1
			}, ownCodec)
			before := e.srv.AccessKeyUses()[c.key.AccessKeyID]
			if _, err := kc.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("signed"), PartitionKey: aws.String("k"), Data: []byte(c.name)}); err != nil {
				t.Fatalf("PutRecord: %v", err)
			}
			out, err := kc.SubscribeToShard(e.ctx, &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(sid(0)),
				StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}})
			if err != nil {
				t.Fatalf("SubscribeToShard: %v", err)
			}
			ev := <-out.GetStream().Events()
			out.GetStream().Close()
			got, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
			if !ok || len(got.Value.Records) == 0 || string(got.Value.Records[len(got.Value.Records)-1].Data) != c.name {
				t.Fatalf("first event %#v, want the records up to %q", ev, c.name)
			}
			if n := e.srv.AccessKeyUses()[c.key.AccessKeyID] - before; n != 2 {
				t.Errorf("%d requests verified with %s, want 2", n, c.key.AccessKeyID)
			}
		})
		e.clock.Advance(10 * time.Second) // past the resubscribe window
	}
}

// signedRequest builds a ListStreams request signed by aws-sdk-go-v2's
// signer at signingTime, then applies tamper.
func signedRequest(t *testing.T, url string, key kinesistest.Credential, signingTime time.Time, tamper func(*http.Request)) *http.Request {
	t.Helper()
	body := []byte(`{}`)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "Kinesis_20131202.ListStreams")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(t.Context(), aws.Credentials{AccessKeyID: key.AccessKeyID, SecretAccessKey: key.SecretAccessKey},
		req, hex.EncodeToString(sum[:]), "kinesis", "eu-west-1", signingTime); err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		tamper(req)
	}
	return req
}

// TestSigV4Refusals checks each way a request can fail authentication, with
// the service's code and status.
func TestSigV4Refusals(t *testing.T) {
	e := newSigV4Env(t)
	now := time.Now()
	for _, c := range []struct {
		name   string
		req    *http.Request
		code   string
		phrase string
	}{
		{"unsigned", signedRequest(t, e.srv.URL(), kinesistest.TestCredential, now, func(r *http.Request) { r.Header.Del("Authorization") }),
			"MissingAuthenticationTokenException", "Missing Authentication Token"},
		{"unknown key", signedRequest(t, e.srv.URL(), kinesistest.Credential{AccessKeyID: "AKIANOBODY", SecretAccessKey: "x"}, now, nil),
			"UnrecognizedClientException", "security token included in the request is invalid"},
		{"wrong secret", signedRequest(t, e.srv.URL(), kinesistest.Credential{AccessKeyID: otherKey.AccessKeyID, SecretAccessKey: "wrong"}, now, nil),
			"InvalidSignatureException", "does not match the signature you provided"},
		{"signed header changed", signedRequest(t, e.srv.URL(), kinesistest.TestCredential, now, func(r *http.Request) {
			r.Header.Set("X-Amz-Target", "Kinesis_20131202.DeleteStream")
		}), "InvalidSignatureException", "does not match the signature you provided"},
		{"body changed", signedRequest(t, e.srv.URL(), kinesistest.TestCredential, now, func(r *http.Request) {
			r.Body = http.NoBody
			r.Body, r.ContentLength = nopCloser(`{"Limit":1}`), 11
		}), "InvalidSignatureException", "does not match the signature you provided"},
		{"ten minutes old", signedRequest(t, e.srv.URL(), kinesistest.TestCredential, now.Add(-10*time.Minute), nil),
			"InvalidSignatureException", "Signature expired"},
		{"signed for sts", signedRequest(t, e.srv.URL(), kinesistest.TestCredential, now, func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/kinesis/", "/sts/", 1))
		}), "InvalidSignatureException", "scoped to correct service"},
		{"not SigV4", signedRequest(t, e.srv.URL(), kinesistest.TestCredential, now, func(r *http.Request) {
			r.Header.Set("Authorization", "AWS AKIAKINESISTEST:c2lnbmF0dXJl")
		}), "IncompleteSignatureException", "AWS4-HMAC-SHA256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := kinesistest.HTTPClient().Do(c.req)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			b.ReadFrom(resp.Body) //nolint:errcheck // checked through its content
			resp.Body.Close()
			if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != c.code || !strings.Contains(b.String(), c.phrase) {
				t.Errorf("got %d %s %s, want 400 %s containing %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), b.String(), c.code, c.phrase)
			}
		})
	}
	if n := e.srv.CallCount("ListStreams") + e.srv.CallCount("DeleteStream"); n != 8 {
		t.Errorf("%d calls counted, want 8", n)
	}

	// Through the SDK, a wrong secret is its typed error... the SDK has no
	// type for it, so a generic API error with the code.
	kc := e.srv.Client(withKeys(kinesistest.TestCredential.AccessKeyID, "not-the-secret", ""), func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	_, err := kc.ListStreams(e.ctx, &kinesis.ListStreamsInput{})
	wantAPIError(t, err, "InvalidSignatureException", "")
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != 400 {
		t.Errorf("wrong secret: %v, want HTTP 400", err)
	}
}

// TestSTSAssumeRole assumes a role through the server's STS with the SDK's
// STS client and uses the temporary credentials for Kinesis calls.
func TestSTSAssumeRole(t *testing.T) {
	e := newSigV4Env(t)
	e.createStream("roles", 1)
	stsClient := func(key kinesistest.Credential) *sts.Client {
		return sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.srv.URL()), RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(key.AccessKeyID, key.SecretAccessKey, "")})
	}
	const role = "arn:aws:iam::123456789012:role/reader"
	out, err := stsClient(otherKey).AssumeRole(e.ctx, &sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("beam-job"), DurationSeconds: aws.Int32(900)})
	if err != nil {
		t.Fatalf("AssumeRole: %v", err)
	}
	c := out.Credentials
	if !strings.HasPrefix(aws.ToString(c.AccessKeyId), "ASIA") || aws.ToString(c.SessionToken) == "" ||
		c.Expiration.Sub(time.Now()) > 901*time.Second || c.Expiration.Sub(time.Now()) < 800*time.Second {
		t.Errorf("credentials %s, token %d bytes, expiring %v", aws.ToString(c.AccessKeyId), len(aws.ToString(c.SessionToken)), c.Expiration)
	}
	if got := aws.ToString(out.AssumedRoleUser.Arn); got != "arn:aws:sts::123456789012:assumed-role/reader/beam-job" {
		t.Errorf("AssumedRoleUser.Arn %s", got)
	}
	roles := e.srv.AssumedRoles()
	if len(roles) != 1 || roles[0] != (kinesistest.AssumedRole{RoleARN: role, SessionName: "beam-job", AccessKeyID: aws.ToString(c.AccessKeyId), CallerKeyID: otherKey.AccessKeyID}) {
		t.Errorf("AssumedRoles %+v", roles)
	}

	temp := e.srv.Client(withKeys(aws.ToString(c.AccessKeyId), aws.ToString(c.SecretAccessKey), aws.ToString(c.SessionToken)), func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	if _, err := temp.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String("roles"), PartitionKey: aws.String("k"), Data: []byte("x")}); err != nil {
		t.Fatalf("PutRecord with the temporary credentials: %v", err)
	}
	if n := e.srv.AccessKeyUses()[aws.ToString(c.AccessKeyId)]; n != 1 {
		t.Errorf("temporary key used %d times, want 1", n)
	}
	noToken := e.srv.Client(withKeys(aws.ToString(c.AccessKeyId), aws.ToString(c.SecretAccessKey), ""), func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	_, err = noToken.ListStreams(e.ctx, &kinesis.ListStreamsInput{})
	wantAPIError(t, err, "UnrecognizedClientException", "")

	// STS checks its callers too, in its own words.
	_, err = stsClient(kinesistest.Credential{AccessKeyID: otherKey.AccessKeyID, SecretAccessKey: "wrong"}).AssumeRole(e.ctx,
		&sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("s2")})
	wantAPIError(t, err, "SignatureDoesNotMatch", "")
	_, err = stsClient(otherKey).AssumeRole(e.ctx, &sts.AssumeRoleInput{RoleArn: aws.String("reader"), RoleSessionName: aws.String("s2")})
	wantAPIError(t, err, "ValidationError", "")
	if n := len(e.srv.AssumedRoles()); n != 1 {
		t.Errorf("%d roles assumed, want 1", n)
	}
}

type stringBody struct{ *strings.Reader }

func (stringBody) Close() error { return nil }

func nopCloser(s string) stringBody { return stringBody{strings.NewReader(s)} }
