package kinesistest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func (e *env) setCommitment(status types.MinimumThroughputBillingCommitmentInputStatus) *types.MinimumThroughputBillingCommitmentOutput {
	e.t.Helper()
	out, err := e.kc.UpdateAccountSettings(e.ctx, &kinesis.UpdateAccountSettingsInput{
		MinimumThroughputBillingCommitment: &types.MinimumThroughputBillingCommitmentInput{Status: status},
	})
	if err != nil {
		e.t.Fatalf("UpdateAccountSettings(%s): %v", status, err)
	}
	return out.MinimumThroughputBillingCommitment
}

func (e *env) commitment() *types.MinimumThroughputBillingCommitmentOutput {
	e.t.Helper()
	out, err := e.kc.DescribeAccountSettings(e.ctx, &kinesis.DescribeAccountSettingsInput{})
	if err != nil {
		e.t.Fatalf("DescribeAccountSettings: %v", err)
	}
	return out.MinimumThroughputBillingCommitment
}

// commitmentString prints a commitment as status started/earliest/ended, with
// times as offsets from t0 and "-" for absent ones.
func commitmentString(c *types.MinimumThroughputBillingCommitmentOutput) string {
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Sub(t0).String()
	}
	return fmt.Sprintf("%s %s/%s/%s", c.Status, at(c.StartedAt), at(c.EarliestAllowedEndAt), at(c.EndedAt))
}

func TestBillingCommitmentLasts24HoursOnceEnabled(t *testing.T) {
	e := newEnv(t)
	step := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: commitment %s, want %s", what, got, want)
		}
	}
	step("at first", commitmentString(e.commitment()), "DISABLED -/-/-")
	step("enabled", commitmentString(e.setCommitment("ENABLED")), "ENABLED 0s/24h0m0s/-")
	step("enabled again", commitmentString(e.setCommitment("ENABLED")), "ENABLED 0s/24h0m0s/-")
	e.clock.Advance(time.Hour)
	step("disabled after 1 h", commitmentString(e.setCommitment("DISABLED")), "ENABLED_UNTIL_EARLIEST_ALLOWED_END 0s/24h0m0s/-")
	step("enabled while ending", commitmentString(e.setCommitment("ENABLED")), "ENABLED 0s/24h0m0s/-")
	step("disabled again", commitmentString(e.setCommitment("DISABLED")), "ENABLED_UNTIL_EARLIEST_ALLOWED_END 0s/24h0m0s/-")
	e.clock.Advance(23*time.Hour - time.Millisecond)
	step("a millisecond before the end", commitmentString(e.commitment()), "ENABLED_UNTIL_EARLIEST_ALLOWED_END 0s/24h0m0s/-")
	e.clock.Advance(time.Millisecond)
	step("at the earliest end", commitmentString(e.commitment()), "DISABLED 0s/24h0m0s/24h0m0s")
	e.clock.Advance(time.Hour)
	step("a new commitment", commitmentString(e.setCommitment("ENABLED")), "ENABLED 25h0m0s/49h0m0s/-")
	e.clock.Advance(30 * time.Hour)
	step("disabled after its minimum", commitmentString(e.setCommitment("DISABLED")), "DISABLED 25h0m0s/49h0m0s/55h0m0s")

	_, err := e.kc.UpdateAccountSettings(e.ctx, &kinesis.UpdateAccountSettingsInput{
		MinimumThroughputBillingCommitment: &types.MinimumThroughputBillingCommitmentInput{Status: "PAUSED"},
	})
	wantAPIError(t, err, "ValidationException",
		"1 validation error detected: Value 'PAUSED' at 'minimumThroughputBillingCommitment.status' failed to satisfy constraint: Member must satisfy enum value set: [ENABLED, DISABLED]")
}

func (e *env) warm(name string, mibps int32) (*kinesis.UpdateStreamWarmThroughputOutput, error) {
	return e.kc.UpdateStreamWarmThroughput(e.ctx, &kinesis.UpdateStreamWarmThroughputInput{StreamName: aws.String(name), WarmThroughputMiBps: aws.Int32(mibps)})
}

