package kinesisio

import (
	"context"
	"fmt"
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
		return nil, fmt.Errorf("kinesisio: loading AWS configuration (%s): %w", cfg.credentialsSource(), err)
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return nil, fmt.Errorf("kinesisio: no AWS region configured; pass kinesisio.WithRegion or set AWS_REGION")
		}
		awsCfg.Region = defaultEndpointRegion
	}
	if cfg.RoleARN != "" {
		stsClient := sts.NewFromConfig(awsCfg)
		awsCfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsClient, cfg.RoleARN,
			func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = cfg.RoleSessionName }))
	}
	return kinesis.NewFromConfig(awsCfg, func(o *kinesis.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.Retryer = aws.NopRetryer{}
	}), nil
}
