package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/clitest"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The mistakes of a user's first minute, each run through the wordcount command: it exits
// with status 1 and its last line (for a check before the launch, its only line) says what
// was wrong and what to do.
func TestTheFirstMinutesMistakesEndInOneLine(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("real", 2))
	regional := kinesistest.StartT(t, kinesistest.WithStream("real", 2), kinesistest.WithRegion("eu-west-1"))
	expired := kinesistest.Credential{AccessKeyID: "ASIAEXPIREDKEY", SecretAccessKey: "expired-secret", SessionToken: "expired-token", Expires: time.Now().Add(-time.Hour)}
	signed := kinesistest.StartT(t, kinesistest.WithStream("real", 2), kinesistest.WithCredentials(kinesistest.TestCredential, expired))
	keys := []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test"}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no credentials", nil, []string{"--stream=orders", "--kinesis_region=eu-west-1"},
			"wordcount: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile with --aws_profile (or AWS_PROFILE), or run where an instance or task role provides them; without --stream, wordcount runs its embedded demo, which needs no AWS account"},
		{"a stream that does not exist", keys, []string{"--stream=doesnotexist", "--kinesis_endpoint=" + srv.URL(), "--aws_credentials_from_env"},
			"wordcount: stream doesnotexist (--stream) does not exist at " + srv.URL() + " (Stream doesnotexist under account 123456789012 not found.): check --stream, and that the stream is in region us-east-1 (the default with --kinesis_endpoint and no --kinesis_region)"},
		{"an endpoint that is unreachable", keys, []string{"--stream=real", "--kinesis_endpoint=http://127.0.0.1:1", "--bounded=false"},
			"wordcount: cannot reach Kinesis at http://127.0.0.1:1 (dial tcp 127.0.0.1:1: connect: connection refused): check --kinesis_endpoint and that the server runs"},
		{"a wrong region", keys, []string{"--stream=real", "--kinesis_endpoint=" + regional.URL(), "--kinesis_region=eu-west-2"},
			"wordcount: Kinesis at " + regional.URL() + " refused requests signed for --kinesis_region=eu-west-2 (InvalidSignatureException: Credential should be scoped to a valid region, not 'eu-west-2'.): give --kinesis_region the region of that endpoint"},
		{"no region with an endpoint of another", keys, []string{"--stream=real", "--kinesis_endpoint=" + regional.URL()},
			"wordcount: Kinesis at " + regional.URL() + " refused requests signed for region us-east-1 (the default with --kinesis_endpoint and no --kinesis_region) (InvalidSignatureException: Credential should be scoped to a valid region, not 'us-east-1'.): give --kinesis_region the region of that endpoint"},
		{"no region", keys, []string{"--stream=real"},
			"wordcount: no AWS region for Kinesis: give --kinesis_region (e.g. --kinesis_region=eu-west-1) or set AWS_REGION"},
		{"not a region", keys, []string{"--stream=real", "--kinesis_region=eu-west-1a"},
			"wordcount: --kinesis_region=eu-west-1a is not an AWS region name such as eu-west-1: give --kinesis_region the region of the stream"},
		{"an expired session token", []string{"AWS_ACCESS_KEY_ID=" + expired.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + expired.SecretAccessKey, "AWS_SESSION_TOKEN=" + expired.SessionToken},
			[]string{"--stream=real", "--kinesis_endpoint=" + signed.URL()},
			"wordcount: the AWS session token has expired (ExpiredTokenException: The security token included in the request is expired): get fresh credentials (e.g. aws sso login, or a new AWS_SESSION_TOKEN with its AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"},
		{"an access key the service does not know", keys, []string{"--stream=real", "--kinesis_endpoint=" + signed.URL()},
			"wordcount: Kinesis does not recognise the AWS access key of the default credential chain (UnrecognizedClientException: The security token included in the request is invalid.): check AWS_ACCESS_KEY_ID (or the profile's key), and that it belongs to the account of stream real (--stream)"},
		{"an unreachable checkpoint table", keys, []string{"--stream=real", "--kinesis_endpoint=" + srv.URL(), "--checkpoint_table=positions", "--checkpoint_table_endpoint=http://127.0.0.1:1"},
			"wordcount: cannot reach DynamoDB at http://127.0.0.1:1 (dial tcp 127.0.0.1:1: connect: connection refused): check --checkpoint_table_endpoint and that the server runs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := clitest.Run(t, clitest.Env(t, c.env...), time.Minute, c.args...)
			clitest.Expect(t, r, 1, c.want)
			if n := len(r.StderrLines()); n != 1 {
				t.Errorf("%d lines on standard error; want the one line", n)
			}
		})
	}
}

