// Package preflight checks, on the launching machine and before any runner starts, that a
// pipeline can reach what it reads and writes: the AWS region and credentials resolve, each
// stream exists and answers (DescribeStreamSummary, which proves the credentials are
// accepted and the endpoint reachable), and the checkpoint table and the S3 bucket answer
// when the pipeline has them. It makes one call of each kind, with a short timeout, and a
// failed check is an *Error whose message is one line: what was wrong and what to do,
// naming the flag or the environment variable to change.
//
// The launcher's identity is not always the workers' (a Dataflow or Flink worker may have a
// role of its own), so a pipeline lets its user skip the checks.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/awsconf"
)

// DefaultTimeout bounds each check's call (its retries included) when Plan.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// Plan is what a pipeline is about to use.
type Plan struct {
	// Kinesis is how the pipeline reaches Kinesis; the table and S3 use its credentials.
	Kinesis awsconf.Settings
	// Streams are the streams it reads or writes, each with the flag that named it.
	Streams []Stream
	// Queues are the Kinesis queues it reads, each with the flag that named it.
	Queues []Queue
	// Table is its checkpoint table; an empty Name is none.
	Table Table
	// S3 is the bucket it writes to; an empty Bucket is none.
	S3 S3
	// Demo says how to run the pipeline without AWS, e.g. "without --stream, wordcount runs
	// its embedded demo, which needs no AWS account"; it ends the line about credentials.
	Demo string
	// Timeout bounds each call; 0 is DefaultTimeout.
	Timeout time.Duration
}

// Stream is a stream a pipeline uses and the flag that named it ("--stream").
type Stream struct {
	Name, Flag string
}

// Queue is a Kinesis queue a pipeline reads, by its ARN, and the flag that named it
// ("--queue").
type Queue struct {
	ARN, Flag string
}

// Table is a checkpoint table (--checkpoint_table) and its endpoint
// (--checkpoint_table_endpoint; empty: the regional one).
type Table struct {
	Name, Endpoint string
}

// S3 is a bucket a pipeline writes to: Dir is the flag's value (s3://bucket/prefix) for
// messages, Endpoint and Region the S3 flags' values.
type S3 struct {
	Bucket, Dir      string
	Endpoint, Region string
}

// Error is a failed check. Its message is one line; Kind, when not nil, is the kinesisio
// error it matches (kinesisio.ErrStreamNotFound, ErrNoCredentials, ErrAccessDenied), and Err
// the error the check met.
type Error struct {
	Line string
	Kind error
	Err  error
}

func (e *Error) Error() string { return e.Line }

// Unwrap lets errors.Is and errors.As see the kind and the error met.
func (e *Error) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Kind, e.Err} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// fail is a failed check whose line is format's.
func fail(kind, err error, format string, args ...any) *Error {
	return &Error{Line: fmt.Sprintf(format, args...), Kind: kind, Err: err}
}