func warmString(w *types.WarmThroughputObject) string {
	if w == nil {
		return "none"
	}
	return fmt.Sprintf("target %d current %d", aws.ToInt32(w.TargetMiBps), aws.ToInt32(w.CurrentMiBps))
}

func TestWarmThroughputNeedsAnOnDemandStreamAndTheCommitment(t *testing.T) {
	e := newEnv(t)
	e.createOnDemand("od", "")
	e.createStream("prov", 1)
	if got := warmString(e.summary("od").WarmThroughput); got != "none" {
		t.Errorf("without the commitment WarmThroughput is %s, want none", got)
	}
	_, err := e.warm("od", 100)
	wantAPIError(t, err, "InvalidArgumentException",
		"Warm throughput for stream od needs the MinimumThroughputBillingCommitment of account 123456789012, which is DISABLED; enable it with UpdateAccountSettings.")

	e.setCommitment("ENABLED")
	if got := warmString(e.summary("od").WarmThroughput); got != "target 4 current 4" {
		t.Errorf("a new on-demand stream's WarmThroughput is %s, want target 4 current 4", got)
	}
	out, err := e.warm("od", 100)
	if err != nil {
		t.Fatalf("UpdateStreamWarmThroughput: %v", err)
	}
	if aws.ToString(out.StreamName) != "od" || aws.ToString(out.StreamARN) != e.srv.StreamARN("od") || warmString(out.WarmThroughput) != "target 100 current 100" {
		t.Errorf("UpdateStreamWarmThroughput answered %s %s %s", aws.ToString(out.StreamName), aws.ToString(out.StreamARN), warmString(out.WarmThroughput))
	}
	if s := e.summary("od"); warmString(s.WarmThroughput) != "target 100 current 100" || s.StreamStatus != types.StreamStatusActive {
		t.Errorf("after the update: %s, %s", warmString(s.WarmThroughput), s.StreamStatus)
	}
	// Releasing capacity: the same operation with a lower value, by ARN.
	if out, err := e.kc.UpdateStreamWarmThroughput(e.ctx, &kinesis.UpdateStreamWarmThroughputInput{StreamARN: aws.String(e.srv.StreamARN("od")), WarmThroughputMiBps: aws.Int32(0)}); err != nil || warmString(out.WarmThroughput) != "target 0 current 0" {
		t.Errorf("lowering to 0: %v %v", err, out)
	}
	if got := warmString(e.summary("prov").WarmThroughput); got != "none" {
		t.Errorf("a provisioned stream's WarmThroughput is %s, want none", got)
	}

	_, err = e.warm("od", 10241)
	wantErrorType[*types.LimitExceededException](t, err)
	wantAPIError(t, err, "LimitExceededException", "Warm throughput of 10241 MiB/s for stream od under account 123456789012 exceeds the limit of 10240 MiB/s.")
	if _, err := e.warm("od", 10240); err != nil {
		t.Errorf("10 GiB/s: %v", err)
	}
	_, err = e.warm("od", -1)
	wantAPIError(t, err, "ValidationException",
		"1 validation error detected: Value '-1' at 'warmThroughputMiBps' failed to satisfy constraint: Member must have value greater than or equal to 0")
	_, err = e.warm("prov", 100)
	wantAPIError(t, err, "InvalidArgumentException",
		"Warm throughput is not supported for stream prov under account 123456789012 because it is in PROVISIONED capacity mode; it is a setting of ON_DEMAND streams.")
	_, err = e.warm("missing", 100)
	wantErrorType[*types.ResourceNotFoundException](t, err)

	// While a commitment is ending it still counts; once it has ended the
	// field goes.
	e.setCommitment("DISABLED")
	if _, err := e.warm("od", 20); err != nil {
		t.Errorf("while the commitment ends: %v", err)
	}
	e.clock.Advance(24 * time.Hour)
	if got := warmString(e.summary("od").WarmThroughput); got != "none" {
		t.Errorf("after the commitment ended WarmThroughput is %s, want none", got)
	}
}