// A job that fails on its runner ends with its cause as the last line, without the runner's
// log or the plan of the failed stage; --verbose prints them before it.
func TestAFailedJobsLastLineIsItsCause(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("real", 2))
	keys := clitest.Env(t, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
	notFound := regexp.MustCompile(`^wordcount: the job failed: kinesisio: listing the shards of stream doesnotexist: operation error Kinesis: ListShards, https response error StatusCode: 400, RequestID: [0-9a-f-]+, ResourceNotFoundException: Stream doesnotexist under account 123456789012 not found\.$`)
	t.Run("checks skipped, a stream that does not exist", func(t *testing.T) {
		t.Parallel()
		r := clitest.Run(t, keys, 2*time.Minute, "--stream=doesnotexist", "--kinesis_endpoint="+srv.URL(), "--skip_preflight")
		if r.Code != 1 || !notFound.MatchString(r.LastLine()) || len(r.StderrLines()) != 1 {
			t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and the one line matching %s", r.Code, r.Stderr, notFound)
		}
	})
	t.Run("verbose", func(t *testing.T) {
		t.Parallel()
		r := clitest.Run(t, keys, 2*time.Minute, "--stream=doesnotexist", "--kinesis_endpoint="+srv.URL(), "--skip_preflight", "--verbose")
		if r.Code != 1 || !notFound.MatchString(r.LastLine()) {
			t.Errorf("exit %d, last line %q; want exit 1 and a last line matching %s", r.Code, r.LastLine(), notFound)
		}
		// The launcher's "Submitted job" goes through the runner's log, with its "[SDK] "
		// prefix, once the in-process worker has taken the Go SDK's logger, which it may do
		// before or after the submission.
		for _, want := range []*regexp.Regexp{regexp.MustCompile(`level=INFO msg="(\[SDK\] )?Submitted job`), regexp.MustCompile(`while executing Process for Plan\[`)} {
			if !want.MatchString(r.Stderr) {
				t.Errorf("--verbose printed nothing matching %s:\n%s", want, r.Stderr)
			}
		}
	})
	t.Run("checks skipped, an endpoint that is unreachable", func(t *testing.T) {
		t.Parallel()
		r := clitest.Run(t, keys, 2*time.Minute, "--stream=real", "--kinesis_endpoint=http://127.0.0.1:1", "--bounded=false", "--skip_preflight", "--startup_timeout=1s")
		want := regexp.MustCompile(`^wordcount: the job failed: kinesisio: the read of stream real could not list its shards at http://127\.0\.0\.1:1 once in \d+s since it started; check the endpoint, the region and the network path to it \(WithStartupTimeout sets this bound; 0 waits without one\): kinesisio: listing the shards of stream real: gave up after 4 attempts: .*dial tcp 127\.0\.0\.1:1: connect: connection refused$`)
		if r.Code != 1 || !want.MatchString(r.LastLine()) {
			t.Errorf("exit %d, last line %q; want exit 1 and a last line matching %s", r.Code, r.LastLine(), want)
		}
		for _, l := range r.StderrLines()[:len(r.StderrLines())-1] {
			if !strings.Contains(l, "level=WARN") || !strings.Contains(l, "kinesisio:") {
				t.Errorf("a line other than the connector's warnings before the cause: %s", l)
			}
		}
	})
}

// The checks pass quietly; a checkpoint table that does not exist yet is said in a line,
// and the job creates it.
func TestTheChecksPassQuietly(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("real", 2))
	keys := clitest.Env(t, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
	t.Run("embedded demo", func(t *testing.T) {
		t.Parallel()
		r := clitest.Run(t, clitest.Env(t), 2*time.Minute)
		if r.Code != 0 || r.Stderr != "" || !strings.Contains(r.Stdout, "|  Kinesis|    2|") {
			t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 0, the table, and nothing on standard error", r.Code, r.Stdout, r.Stderr)
		}
	})
	t.Run("vet runs no check", func(t *testing.T) {
		t.Parallel()
		r := clitest.Run(t, keys, time.Minute, "--runner=vet", "--stream=real", "--kinesis_endpoint=http://127.0.0.1:1")
		if r.Code != 0 {
			t.Errorf("--runner=vet exited %d:\n%s", r.Code, r.Stderr)
		}
	})
	t.Run("a checkpoint table that does not exist", func(t *testing.T) {
		t.Parallel()
		dyn := emulators.StartT(t, emulators.Dynalite).URL()
		r := clitest.Run(t, keys, 2*time.Minute, "--stream=real", "--kinesis_endpoint="+srv.URL(), "--bounded",
			"--checkpoint_table=positions", "--checkpoint_table_endpoint="+dyn)
		clitest.Expect(t, r, 0, "wordcount: checkpoint table positions (--checkpoint_table) does not exist at "+dyn+" yet: the job creates it, and reads every shard from --starting_position")
		if n := len(r.StderrLines()); n != 1 {
			t.Errorf("%d lines on standard error; want the one line", n)
		}
		db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(dyn), Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
		if _, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String("positions")}); err != nil {
			t.Errorf("the job did not create the table: %v", err)
		}
	})
}

// --help shows the pipeline's own flags first, in groups, and Beam's runner flags apart.
func TestHelpShowsThePipelinesFlagsFirst(t *testing.T) {
	r := clitest.Run(t, clitest.Env(t), time.Minute, "--help")
	lines := r.StderrLines()
	if r.Code != 0 || len(lines) == 0 || lines[0] != "Usage of wordcount (flags are --name=value):" {
		t.Fatalf("exit %d, stderr:\n%s", r.Code, r.Stderr)
	}
	at := map[string]int{}
	for i, l := range lines {
		at[l] = i + 1
	}
	order := []string{"Kinesis:", "  --kinesis_region string", "  --skip_preflight", "The read:", "  --starting_position string",
		"  --startup_timeout duration", "wordcount:", "  --stream string", "  --verbose", "Flink (--runner=flink):", "  --checkpointing_interval int",
		"Beam runner flags:", "  --runner string"}
	for i, l := range order {
		if at[l] == 0 {
			t.Errorf("--help has no line %q", l)
		} else if i > 0 && at[l] < at[order[i-1]] {
			t.Errorf("--help has %q before %q", l, order[i-1])
		}
	}
}
