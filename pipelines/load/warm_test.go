package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/dryrun"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The warm-throughput tests run the load against a test server of their own, as against AWS:
// --stream, --kinesis_endpoint and static keys from the environment, over HTTP with the AWS
// SDK, the warm-up first and then the pipeline on Prism.

// backfill is the stream the tests warm.
const backfill = "backfill"

// warmServer starts a test server with opts, whose UpdateStreamWarmThroughput keeps a stream
// UPDATING for delay, and creates the stream backfill, ON_DEMAND or PROVISIONED, with the
// account's billing commitment on or off.
func warmServer(t *testing.T, delay time.Duration, onDemand, commitment bool) *kinesistest.Server {
	t.Helper()
	stream := kinesistest.WithStream(backfill, 2)
	if onDemand {
		stream = kinesistest.WithOnDemandStream(backfill, 2, "")
	}
	srv := kinesistest.StartT(t, kinesistest.WithTransitionDelay(delay), stream)
	if commitment {
		if err := enableCommitment(t.Context(), srv); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}

// loadTo runs a load command line against srv as run does (the warm-up, then the pipeline,
// which runs only after a warm-up that succeeded) and returns the warm-up's log and error.
func loadTo(t *testing.T, srv *kinesistest.Server, env environment, args ...string) ([]string, error) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOAD")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	args = append([]string{"--kinesis_endpoint=" + srv.URL(), "--kinesis_region=" + kinesistest.Region, "--aws_credentials_from_env"}, args...)
	j, err := prepare(parse(t, args...), env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.stop)
	var logs []string
	logf := func(format string, args ...any) {
		logs = append(logs, fmt.Sprintf(format, args...))
		t.Log(logs[len(logs)-1])
	}
	if err := j.warmUp(t.Context(), logf); err != nil {
		return logs, err
	}
	p, s := beam.NewPipelineWithRoot()
	passert.Empty(s, j.build(s, time.Now()))
	ptest.RunAndValidate(t, p)
	return logs, nil
}

// summary describes the stream backfill on srv.
func summary(t *testing.T, srv *kinesistest.Server) *types.StreamDescriptionSummary {
	t.Helper()
	out, err := srv.Client().DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(backfill)})
	if err != nil {
		t.Fatal(err)
	}
	return out.StreamDescriptionSummary
}

// checkNothingWritten fails t if the load wrote to backfill.
func checkNothingWritten(t *testing.T, srv *kinesistest.Server) {
	t.Helper()
	recs, err := srv.StreamRecords(backfill)
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.CallCount("PutRecords") + srv.CallCount("PutRecord"); len(recs) != 0 || n != 0 {
		t.Errorf("the stream holds %d records after %d put calls, want none", len(recs), n)
	}
}

// checkMentions fails t unless err says each of phrases.
func checkMentions(t *testing.T, err error, phrases ...string) {
	t.Helper()
	for _, p := range phrases {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error does not say %q: %v", p, err)
		}
	}
}

// TestWarmThroughputWarmsAnOnDemandStreamBeforeTheLoad warms an ON_DEMAND stream, given by
// ARN, of an account with the commitment on: the stream ends ACTIVE with exactly the warm
// throughput asked for, the load writes every record once, and no record arrives before the
// stream's UPDATING period after the update is over.
func TestWarmThroughputWarmsAnOnDemandStreamBeforeTheLoad(t *testing.T) {
	const delay = 300 * time.Millisecond
	const count, size, keys = 2500, 24, 7
	srv := warmServer(t, delay, true, true)
	before := time.Now().Truncate(time.Millisecond)
	logs, err := loadTo(t, srv, environment{}, "--stream="+srv.StreamARN(backfill), "--warm_throughput_mibps=64",
		fmt.Sprint("--count=", count), fmt.Sprint("--size=", size), fmt.Sprint("--keys=", keys))
	if err != nil {
		t.Fatal(err)
	}
	d := summary(t, srv)
	if d.StreamStatus != types.StreamStatusActive || d.WarmThroughput == nil ||
		aws.ToInt32(d.WarmThroughput.CurrentMiBps) != 64 || aws.ToInt32(d.WarmThroughput.TargetMiBps) != 64 {
		t.Errorf("stream is %s with %s, want ACTIVE with 64 MiB/s (target 64)", d.StreamStatus, describeWarm(d.WarmThroughput))
	}
	if n := srv.CallCount("UpdateStreamWarmThroughput"); n != 1 {
		t.Errorf("%d UpdateStreamWarmThroughput calls, want 1", n)
	}
	if got, want := storedOn(t, srv, backfill), textRecords(t, count, size, keys); !slices.Equal(got, want) {
		t.Errorf("stream holds %d records, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	recs, err := srv.StreamRecords(backfill)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.ArrivalTime.Before(before.Add(delay)) {
			t.Fatalf("record %s arrived at %v, before the stream was warm (not before %v)", r.SequenceNumber, r.ArrivalTime, before.Add(delay))
		}
	}
	if len(logs) != 2 || !strings.Contains(logs[0], "ON_DEMAND with 2 MiB/s of warm throughput (target 2 MiB/s); setting it to 64 MiB/s") ||
		!strings.Contains(logs[1], "is ACTIVE with 64 MiB/s of warm throughput (target 64 MiB/s)") {
		t.Errorf("log %q: want the stream as it was (2 shards: 2 MiB/s) and then warm at 64 MiB/s", logs)
	}
}

