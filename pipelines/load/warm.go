package main

// Warm throughput before a backfill (--warm_throughput_mibps). An on-demand stream scales with
// its traffic, and a backfill that starts at full speed meets a stream scaled for yesterday's
// load and is throttled until it catches up. On-demand Advantage lets an account set a
// stream's warm throughput ahead of the traffic: UpdateStreamWarmThroughput puts the stream in
// UPDATING and it turns ACTIVE again once it is scaled ("a few minutes", says the API
// reference). It is billed, as is the account's minimum throughput billing commitment it
// needs, which lasts at least 24 hours once turned on.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/awsconf"
)

// The wait for a stream checks it quickly at first, for a stream that is ready at once, then
// every warmPollMax: a few of DescribeStreamSummary's 20 calls a second per account.
const (
	warmPollFirst = 100 * time.Millisecond
	warmPollMax   = 5 * time.Second
)

// warmup warms a stream's throughput before the load starts.
type warmup struct {
	client  *kinesis.Client
	stream  string // a name or an ARN
	mibps   int32
	timeout time.Duration
}

// newWarmClient is a Kinesis client with the AWS settings of the load's writer. A stream given
// by ARN lends the client its region when the settings name none.
func newWarmClient(ctx context.Context, settings awsconf.Settings, stream string, optFns ...func(*kinesis.Options)) (*kinesis.Client, error) {
	if a, err := arn.Parse(stream); err == nil && settings.Region == "" { // as kinesisio does
		settings.Region = a.Region
	}
	cfg, err := awsconf.Load(ctx, settings)
	if errors.Is(err, awsconf.ErrNoRegion) {
		return nil, fmt.Errorf("--warm_throughput_mibps: %w; pass --kinesis_region or set AWS_REGION", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--warm_throughput_mibps: %w", err)
	}
	return kinesis.NewFromConfig(cfg, append([]func(*kinesis.Options){func(o *kinesis.Options) {
		if settings.Endpoint != "" {
			o.BaseEndpoint = aws.String(settings.Endpoint)
		}
	}}, optFns...)...), nil
}

// run sets the stream's warm throughput to w.mibps and waits until the stream is ACTIVE and
// warm to at least that, all within w.timeout, telling logf what it does.
func (w warmup) run(ctx context.Context, logf func(format string, args ...any)) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	start := time.Now()
	// The service takes the update only from an ACTIVE stream.
	before, err := w.waitFor(ctx, "ACTIVE", func(d *types.StreamDescriptionSummary) bool {
		return d.StreamStatus == types.StreamStatusActive
	})
	if err != nil {
		return err
	}
	logf("warm throughput: stream %s is %s with %s; setting it to %d MiB/s (UpdateStreamWarmThroughput, billed)",
		w.stream, modeOf(before), describeWarm(before.WarmThroughput), w.mibps)
	in := &kinesis.UpdateStreamWarmThroughputInput{WarmThroughputMiBps: aws.Int32(w.mibps)}
	in.StreamName, in.StreamARN = streamInput(w.stream)
	if _, err := w.client.UpdateStreamWarmThroughput(ctx, in); err != nil {
		if ctx.Err() != nil {
			return w.ended(ctx, "updated", before)
		}
		return w.refused(err, modeOf(before))
	}
	after, err := w.waitFor(ctx, fmt.Sprintf("ACTIVE with %d MiB/s of warm throughput", w.mibps), func(d *types.StreamDescriptionSummary) bool {
		// At least the target: a stream that traffic has already scaled further is warm.
		return d.StreamStatus == types.StreamStatusActive && d.WarmThroughput != nil && aws.ToInt32(d.WarmThroughput.CurrentMiBps) >= w.mibps
	})
	if err != nil {
		return err
	}
	logf("warm throughput: stream %s is ACTIVE with %s after %v; starting the load",
		w.stream, describeWarm(after.WarmThroughput), time.Since(start).Round(time.Millisecond))
	return nil
}

