package embedded

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
)

func TestPutThenUserRecordsReturnsEveryRecordInOrderDeaggregated(t *testing.T) {
	srv, err := Start(1, []string{"s"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if err := PutStrings(ctx, srv.Client(), "s", "k", "one", "two"); err != nil {
		t.Fatal(err)
	}
	agg := kpl.NewAggregator(51200, 100)
	for _, d := range []string{"three", "four"} {
		if err := agg.Add(kpl.UserRecord{PartitionKey: "a", Data: []byte(d)}); err != nil {
			t.Fatal(err)
		}
	}
	body, err := agg.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client().PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"),
		Records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String(body.PartitionKey), ExplicitHashKey: aws.String(body.ExplicitHashKey), Data: body.Data}}}); err != nil {
		t.Fatal(err)
	}
	recs, n, err := UserRecords(srv, "s")
	if err != nil {
		t.Fatal(err)
	}
	want := []UserRecord{
		{"shardId-000000000000", "k", "one"}, {"shardId-000000000000", "k", "two"},
		{"shardId-000000000000", "a", "three"}, {"shardId-000000000000", "a", "four"},
	}
	if !slices.Equal(recs, want) || n != 3 {
		t.Errorf("UserRecords = %v in %d Kinesis records, want %v in 3", recs, n, want)
	}
}

func TestCheckRunnerRefusesWorkersOutsideThisProcess(t *testing.T) {
	oldRunner, oldEnv := *runners.Runner, *jobopts.EnvironmentType
	defer func() { *runners.Runner, *jobopts.EnvironmentType = oldRunner, oldEnv }()
	for _, tc := range []struct {
		runner, env string
		ok          bool
	}{
		{"", "", true},
		{"prism", "", true},
		{"universal", "LOOPBACK", true},
		{"flink", "loopback", true},
		{"universal", "DOCKER", false},
		{"dataflow", "", false},
	} {
		*runners.Runner, *jobopts.EnvironmentType = tc.runner, tc.env
		if err := CheckRunner(); (err == nil) != tc.ok {
			t.Errorf("--runner=%q --environment_type=%q: CheckRunner() = %v, want ok=%v", tc.runner, tc.env, err, tc.ok)
		}
	}
}

func TestLaunchCreatesOnDemandStreamsWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		onDemand bool
		want     types.StreamMode
	}{{false, types.StreamModeProvisioned}, {true, types.StreamModeOnDemand}} {
		srv, err := Launch(t.Context(), Setup{Streams: []string{"a", "b"}, Shards: 3, OnDemand: tc.onDemand})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"a", "b"} {
			out, err := srv.Client().DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			d := out.StreamDescriptionSummary
			if d.StreamModeDetails.StreamMode != tc.want || aws.ToInt32(d.OpenShardCount) != 3 {
				t.Errorf("OnDemand=%v: stream %s is %s with %d shards, want %s with 3", tc.onDemand, name, d.StreamModeDetails.StreamMode, aws.ToInt32(d.OpenShardCount), tc.want)
			}
		}
		srv.Close()
	}
}
