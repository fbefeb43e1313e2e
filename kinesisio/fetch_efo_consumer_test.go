package kinesisio

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// A read with enhanced fan-out on a stream that already has as many consumers as the
// service allows fails at its start, saying which limit and how to raise it, instead of
// retrying for ever: 20 consumers on a provisioned stream; 50 on an on-demand stream under
// the minimum throughput billing commitment, which the error on an on-demand stream without
// it names.
func TestEnhancedFanOutOverTheConsumerLimitFailsTheRead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		onDemand  bool
		committed bool
		consumers int
		want      []string
	}{
		{"provisioned", false, false, 20, []string{"20 registered consumers, the limit of 20 for a provisioned stream", "DeregisterStreamConsumer"}},
		{"on-demand", true, false, 20, []string{"the limit of 20 without the On-demand Advantage minimum throughput billing commitment, which raises it to 50", "UpdateAccountSettings"}},
		{"on-demand, committed", true, true, 50, []string{"50 registered consumers, the limit of 50 for an on-demand stream under the minimum throughput billing commitment"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const stream = "full"
			srv, err := kinesistest.Start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			if tc.committed {
				if _, err := srv.Client().UpdateAccountSettings(context.Background(), &kinesis.UpdateAccountSettingsInput{
					MinimumThroughputBillingCommitment: &types.MinimumThroughputBillingCommitmentInput{Status: types.MinimumThroughputBillingCommitmentInputStatusEnabled},
				}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.onDemand {
				err = srv.CreateOnDemandStream(stream, 2, types.RecordDistributionStrategyUserPartitionKey)
			} else {
				err = srv.CreateStream(stream, 2)
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.consumers {
				if _, err := srv.RegisterConsumer(stream, fmt.Sprintf("app-%d", i)); err != nil {
					t.Fatalf("consumer %d: %v", i, err)
				}
			}
			p, s := beam.NewPipelineWithRoot()
			Read(s, stream, connect(srv, WithEnhancedFanOut("one-more"), WithMaxReadTime(time.Minute),
				WithRetries(1, 10*time.Millisecond, 20*time.Millisecond))...)
			start := time.Now()
			err = ptest.Run(p)
			if err == nil {
				t.Fatal("the read ran with one consumer over the limit")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("the read failed after %v; it must fail at its start", d)
			}
		})
	}
}

// On an on-demand stream under the billing commitment, whose limit is 50, a
// LimitExceededException met with 25 consumers registered is a registration refused for
// its rate, which the reader rides out: it must not fail the read as a stream at its limit.
func TestConsumerLimitErrorOnlyAtTheStreamsOwnLimit(t *testing.T) {
	const stream = "committed"
	srv, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if _, err := srv.Client().UpdateAccountSettings(context.Background(), &kinesis.UpdateAccountSettingsInput{
		MinimumThroughputBillingCommitment: &types.MinimumThroughputBillingCommitmentInput{Status: types.MinimumThroughputBillingCommitmentInputStatusEnabled},
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateOnDemandStream(stream, 2, types.RecordDistributionStrategyUserPartitionKey); err != nil {
		t.Fatal(err)
	}
	cfg := buildConfig(targetRead, connect(srv, WithEnhancedFanOut("one-more")))
	r, err := newShardReader(context.Background(), newReadSpec(stream, cfg))
	if err != nil {
		t.Fatal(err)
	}
	cause := &types.LimitExceededException{Message: aws.String("rate exceeded")}
	register := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := srv.RegisterConsumer(stream, fmt.Sprintf("app-%d", i)); err != nil {
				t.Fatalf("consumer %d: %v", i, err)
			}
		}
	}
	register(0, 25)
	if err := r.consumerLimitError(context.Background(), cause); err != nil {
		t.Errorf("with 25 of 50 consumers: %v; want nil (a refusal for the rate, ridden out)", err)
	}
	register(25, 50)
	if err := r.consumerLimitError(context.Background(), cause); err == nil || !strings.Contains(err.Error(), "the limit of 50") {
		t.Errorf("with 50 of 50 consumers: %v; want the error naming the limit of 50", err)
	}
}