// waitFor describes the stream until ready says it is, backing off from warmPollFirst to
// warmPollMax, and fails when ctx ends first, saying what it waited for and what it last saw.
func (w warmup) waitFor(ctx context.Context, what string, ready func(*types.StreamDescriptionSummary) bool) (*types.StreamDescriptionSummary, error) {
	in := &kinesis.DescribeStreamSummaryInput{}
	in.StreamName, in.StreamARN = streamInput(w.stream)
	var last *types.StreamDescriptionSummary
	for poll := warmPollFirst; ; poll = min(2*poll, warmPollMax) {
		out, err := w.client.DescribeStreamSummary(ctx, in)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, w.ended(ctx, what, last)
		case err != nil:
			return nil, fmt.Errorf("--warm_throughput_mibps: describing stream %s: %w", w.stream, err)
		}
		last = out.StreamDescriptionSummary
		if ready(last) {
			return last, nil
		}
		if last.StreamStatus == types.StreamStatusDeleting {
			return nil, fmt.Errorf("--warm_throughput_mibps: stream %s is being deleted", w.stream)
		}
		select {
		case <-ctx.Done():
			return nil, w.ended(ctx, what, last)
		case <-time.After(poll):
		}
	}
}

// ended is the error of a wait for the stream to be what that ctx ended: its deadline,
// --warm_throughput_timeout, or the command being stopped.
func (w warmup) ended(ctx context.Context, what string, last *types.StreamDescriptionSummary) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("--warm_throughput_mibps: waiting for stream %s to be %s: %w", w.stream, what, ctx.Err())
	}
	seen := "no answer from DescribeStreamSummary"
	if last != nil {
		seen = fmt.Sprintf("%s with %s", last.StreamStatus, describeWarm(last.WarmThroughput))
	}
	return fmt.Errorf("--warm_throughput_mibps: stream %s was not %s within --warm_throughput_timeout=%v (last seen: %s). "+
		"A warm-up under way goes on at the service: wait and run again, or raise --warm_throughput_timeout", w.stream, what, w.timeout, seen)
}

// refused explains why the service refused the update of a stream in mode, and how to fix it.
func (w warmup) refused(err error, mode types.StreamMode) error {
	var invalid *types.InvalidArgumentException
	var limit *types.LimitExceededException
	switch {
	case errors.As(err, &invalid) && mode == types.StreamModeProvisioned:
		return fmt.Errorf("--warm_throughput_mibps: stream %s is PROVISIONED, and warm throughput is a setting of ON_DEMAND streams "+
			"in an account with the On-demand Advantage minimum throughput billing commitment; switch the stream to ON_DEMAND (UpdateStreamMode) "+
			"and turn the commitment on (UpdateAccountSettings), both billed and the commitment for at least 24 hours, or leave the flag out: %w", w.stream, err)
	case errors.As(err, &invalid):
		return fmt.Errorf("--warm_throughput_mibps: Kinesis refused warm throughput for stream %s: it needs an ON_DEMAND stream "+
			"and the account's On-demand Advantage minimum throughput billing commitment, turned on with UpdateAccountSettings "+
			"(MinimumThroughputBillingCommitment Status=ENABLED), which is billed for at least 24 hours, as warm throughput is; "+
			"or leave the flag out: %w", w.stream, err)
	case errors.As(err, &limit):
		return fmt.Errorf("--warm_throughput_mibps=%d: over a Kinesis limit: UpdateStreamWarmThroughput takes 5 calls a second per account, "+
			"and a stream's warm throughput is at most 10 GiB/s (10240 MiB/s) by default; run again later, ask for less, "+
			"or ask AWS to raise the limit: %w", w.mibps, err)
	}
	return fmt.Errorf("--warm_throughput_mibps: warming stream %s: %w", w.stream, err)
}

// describeWarm says what a stream description reports of warm throughput.
func describeWarm(w *types.WarmThroughputObject) string {
	if w == nil {
		return "no warm throughput reported"
	}
	return fmt.Sprintf("%d MiB/s of warm throughput (target %d MiB/s)", aws.ToInt32(w.CurrentMiBps), aws.ToInt32(w.TargetMiBps))
}

// streamInput is the StreamName or the StreamARN (exactly one set) that addresses stream.
func streamInput(stream string) (name, streamARN *string) {
	if arn.IsARN(stream) { // stream names cannot hold the colons of an ARN
		return nil, aws.String(stream)
	}
	return aws.String(stream), nil
}

// modeOf is the capacity mode d reports, empty when it reports none.
func modeOf(d *types.StreamDescriptionSummary) types.StreamMode {
	if d == nil || d.StreamModeDetails == nil {
		return ""
	}
	return d.StreamModeDetails.StreamMode
}
