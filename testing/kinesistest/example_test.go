package kinesistest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func Example() {
	srv, err := kinesistest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("orders", 2); err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	client := srv.Client() // or kinesis.New(..., BaseEndpoint: aws.String(srv.URL()))
	out, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{
		StreamName: aws.String("orders"),
		Records: []types.PutRecordsRequestEntry{
			{PartitionKey: aws.String("customer-1"), Data: []byte("first order")},
			{PartitionKey: aws.String("customer-2"), Data: []byte("second order")},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("failed entries:", *out.FailedRecordCount)

	stored, err := srv.StreamRecords("orders")
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range stored {
		fmt.Printf("%s %s %q\n", r.ShardID, r.PartitionKey, r.Data)
	}
	fmt.Println("PutRecords calls:", srv.CallCount("PutRecords"))
	// Output:
	// failed entries: 0
	// shardId-000000000001 customer-1 "first order"
	// shardId-000000000001 customer-2 "second order"
	// PutRecords calls: 1
}

func ExampleFaults() {
	srv, err := kinesistest.Start(kinesistest.WithFaults(kinesistest.Faults{
		Seed:                 1,
		PutEntryThrottleRate: 1, // every entry is throttled
		Operations:           []string{"PutRecords"},
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("orders", 1); err != nil {
		log.Fatal(err)
	}
	out, err := srv.Client().PutRecords(context.Background(), &kinesis.PutRecordsInput{
		StreamName: aws.String("orders"),
		Records:    []types.PutRecordsRequestEntry{{PartitionKey: aws.String("k"), Data: []byte("x")}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*out.FailedRecordCount, *out.Records[0].ErrorCode)
	// Output: 1 ProvisionedThroughputExceededException
}
