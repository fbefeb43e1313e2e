// Package awsconf loads the AWS SDK configuration of beamkinesis's clients (Kinesis,
// DynamoDB for the checkpoint table, S3 for transforms/filesink) from one set of settings
// that travels to the workers: region, endpoint, shared config profile, static
// credentials and a role to assume.
//
// Settings redact their secrets when printed, so they may appear in logs and display data.
package awsconf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/errkind"
)

// EndpointRegion is the signing region used when an endpoint is given without a region:
// local AWS-compatible servers accept any region, and the SDK refuses to sign without one.
const EndpointRegion = "us-east-1"

// ErrNoRegion is returned by Load when neither the settings nor the environment name a
// region and no endpoint is set.
var ErrNoRegion = errors.New("no AWS region configured")

// Settings say how a client reaches AWS. Empty fields leave the AWS SDK's defaults: the
// region and credentials of the default chain on the worker (environment, shared config,
// instance or task role).
type Settings struct {
	// Region is the AWS region, e.g. "eu-west-1".
	Region string
	// Endpoint replaces the regional endpoint, e.g. a local server. Load does not apply
	// it (each service client takes it as its BaseEndpoint); it only lets Load default the
	// signing region to EndpointRegion.
	Endpoint string
	// Profile names a profile of the shared AWS config and credentials files.
	Profile string
	// AccessKeyID, SecretAccessKey and SessionToken are static credentials.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// RoleARN is a role to assume through STS, with RoleSessionName as its session name.
	RoleARN         string
	RoleSessionName string
}

// String describes the settings with the access key, secret and session token redacted.
func (s Settings) String() string {
	return fmt.Sprintf("{Region:%q Endpoint:%q Profile:%q AccessKeyID:%s SecretAccessKey:%s SessionToken:%s RoleARN:%q RoleSessionName:%q}",
		s.Region, s.Endpoint, s.Profile, redact(s.AccessKeyID), redact(s.SecretAccessKey), redact(s.SessionToken),
		s.RoleARN, s.RoleSessionName)
}

// GoString makes %#v redact too.
func (s Settings) GoString() string { return s.String() }

// CredentialsSource names where credentials come from, without revealing them, for logs
// and display data: "default credential chain", "shared config profile \"p\"" or "static
// credentials", with ", assuming role <arn>" when a role is assumed.
func (s Settings) CredentialsSource() string {
	src := "default credential chain"
	if s.Profile != "" {
		src = fmt.Sprintf("shared config profile %q", s.Profile)
	}
	if s.AccessKeyID != "" {
		src = "static credentials"
	}
	if s.RoleARN != "" {
		src += fmt.Sprintf(", assuming role %s", s.RoleARN)
	}
	return src
}

// Load returns the AWS configuration of s: its region (EndpointRegion when only an
// endpoint is set), its credentials (whose errors match kinesisio.ErrNoCredentials, or
// kinesisio.ErrAccessDenied when a role may not be assumed), and an HTTP client that keeps an idle connection for
// every shard a worker serves and works around aws/aws-sdk-go-v2#1825. The SDK's own
// retries are left as they are; callers that retry themselves turn them off on their
// service client.
func Load(ctx context.Context, s Settings) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if s.Region != "" {
		opts = append(opts, awsconfig.WithRegion(s.Region))
	}
	if s.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(s.Profile))
	}
	if s.AccessKeyID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(s.AccessKeyID, s.SecretAccessKey, s.SessionToken)))
	}
	opts = append(opts, awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		// One client serves every shard a worker reads or writes; keep enough idle
		// connections for all of them instead of the net/http default of 2 per host.
		t.MaxIdleConnsPerHost = 256
		t.IdleConnTimeout = 90 * time.Second
	})))
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration (%s): %w", s.CredentialsSource(), err)
	}
	// Wrapped only after loading: with AWS_CA_BUNDLE set, LoadDefaultConfig needs the
	// *awshttp.BuildableClient itself to add the bundle's root CAs.
	cfg.HTTPClient = bodyShieldClient{cfg.HTTPClient}
	if cfg.Region == "" {
		if s.Endpoint == "" {
			return aws.Config{}, ErrNoRegion
		}
		cfg.Region = EndpointRegion
	}
	if s.RoleARN != "" {
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), s.RoleARN,
			func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = s.RoleSessionName }))
	}
	if cfg.Credentials != nil {
		cfg.Credentials = markedCredentials{cfg.Credentials}
	}
	return cfg, nil
}

// markedCredentials marks the errors of retrieving credentials with their kind, so that a
// call that had none matches kinesisio.ErrNoCredentials through the SDK's wrapping.
type markedCredentials struct{ next aws.CredentialsProvider }

// Retrieve retrieves the credentials of the provider it wraps.
func (m markedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := m.next.Retrieve(ctx)
	return c, errkind.Credentials(err)
}

// IsCredentialsProvider lets aws.IsCredentialsProvider see the provider it wraps.
func (m markedCredentials) IsCredentialsProvider(target aws.CredentialsProvider) bool {
	return aws.IsCredentialsProvider(m.next, target)
}

// bodyShieldClient hands net/http request bodies without io.WriterTo. aws-sdk-go-v2 closes a
// request body as soon as the response headers arrive; when the server answers before
// net/http has finished writing the body, net/http reads the closed body through WriterTo,
// takes the error for a failed write and closes the connection under the response being
// read (aws/aws-sdk-go-v2#1825, #2737). A fast endpoint triggers it on large requests, and a
// PutRecords retried after it stores its records twice. A plain Reader sees a clean end of
// body instead.
type bodyShieldClient struct{ next awsconfig.HTTPClient }

// Do sends req with its body stripped of io.WriterTo.
func (c bodyShieldClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = struct{ io.ReadCloser }{req.Body}
	}
	return c.next.Do(req)
}

func redact(v string) string {
	if v == "" {
		return `""`
	}
	return `"<redacted>"`
}
