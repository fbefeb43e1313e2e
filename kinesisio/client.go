package kinesisio

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio/awsconf"
)

// newClient builds a Kinesis client from cfg. The SDK's own retries are off: the connector
// retries with its own policy (internal/backoff) so that the two layers do not multiply and
// every retry is counted in its metrics.
func newClient(ctx context.Context, cfg clientConfig) (*kinesis.Client, error) {
	awsCfg, err := loadAWSConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return newClientFrom(awsCfg, cfg), nil
}

// newClientFrom is newClient with cfg's AWS configuration already loaded.
func newClientFrom(awsCfg aws.Config, cfg clientConfig) *kinesis.Client {
	return kinesis.NewFromConfig(awsCfg, func(o *kinesis.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.Retryer = aws.NopRetryer{}
	})
}

// loadAWSConfig is the region, credentials and HTTP client of cfg, shared by the Kinesis
// client and the checkpoint table's DynamoDB client.
func loadAWSConfig(ctx context.Context, cfg clientConfig) (aws.Config, error) {
	awsCfg, err := awsconf.Load(ctx, cfg.settings())
	if errors.Is(err, awsconf.ErrNoRegion) {
		return aws.Config{}, fmt.Errorf("kinesisio: %w; pass kinesisio.WithRegion or set AWS_REGION", err)
	}
	if err != nil {
		return aws.Config{}, fmt.Errorf("kinesisio: %w", err)
	}
	return awsCfg, nil
}