// Run makes the checks of p in order (region and credentials, each stream, the table, the
// bucket) and returns the first that fails. notes are lines worth saying when nothing
// failed, e.g. that the checkpoint table does not exist yet and the job will create it. A
// plan without streams or queues (a pipeline's embedded demo) checks nothing.
func Run(ctx context.Context, p Plan) (notes []string, err error) {
	if len(p.Streams) == 0 && len(p.Queues) == 0 {
		return nil, nil
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultTimeout
	}
	c := checker{plan: p}
	if err := c.identity(ctx); err != nil {
		return nil, err
	}
	for _, q := range p.Queues {
		if err := c.queue(ctx, q); err != nil {
			return nil, err
		}
	}
	for _, s := range p.Streams {
		if err := c.stream(ctx, s); err != nil {
			return nil, err
		}
	}
	if p.Table.Name != "" {
		note, err := c.table(ctx)
		if err != nil {
			return nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	if p.S3.Bucket != "" {
		if err := c.bucket(ctx); err != nil {
			return nil, err
		}
	}
	return notes, nil
}

// checker holds what the checks found so far.
type checker struct {
	plan Plan
	cfg  aws.Config // the Kinesis configuration, region resolved
}

// regionName is the form of every AWS region's name: eu-west-1, us-gov-west-1,
// ap-southeast-5, eusc-de-east-1.
var regionName = regexp.MustCompile(`^[a-z]{2,}(-[a-z]+)+-[0-9]+$`)

// regionFrom names the region and where it came from.
func (c *checker) regionFrom() string {
	switch r := c.cfg.Region; {
	case c.plan.Kinesis.Region != "":
		return "--kinesis_region=" + c.plan.Kinesis.Region
	case os.Getenv("AWS_REGION") == r:
		return "AWS_REGION=" + r
	case os.Getenv("AWS_DEFAULT_REGION") == r:
		return "AWS_DEFAULT_REGION=" + r
	case c.plan.Kinesis.Endpoint != "" && r == awsconf.EndpointRegion:
		return fmt.Sprintf("region %s (the default with --kinesis_endpoint and no --kinesis_region)", r)
	}
	return fmt.Sprintf("region %s (from the shared AWS config)", c.cfg.Region)
}

// identity resolves the region and the credentials.
func (c *checker) identity(ctx context.Context) error {
	cfg, err := awsconf.Load(ctx, c.plan.Kinesis)
	switch {
	case errors.Is(err, awsconf.ErrNoRegion):
		return fail(nil, err, "no AWS region for Kinesis: give --kinesis_region (e.g. --kinesis_region=eu-west-1) or set AWS_REGION")
	case err != nil:
		return fail(nil, err, "%v: check --aws_profile (or AWS_PROFILE) and the shared AWS config files", err)
	}
	c.cfg = cfg
	if !regionName.MatchString(cfg.Region) {
		return fail(nil, nil, "%s is not an AWS region name such as eu-west-1: give --kinesis_region the region of the stream", c.regionFrom())
	}
	ctx, cancel := context.WithTimeout(ctx, c.plan.Timeout)
	defer cancel()
	_, err = cfg.Credentials.Retrieve(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kinesisio.ErrAccessDenied) && c.plan.Kinesis.RoleARN != "":
		return fail(kinesisio.ErrAccessDenied, err, "assuming role %s was refused (%s): check --role_arn, and that the credentials the launcher has may assume it", c.plan.Kinesis.RoleARN, apiSummary(err))
	case c.plan.Kinesis.Profile != "":
		return fail(kinesisio.ErrNoCredentials, err, "no AWS credentials from profile %q of --aws_profile (%v): check the profile in the shared config and credentials files", c.plan.Kinesis.Profile, err)
	}
	line := "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile with --aws_profile (or AWS_PROFILE), or run where an instance or task role provides them"
	if c.plan.Demo != "" {
		line += "; " + c.plan.Demo
	}
	return fail(kinesisio.ErrNoCredentials, err, "%s", line)
}

// kinesisEndpoint names where Kinesis calls go.
func (c *checker) kinesisEndpoint() string {
	if c.plan.Kinesis.Endpoint != "" {
		return c.plan.Kinesis.Endpoint
	}
	return "https://kinesis." + c.cfg.Region + ".amazonaws.com"
}

// endpointFix says what to check when an endpoint does not answer: the flag that set it,
// else the region.
func (c *checker) endpointFix(flag, endpoint string) string {
	if endpoint != "" {
		return fmt.Sprintf("check %s and that the server runs", flag)
	}
	return fmt.Sprintf("check %s and the network", c.regionFrom())
}

// refused turns an error of a call to service (Kinesis, DynamoDB, S3) that AWS refused
// for its credentials or could not get to into a line, or returns nil for other errors.
// what names the resource; endpointFlag is the flag that set the service's endpoint.
func (c *checker) refused(err error, service, endpoint, endpointFlag, what string) *Error {
	at := endpoint
	if at == "" {
		at = "its regional endpoint"
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		code, msg := api.ErrorCode(), api.ErrorMessage()
		switch {
		case code == "UnrecognizedClientException" || code == "InvalidClientTokenId" || code == "InvalidAccessKeyId":
			return fail(kinesisio.ErrAccessDenied, err, "%s does not recognise the AWS access key of the %s (%s: %s): check AWS_ACCESS_KEY_ID (or the profile's key), and that it belongs to the account of %s",
				service, c.plan.Kinesis.CredentialsSource(), code, msg, what)
		case code == "ExpiredTokenException" || code == "ExpiredToken" || code == "RequestExpired":
			return fail(kinesisio.ErrAccessDenied, err, "the AWS session token has expired (%s: %s): get fresh credentials (e.g. aws sso login, or a new AWS_SESSION_TOKEN with its AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", code, msg)
		case strings.Contains(msg, "scoped to a valid region"):
			return fail(kinesisio.ErrAccessDenied, err, "%s at %s refused requests signed for %s (%s: %s): give --kinesis_region the region of that endpoint",
				service, at, c.regionFrom(), code, strings.TrimSpace(msg))
		case code == "InvalidSignatureException" || code == "SignatureDoesNotMatch":
			return fail(kinesisio.ErrAccessDenied, err, "%s refused the signature of the request (%s: %s): check AWS_SECRET_ACCESS_KEY (or the profile's secret), and this machine's clock", service, code, msg)
		case code == "AccessDeniedException" || code == "AccessDenied" || code == "KMSAccessDeniedException" || code == "Forbidden":
			return fail(kinesisio.ErrAccessDenied, err, "the AWS identity of the %s may not use %s (%s: %s): allow it the pipeline's actions on it, or give --role_arn or --aws_profile for one that may",
				c.plan.Kinesis.CredentialsSource(), what, code, msg)
		}
		return nil
	}
	if errors.Is(err, kinesisio.ErrNoCredentials) {
		return fail(kinesisio.ErrNoCredentials, err, "no AWS credentials for %s: %v", service, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fail(nil, err, "%s at %s did not answer within %v: %s", service, at, c.plan.Timeout, c.endpointFix(endpointFlag, endpoint))
	}
	var netErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		return fail(nil, err, "cannot reach %s at %s (%v): %s", service, at, dnsErr, c.endpointFix(endpointFlag, endpoint))
	case errors.As(err, &netErr):
		return fail(nil, err, "cannot reach %s at %s (%v): %s", service, at, netErr, c.endpointFix(endpointFlag, endpoint))
	}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) && resp.HTTPStatusCode() >= 500 {
		return fail(nil, err, "%s at %s answered HTTP %d: %s", service, at, resp.HTTPStatusCode(), c.endpointFix(endpointFlag, endpoint))
	}
	return nil
}

// apiSummary is "code: message" of the AWS API error in err, or err's text.
func apiSummary(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode() + ": " + api.ErrorMessage()
	}
	return err.Error()
}
