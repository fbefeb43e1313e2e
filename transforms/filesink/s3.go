package filesink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/beamkinesis/beamkinesis/kinesisio/awsconf"
)

// maxPutObjectSize is the largest object a single PutObject may create (5 GiB).
const maxPutObjectSize = 5 << 30

// S3 is how Write reaches S3 for an s3:// Dir: the fields of awsconf.Settings, the same
// choices as kinesisio's client options. Empty fields leave the AWS SDK's defaults: the
// region and credentials of the default chain on the worker (environment, shared config,
// instance or task role). With an Endpoint (e.g. http://127.0.0.1:5000 for a local
// S3-compatible server) requests use path-style addressing (http://host/bucket/key), which
// local servers need. It travels to the workers inside the DoFns; its String method redacts
// the secret and session token.
//
// Beam Go's own s3 filesystem (beam/io/filesystem/s3) is not used for s3:// paths: it
// builds its client from the worker's environment only, so neither an endpoint nor
// credentials chosen when the pipeline is built can reach remote workers.
type S3 awsconf.Settings

// String describes the configuration with credentials redacted.
func (c S3) String() string { return awsconf.Settings(c).String() }

// GoString makes %#v redact too.
func (c S3) GoString() string { return c.String() }

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
	awsCfg, err := awsconf.Load(ctx, awsconf.Settings(cfg))
	if errors.Is(err, awsconf.ErrNoRegion) {
		return nil, fmt.Errorf("S3 %s: %w; set S3.Region or AWS_REGION", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("S3 %s: %w", dir, err)
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