func TestWarmThroughputRefusesAProvisionedStream(t *testing.T) {
	srv := warmServer(t, 0, false, true)
	_, err := loadTo(t, srv, environment{}, "--stream="+backfill, "--warm_throughput_mibps=64", "--count=100")
	var invalid *types.InvalidArgumentException
	if !errors.As(err, &invalid) {
		t.Fatalf("warming a PROVISIONED stream: %v, want the service's InvalidArgumentException", err)
	}
	checkMentions(t, err, "stream backfill is PROVISIONED", "ON_DEMAND streams", "UpdateStreamMode",
		"minimum throughput billing commitment", "UpdateAccountSettings", "billed", "at least 24 hours", "the load did not start")
	checkNothingWritten(t, srv)
}

func TestWarmThroughputNeedsTheBillingCommitment(t *testing.T) {
	srv := warmServer(t, 0, true, false)
	_, err := loadTo(t, srv, environment{}, "--stream="+backfill, "--warm_throughput_mibps=64", "--count=100")
	var invalid *types.InvalidArgumentException
	if !errors.As(err, &invalid) {
		t.Fatalf("warming without the commitment: %v, want the service's InvalidArgumentException", err)
	}
	checkMentions(t, err, "ON_DEMAND stream", "minimum throughput billing commitment", "UpdateAccountSettings",
		"billed for at least 24 hours", "the load did not start")
	checkNothingWritten(t, srv)
	// The load never turns the commitment on itself: it costs money.
	out, err := srv.Client().DescribeAccountSettings(t.Context(), &kinesis.DescribeAccountSettingsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if c := out.MinimumThroughputBillingCommitment; c == nil || c.Status != types.MinimumThroughputBillingCommitmentOutputStatusDisabled {
		t.Errorf("commitment %+v after the failed warm-up, want DISABLED", c)
	}
}

// TestWarmThroughputOverTheLimitSaysWhichLimits asks for 20 GiB/s, over the 10 GiB/s default,
// with the SDK's retries off (they would retry the LimitExceededException of the 5 calls a
// second limit, which is right for that one).
func TestWarmThroughputOverTheLimitSaysWhichLimits(t *testing.T) {
	srv := warmServer(t, 0, true, true)
	env := environment{warmClientOptions: []func(*kinesis.Options){func(o *kinesis.Options) { o.RetryMaxAttempts = 1 }}}
	_, err := loadTo(t, srv, env, "--stream="+backfill, "--warm_throughput_mibps=20480", "--count=100")
	var limit *types.LimitExceededException
	if !errors.As(err, &limit) {
		t.Fatalf("warming to 20 GiB/s: %v, want the service's LimitExceededException", err)
	}
	checkMentions(t, err, "--warm_throughput_mibps=20480", "5 calls a second", "10 GiB/s", "the load did not start")
	checkNothingWritten(t, srv)
}

// TestWarmThroughputWaitIsBounded gives the warm-up 300ms for a stream that stays UPDATING
// for an hour.
func TestWarmThroughputWaitIsBounded(t *testing.T) {
	srv := warmServer(t, time.Hour, true, true)
	start := time.Now()
	_, err := loadTo(t, srv, environment{}, "--stream="+backfill, "--warm_throughput_mibps=64", "--warm_throughput_timeout=300ms", "--count=100")
	if err == nil {
		t.Fatal("the warm-up of a stream UPDATING for an hour succeeded within 300ms")
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("the 300ms warm-up failed after %v", elapsed)
	}
	checkMentions(t, err, "stream backfill was not ACTIVE with 64 MiB/s of warm throughput within --warm_throughput_timeout=300ms",
		"last seen: UPDATING with 2 MiB/s of warm throughput (target 64 MiB/s)", "the load did not start")
	checkNothingWritten(t, srv)
}

// TestEmbeddedDemoWarmsItsOnDemandStream runs the flag without --stream: the embedded stream
// is ON_DEMAND in an account with the commitment on, and ends warm with every record written.
func TestEmbeddedDemoWarmsItsOnDemandStream(t *testing.T) {
	j, _ := runLoad(t, "--warm_throughput_mibps=8", "--count=100", "--size=24", "--keys=3", "--shards=3")
	out, err := j.srv.Client().DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(j.stream)})
	if err != nil {
		t.Fatal(err)
	}
	d := out.StreamDescriptionSummary
	if d.StreamModeDetails.StreamMode != types.StreamModeOnDemand || d.WarmThroughput == nil ||
		aws.ToInt32(d.WarmThroughput.CurrentMiBps) != 8 || aws.ToInt32(d.WarmThroughput.TargetMiBps) != 8 {
		t.Errorf("embedded stream is %s with %s, want ON_DEMAND with 8 MiB/s (target 8)", d.StreamModeDetails.StreamMode, describeWarm(d.WarmThroughput))
	}
	if got, want := stored(t, j), textRecords(t, 100, 24, 3); !slices.Equal(got, want) {
		t.Errorf("stream holds %d records, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

// TestRunsThatSubmitNoJobWarmNothing runs the command with the flag on --runner=vet and as a
// Dataflow dry run: neither may call the (billed) warm-up.
func TestRunsThatSubmitNoJobWarmNothing(t *testing.T) {
	srv := warmServer(t, 0, true, true)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOAD")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	cfg := parse(t, "--stream="+backfill, "--kinesis_endpoint="+srv.URL(), "--kinesis_region="+kinesistest.Region,
		"--aws_credentials_from_env", "--warm_throughput_mibps=64")

	old := *runners.Runner
	*runners.Runner = "vet"
	err := run(t.Context(), cfg)
	*runners.Runner = old
	if err != nil {
		t.Fatalf("--runner=vet: %v", err)
	}
	dryrun.Run(t, func(ctx context.Context) error { return run(ctx, cfg) })

	for _, op := range []string{"DescribeStreamSummary", "UpdateStreamWarmThroughput"} {
		if n := srv.CallCount(op); n != 0 {
			t.Errorf("%d %s calls, want none", n, op)
		}
	}
}
