package kinesistest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// apiCode returns the AWS error code and message of err, or fails t.
func apiCode(t *testing.T, err error) (string, string) {
	t.Helper()
	var api smithy.APIError
	if !errors.As(err, &api) {
		t.Fatalf("error %v is not an AWS API error", err)
	}
	return api.ErrorCode(), api.ErrorMessage()
}

// A server of one region refuses a request signed for another as the service's regional
// endpoints do, and answers its own region's.
func TestWithRegionRefusesRequestsSignedForAnotherRegion(t *testing.T) {
	srv, err := kinesistest.Start(kinesistest.WithRegion("eu-west-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("s", 1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in := &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")}
	_, err = srv.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 }).DescribeStreamSummary(ctx, in)
	code, msg := apiCode(t, err)
	if code != "InvalidSignatureException" || msg != "Credential should be scoped to a valid region, not 'us-east-1'. " {
		t.Errorf("signed for us-east-1: %s: %q; want InvalidSignatureException naming the region", code, msg)
	}
	out, err := srv.Client(func(o *kinesis.Options) { o.Region = "eu-west-1" }).DescribeStreamSummary(ctx, in)
	if err != nil {
		t.Fatalf("signed for eu-west-1: %v", err)
	}
	if arn := aws.ToString(out.StreamDescriptionSummary.StreamARN); arn != "arn:aws:kinesis:eu-west-1:"+kinesistest.AccountID+":stream/s" {
		t.Errorf("stream ARN %s; want one in eu-west-1", arn)
	}
}

// A temporary credential is accepted with its session token until it expires, and then
// refused with ExpiredTokenException.
func TestSessionCredentialsExpire(t *testing.T) {
	valid := kinesistest.Credential{AccessKeyID: "ASIAVALID", SecretAccessKey: "s1", SessionToken: "token-1", Expires: time.Now().Add(time.Hour)}
	expired := kinesistest.Credential{AccessKeyID: "ASIAEXPIRED", SecretAccessKey: "s2", SessionToken: "token-2", Expires: time.Now().Add(-time.Minute)}
	srv, err := kinesistest.Start(kinesistest.WithCredentials(valid, expired))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("s", 1); err != nil {
		t.Fatal(err)
	}
	call := func(c kinesistest.Credential, token string) error {
		client := srv.Client(func(o *kinesis.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, token)
			o.RetryMaxAttempts = 1
		})
		_, err := client.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
		return err
	}
	if err := call(valid, valid.SessionToken); err != nil {
		t.Errorf("a valid session credential: %v", err)
	}
	if code, _ := apiCode(t, call(valid, "")); code != "UnrecognizedClientException" {
		t.Errorf("a session credential without its token: %s; want UnrecognizedClientException", code)
	}
	if code, msg := apiCode(t, call(expired, expired.SessionToken)); code != "ExpiredTokenException" {
		t.Errorf("an expired session credential: %s: %s; want ExpiredTokenException", code, msg)
	}
}
