package kinesisio

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// defaultEndpointRegion is the signing region used when an endpoint is given without a region:
// local Kinesis-compatible servers accept any region, and the SDK refuses to sign without one.
const defaultEndpointRegion = "us-east-1"

// newClient builds a Kinesis client from cfg. The SDK's own retries are off: the connector
// retries with its own policy (internal/backoff) so that the two layers do not multiply and
// every retry is counted in its metrics.
func newClient(ctx context.Context, cfg clientConfig) (*kinesis.Client, error) {
	awsCfg, err := loadAWSConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return kinesis.NewFromConfig(awsCfg, func(o *kinesis.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.Retryer = aws.NopRetryer{}
	}), nil
}

// loadAWSConfig is the region, credentials and HTTP client of cfg, shared by the Kinesis
// client and the checkpoint table's DynamoDB client.
func loadAWSConfig(ctx context.Context, cfg clientConfig) (aws.Config, error) {
	var loadOpts []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		loadOpts = append(loadOpts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Profile != "" {
		loadOpts = append(loadOpts, awsconfig.WithSharedConfigProfile(cfg.Profile))
	}
	if cfg.AccessKeyID != "" {
		loadOpts = append(loadOpts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	loadOpts = append(loadOpts, awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		// One client serves every shard a worker reads or writes; keep enough idle
		// connections for all of them instead of the net/http default of 2 per host.
		t.MaxIdleConnsPerHost = 256
		t.IdleConnTimeout = 90 * time.Second
	})))
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("kinesisio: loading AWS configuration (%s): %w", cfg.credentialsSource(), err)
	}
	// Wrapped only after loading: with AWS_CA_BUNDLE set, LoadDefaultConfig needs the
	// *awshttp.BuildableClient itself to add the bundle's root CAs.
	awsCfg.HTTPClient = bodyShieldClient{awsCfg.HTTPClient}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return aws.Config{}, fmt.Errorf("kinesisio: no AWS region configured; pass kinesisio.WithRegion or set AWS_REGION")
		}
		awsCfg.Region = defaultEndpointRegion
	}
	if cfg.RoleARN != "" {
		stsClient := sts.NewFromConfig(awsCfg)
		awsCfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsClient, cfg.RoleARN,
			func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = cfg.RoleSessionName }))
	}
	return awsCfg, nil
}

// bodyShieldClient hands net/http request bodies without io.WriterTo. aws-sdk-go-v2 closes a
// request body as soon as the response headers arrive; when the server answers before
// net/http has finished writing the body, net/http reads the closed body through WriterTo,
// takes the error for a failed write and closes the connection under the response being
// read (aws/aws-sdk-go-v2#1825, #2737). A fast endpoint triggers it on large requests, and a
// PutRecords retried after it stores its records twice. A plain Reader sees a clean end of
// body instead.
type bodyShieldClient struct{ next awsconfig.HTTPClient }

func (c bodyShieldClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = struct{ io.ReadCloser }{req.Body}
	}
	return c.next.Do(req)
}
