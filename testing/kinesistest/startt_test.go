package kinesistest_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// StartT's server has the streams of its WithStream and WithOnDemandStream options, ACTIVE,
// with their shards and modes, and a stream given twice fails Start naming it.
func TestStartTCreatesTheStreamsOfItsOptions(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("orders", 3),
		kinesistest.WithOnDemandStream("clicks", 2, types.RecordDistributionStrategyAuto))
	kc := srv.Client()
	for _, want := range []struct {
		name   string
		shards int32
		mode   types.StreamMode
	}{{"orders", 3, types.StreamModeProvisioned}, {"clicks", 2, types.StreamModeOnDemand}} {
		out, err := kc.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(want.name)})
		if err != nil {
			t.Fatalf("DescribeStreamSummary(%s): %v", want.name, err)
		}
		d := out.StreamDescriptionSummary
		if d.StreamStatus != types.StreamStatusActive || aws.ToInt32(d.OpenShardCount) != want.shards || d.StreamModeDetails.StreamMode != want.mode {
			t.Errorf("%s: %s with %d shards, %s; want ACTIVE with %d, %s", want.name, d.StreamStatus, aws.ToInt32(d.OpenShardCount), d.StreamModeDetails.StreamMode, want.shards, want.mode)
		}
	}
	_, err := kinesistest.Start(kinesistest.WithStream("orders", 1), kinesistest.WithStream("orders", 1))
	if err == nil || !strings.Contains(err.Error(), `"orders"`) {
		t.Errorf("Start with stream orders twice: %v; want an error naming it", err)
	}
}
