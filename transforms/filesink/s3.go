package filesink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// maxPutObjectSize is the largest object a single PutObject may create (5 GiB).
const maxPutObjectSize = 5 << 30

// defaultS3Region is the signing region used with an Endpoint and no Region: local
// S3-compatible servers accept any region, and the SDK refuses to sign without one.
const defaultS3Region = "us-east-1"

// S3 is how Write reaches S3 for an s3:// Dir, with the same credential choices as
// kinesisio's client options. Empty fields leave the AWS SDK's defaults: the region and
// credentials of the default chain on the worker (environment, shared config, instance or
// task role). It travels to the workers inside the DoFns; its String method redacts the
// secret and session token.
//
// Beam Go's own s3 filesystem (beam/io/filesystem/s3) is not used for s3:// paths: it
// builds its client from the worker's environment only, so neither an endpoint nor
// credentials chosen when the pipeline is built can reach remote workers.
type S3 struct {
	// Region is the bucket's AWS region, e.g. "eu-west-1".
	Region string
	// Endpoint replaces the regional endpoint, e.g. http://127.0.0.1:5000 for a local
	// S3-compatible server. With an endpoint, requests use path-style addressing
	// (http://host/bucket/key), which local servers need.
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

// String describes the configuration with credentials redacted.
func (c S3) String() string {
	return fmt.Sprintf("{Region:%q Endpoint:%q Profile:%q AccessKeyID:%s SecretAccessKey:%s SessionToken:%s RoleARN:%q RoleSessionName:%q}",
		c.Region, c.Endpoint, c.Profile, redact(c.AccessKeyID), redact(c.SecretAccessKey), redact(c.SessionToken),
		c.RoleARN, c.RoleSessionName)
}

// GoString makes %#v redact too.
func (c S3) GoString() string { return c.String() }

func redact(s string) string {
	if s == "" {
		return `""`
	}
	return `"<redacted>"`
}

// validate reports an inconsistent configuration.
func (c S3) validate() error {
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return errors.New("S3.AccessKeyID and S3.SecretAccessKey must be set together")
	}
	if c.SessionToken != "" && c.AccessKeyID == "" {
		return errors.New("S3.SessionToken needs S3.AccessKeyID and S3.SecretAccessKey")
	}
	return nil
}

// parseS3URL splits s3://bucket/prefix into the bucket and the key prefix ("" or ending
// in '/').
func parseS3URL(dir string) (bucket, prefix string, err error) {
	rest := dir[len("s3://"):]
	bucket, prefix, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%q names no bucket; want s3://<bucket>/<prefix>", dir)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return bucket, prefix, nil
}

// s3Dir is a prefix in an S3 bucket. Each file is one PutObject of its complete content,
// so an object exists under its final key complete or not at all; a retried bundle puts
// the same bytes under the same key again.
type s3Dir struct {
	client         *s3.Client
	bucket, prefix string
}

// openS3 builds the client of cfg for dir.
func openS3(ctx context.Context, dir string, cfg S3) (destination, error) {
	bucket, prefix, err := parseS3URL(dir)
	if err != nil {
		return nil, err
	}
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
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration for S3: %w", err)
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return nil, errors.New("no AWS region configured for S3; set S3.Region or AWS_REGION")
		}
		awsCfg.Region = defaultS3Region
	}
	if cfg.RoleARN != "" {
		awsCfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(awsCfg), cfg.RoleARN,
			func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = cfg.RoleSessionName }))
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			o.UsePathStyle = true
		}
	})
	return s3Dir{client: client, bucket: bucket, prefix: prefix}, nil
}

func (d s3Dir) put(ctx context.Context, name string, content []byte) error {
	if len(content) > maxPutObjectSize {
		return fmt.Errorf("file is %d bytes, more than a single S3 PutObject takes (5 GiB); raise Shards", len(content))
	}
	// A seekable body with a known length: the SDK signs it and can resend it on a retry.
	_, err := d.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(d.bucket),
		Key:           aws.String(d.prefix + name),
		Body:          bytes.NewReader(content),
		ContentLength: aws.Int64(int64(len(content))),
	})
	if err != nil {
		return fmt.Errorf("putting s3://%s/%s%s: %w", d.bucket, d.prefix, name, err)
	}
	return nil
}

func (d s3Dir) path(name string) string { return "s3://" + d.bucket + "/" + d.prefix + name }

func (d s3Dir) close() error { return nil }
