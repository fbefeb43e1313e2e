package preflight

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/awsconf"
)

// attempts is how many times a check sends its call: once more after a dropped connection
// or a 5xx, not the SDK's default three, so that a check fails within seconds.
const attempts = 2

// stream checks that s exists and answers: DescribeStreamSummary, or ListShards for one
// shard when the identity may not describe the stream (a read or a write needs ListShards,
// not DescribeStreamSummary).
func (c *checker) stream(ctx context.Context, s Stream) error {
	client := kinesis.NewFromConfig(c.cfg, func(o *kinesis.Options) {
		if c.plan.Kinesis.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.plan.Kinesis.Endpoint)
		}
		o.RetryMaxAttempts = attempts
	})
	ctx, cancel := context.WithTimeout(ctx, c.plan.Timeout)
	defer cancel()
	in := &kinesis.DescribeStreamSummaryInput{}
	list := &kinesis.ListShardsInput{MaxResults: aws.Int32(1)}
	if isARN(s.Name) {
		in.StreamARN, list.StreamARN = aws.String(s.Name), aws.String(s.Name)
	} else {
		in.StreamName, list.StreamName = aws.String(s.Name), aws.String(s.Name)
	}
	_, err := client.DescribeStreamSummary(ctx, in)
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException" {
		_, err = client.ListShards(ctx, list)
	}
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("stream %s (%s)", s.Name, s.Flag)
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		where := "in region " + c.cfg.Region
		if c.plan.Kinesis.Endpoint != "" {
			where = "at " + c.plan.Kinesis.Endpoint
		}
		return fail(kinesisio.ErrStreamNotFound, err, "%s does not exist %s (%s): check %s, and that the stream is in %s", what, where, notFound.ErrorMessage(), s.Flag, c.regionFrom())
	}
	if e := c.refused(err, "Kinesis", c.plan.Kinesis.Endpoint, "--kinesis_endpoint", what); e != nil {
		return e
	}
	return fail(nil, err, "checking %s: %v", what, err)
}

// queue checks that q exists, answers and can deliver records (DescribeQueue): a queue
// being created or deleted, or whose stream is gone, delivers nothing.
func (c *checker) queue(ctx context.Context, q Queue) error {
	client := kinesis.NewFromConfig(c.cfg, func(o *kinesis.Options) {
		if c.plan.Kinesis.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.plan.Kinesis.Endpoint)
		}
		o.RetryMaxAttempts = attempts
	})
	ctx, cancel := context.WithTimeout(ctx, c.plan.Timeout)
	defer cancel()
	out, err := client.DescribeQueue(ctx, &kinesis.DescribeQueueInput{QueueARN: aws.String(q.ARN)})
	what := fmt.Sprintf("queue %s (%s)", q.ARN, q.Flag)
	if err == nil {
		switch st := out.QueueDescription.QueueStatus; st {
		case types.QueueStatusActive, types.QueueStatusUpdating, types.QueueStatusCreating:
			return nil
		default:
			return fail(nil, nil, "%s is %s and delivers nothing: give %s a queue that is ACTIVE", what, st, q.Flag)
		}
	}
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		where := "in region " + c.cfg.Region
		if c.plan.Kinesis.Endpoint != "" {
			where = "at " + c.plan.Kinesis.Endpoint
		}
		return fail(nil, err, "%s does not exist %s (%s): check %s, and that the queue is in %s", what, where, notFound.ErrorMessage(), q.Flag, c.regionFrom())
	}
	if e := c.refused(err, "Kinesis", c.plan.Kinesis.Endpoint, "--kinesis_endpoint", what); e != nil {
		return e
	}
	return fail(nil, err, "checking %s: %v", what, err)
}

// isARN reports whether a stream flag holds an ARN rather than a name.
func isARN(s string) bool { return len(s) > 4 && s[:4] == "arn:" }

// table checks that the checkpoint table answers. A table that does not exist is no
// failure: the job creates it; the note says so, since a misspelt name starts from
// --starting_position again.
func (c *checker) table(ctx context.Context) (note string, err error) {
	t := c.plan.Table
	client := dynamodb.NewFromConfig(c.cfg, func(o *dynamodb.Options) {
		if t.Endpoint != "" {
			o.BaseEndpoint = aws.String(t.Endpoint)
		}
		o.RetryMaxAttempts = attempts
	})
	ctx, cancel := context.WithTimeout(ctx, c.plan.Timeout)
	defer cancel()
	_, err = client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)})
	var missing *dynamotypes.ResourceNotFoundException
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &missing):
		where := "in region " + c.cfg.Region
		if t.Endpoint != "" {
			where = "at " + t.Endpoint
		}
		return fmt.Sprintf("checkpoint table %s (--checkpoint_table) does not exist %s yet: the job creates it, and reads every shard from --starting_position", t.Name, where), nil
	}
	what := fmt.Sprintf("checkpoint table %s (--checkpoint_table)", t.Name)
	if e := c.refused(err, "DynamoDB", t.Endpoint, "--checkpoint_table_endpoint", what); e != nil {
		return "", e
	}
	return "", fail(nil, err, "checking %s: %v", what, err)
}

// bucket checks that the S3 bucket exists and answers (HeadBucket), in the region the
// pipeline's S3 client signs for.
func (c *checker) bucket(ctx context.Context) error {
	b := c.plan.S3
	settings := c.plan.Kinesis
	settings.Endpoint, settings.Region = b.Endpoint, b.Region
	if settings.Region == "" {
		settings.Region = c.plan.Kinesis.Region
	}
	cfg, err := awsconf.Load(ctx, settings)
	if errors.Is(err, awsconf.ErrNoRegion) {
		return fail(nil, err, "no AWS region for the bucket of --staging_dir=%s: give --s3_region or --kinesis_region, or set AWS_REGION", b.Dir)
	}
	if err != nil {
		return fail(nil, err, "%v", err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if b.Endpoint != "" {
			o.BaseEndpoint = aws.String(b.Endpoint)
			o.UsePathStyle = true
		}
		o.RetryMaxAttempts = attempts
	})
	ctx, cancel := context.WithTimeout(ctx, c.plan.Timeout)
	defer cancel()
	_, err = client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.Bucket)})
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("bucket %s of --staging_dir=%s", b.Bucket, b.Dir)
	var notFound *s3types.NotFound
	var resp *awshttp.ResponseError
	switch {
	case errors.As(err, &notFound):
		return fail(nil, err, "%s does not exist: create it, or give --staging_dir a bucket that does", what)
	case errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusMovedPermanently:
		if region := resp.Response.Header.Get("X-Amz-Bucket-Region"); region != "" {
			return fail(nil, err, "%s is in region %s, not %s: give --s3_region=%s", what, region, cfg.Region, region)
		}
	case errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusForbidden:
		return fail(kinesisio.ErrAccessDenied, err, "the AWS identity of the %s may not use %s (HTTP 403 Forbidden): allow it s3:ListBucket and s3:PutObject there, or give --role_arn or --aws_profile for one that may", settings.CredentialsSource(), what)
	}
	if e := c.refused(err, "S3", b.Endpoint, "--s3_endpoint", what); e != nil {
		return e
	}
	return fail(nil, err, "checking %s: %v", what, err)
}
