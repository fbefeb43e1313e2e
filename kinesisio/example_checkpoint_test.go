package kinesisio_test

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/top"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x1(orderOf)
	register.Function2x1(orderLess)
	register.Function1x0(printOrders)
}

// orderOf is a record's data as text.
func orderOf(r kinesisio.Record) string { return string(r.Data) }

func orderLess(a, b string) bool { return a < b }

func printOrders(orders []string) { fmt.Println("read", orders) }

// ExampleWithCheckpointTable keeps each shard's position in a DynamoDB table, so that a job
// started on the table reads on where the last one stopped. The table here is in dynalite,
// a local DynamoDB, and the stream in the in-process test server.
func ExampleWithCheckpointTable() {
	dynamo, err := emulators.Start(context.Background(), emulators.Dynalite)
	if err != nil {
		fmt.Println(err) // fails the example: the output is not what it should be
		return
	}
	defer dynamo.Stop()
	srv, err := kinesistest.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("orders", 1); err != nil {
		panic(err)
	}
	put := func(orders ...string) {
		for _, order := range orders {
			if _, err := srv.Client().PutRecord(context.Background(), &kinesis.PutRecordInput{
				StreamName: aws.String("orders"), PartitionKey: aws.String(order), Data: []byte(order),
			}); err != nil {
				panic(err)
			}
		}
	}
	run := func() {
		p, s := beam.NewPipelineWithRoot()
		recs := kinesisio.ReadBounded(s, "orders",
			kinesisio.WithEndpoint(srv.URL()),
			kinesisio.WithRegion("us-east-1"),
			kinesisio.WithStaticCredentials("test", "test"),
			kinesisio.WithStartingPosition(kinesisio.TrimHorizon()), // for shards the table does not know
			kinesisio.WithCheckpointTable("orders-positions"),
			kinesisio.WithCheckpointTableEndpoint(dynamo.URL()),
			// A job waits this long for the last job's leases to expire (default 10s).
			kinesisio.WithCheckpointLeaseDuration(time.Second),
		)
		beam.ParDo0(s, printOrders, top.Smallest(s, beam.ParDo(s, orderOf, recs), 10, orderLess))
		if err := beamx.Run(context.Background(), p); err != nil {
			panic(err)
		}
	}

	put("order-01", "order-02", "order-03")
	run()
	put("order-04", "order-05")
	run() // the same table: it reads only the records the first job had not read
	// Output:
	// read [order-01 order-02 order-03]
	// read [order-04 order-05]
}