func TestWarmThroughputScalesWhileTheStreamIsUpdating(t *testing.T) {
	e := newEnv(t, kinesistest.WithTransitionDelay(time.Second))
	e.setCommitment("ENABLED")
	_, err := e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String("od"), StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand}, WarmThroughputMiBps: aws.Int32(50),
	})
	if err != nil {
		t.Fatalf("CreateStream with WarmThroughputMiBps: %v", err)
	}
	check := func(what string, status types.StreamStatus, warm string) {
		t.Helper()
		if s := e.summary("od"); s.StreamStatus != status || warmString(s.WarmThroughput) != warm {
			t.Errorf("%s: %s, %s; want %s, %s", what, s.StreamStatus, warmString(s.WarmThroughput), status, warm)
		}
	}
	check("created", types.StreamStatusCreating, "target 50 current 4")
	e.clock.Advance(time.Second)
	check("a second later", types.StreamStatusActive, "target 50 current 50")

	out, err := e.warm("od", 200)
	if err != nil || warmString(out.WarmThroughput) != "target 200 current 50" {
		t.Fatalf("UpdateStreamWarmThroughput: %v %v", err, out)
	}
	check("updating", types.StreamStatusUpdating, "target 200 current 50")
	_, err = e.warm("od", 300)
	wantErrorType[*types.ResourceInUseException](t, err)
	e.put("od", "k", "writes go on while UPDATING")
	e.clock.Advance(time.Second)
	check("done", types.StreamStatusActive, "target 200 current 200")

	_, err = e.kc.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("prov"), ShardCount: aws.Int32(1), WarmThroughputMiBps: aws.Int32(50)})
	wantErrorType[*types.InvalidArgumentException](t, err)
}

func TestConsumerLimitIs50OnOnDemandAdvantageStreams(t *testing.T) {
	e := newEnv(t)
	e.createOnDemand("od", "")
	e.createStream("prov", 1)
	register := func(stream string, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			e.registerConsumer(stream, fmt.Sprintf("c%d", i))
		}
	}
	refused := func(stream string, n int) {
		t.Helper()
		_, err := e.kc.RegisterStreamConsumer(e.ctx, &kinesis.RegisterStreamConsumerInput{
			StreamARN: aws.String(e.srv.StreamARN(stream)), ConsumerName: aws.String("one-too-many"),
		})
		wantErrorType[*types.LimitExceededException](t, err)
		wantAPIError(t, err, "LimitExceededException", fmt.Sprintf("Stream %s under account 123456789012 already has %d consumers, the maximum.", stream, n))
	}
	register("od", 0, 20)
	refused("od", 20) // On-demand Standard
	e.setCommitment("ENABLED")
	register("od", 20, 50)
	refused("od", 50) // On-demand Advantage
	register("prov", 0, 20)
	refused("prov", 20) // provisioned streams keep 20 whatever the account

	// Once the commitment has ended the 50 stay, and no new one comes in.
	e.setCommitment("DISABLED")
	e.clock.Advance(24 * time.Hour)
	if cs, _ := e.srv.Consumers("od"); len(cs) != 50 {
		t.Errorf("after the commitment ended the stream has %d consumers, want 50", len(cs))
	}
	refused("od", 50)
	if sum := e.summary("od"); aws.ToInt32(sum.ConsumerCount) != 50 {
		t.Errorf("ConsumerCount %d, want 50", aws.ToInt32(sum.ConsumerCount))
	}
}

func TestAccountAndWarmThroughputCallsAreLimitedTo5PerSecondInLimitsMode(t *testing.T) {
	e := newEnv(t, kinesistest.WithLimits())
	e.setCommitment("ENABLED")
	e.createOnDemand("od", "")
	for i := range 4 {
		e.commitment()
		if _, err := e.warm("od", int32(10*i)); err != nil {
			t.Fatalf("UpdateStreamWarmThroughput %d: %v", i+1, err)
		}
	}
	e.commitment() // the fifth DescribeAccountSettings
	if _, err := e.warm("od", 40); err != nil {
		t.Fatalf("the fifth UpdateStreamWarmThroughput: %v", err)
	}
	_, err := e.kc.DescribeAccountSettings(e.ctx, &kinesis.DescribeAccountSettingsInput{})
	wantErrorType[*types.LimitExceededException](t, err)
	_, err = e.warm("od", 50)
	wantErrorType[*types.LimitExceededException](t, err)
	e.clock.Advance(time.Second)
	e.commitment()
}
