package kinesisio_test

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x0(printPushed)
}

// printPushed prints a record's shard and data.
func printPushed(r kinesisio.Record) { fmt.Println(r.ShardID, string(r.Data)) }

// ExampleWithEnhancedFanOut reads a stream through SubscribeToShard as the stream consumer
// "orders-app", which the read registers because the stream has none of that name. Every
// shard is pushed to the reader; nothing polls GetRecords.
func ExampleWithEnhancedFanOut() {
	srv, err := kinesistest.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("orders", 2); err != nil {
		panic(err)
	}
	// An explicit hash key places each record: 0 in the first shard, 2^127 in the second.
	for i, key := range []string{"0", "170141183460469231731687303715884105728", "0"} {
		if _, err := srv.Client().PutRecord(context.Background(), &kinesis.PutRecordInput{
			StreamName: aws.String("orders"), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(key),
			Data: fmt.Appendf(nil, "order-%02d", i+1),
		}); err != nil {
			panic(err)
		}
	}

	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.ReadBounded(s, "orders",
		kinesisio.WithEndpoint(srv.URL()),
		kinesisio.WithRegion("us-east-1"),
		kinesisio.WithStaticCredentials("test", "test"),
		kinesisio.WithStartingPosition(kinesisio.TrimHorizon()),
		kinesisio.WithEnhancedFanOut("orders-app"),
	)
	beam.ParDo0(s, printPushed, recs)
	if err := beamx.Run(context.Background(), p); err != nil {
		panic(err)
	}

	consumers, err := srv.Consumers("orders")
	if err != nil {
		panic(err)
	}
	for _, c := range consumers {
		fmt.Println("consumer", c.Name, c.Status)
	}
	fmt.Println("GetRecords calls:", srv.CallCount("GetRecords"))
	// Unordered output:
	// shardId-000000000000 order-01
	// shardId-000000000001 order-02
	// shardId-000000000000 order-03
	// consumer orders-app ACTIVE
	// GetRecords calls: 0
}
