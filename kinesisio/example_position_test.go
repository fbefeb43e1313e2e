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
	register.Function1x0(printRecord)
}

// printRecord prints a record's data.
func printRecord(r kinesisio.Record) { fmt.Println("read", string(r.Data)) }

// ExampleParseStartingPosition turns the Spark connectors' startingPosition strings into
// starting positions, and resumes a stream after the last record a previous run processed,
// given as the JSON map of shard positions those connectors keep in their offsets.
func ExampleParseStartingPosition() {
	for _, s := range []string{"trim_horizon", "LATEST", "AT_TIMESTAMP 2026-01-02T03:04:05Z", "yesterday"} {
		p, err := kinesisio.ParseStartingPosition(s)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(p)
	}

	srv, err := kinesistest.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("orders", 1); err != nil {
		panic(err)
	}
	var seqs []string
	for _, order := range []string{"order-01", "order-02", "order-03"} {
		out, err := srv.Client().PutRecord(context.Background(), &kinesis.PutRecordInput{
			StreamName: aws.String("orders"), PartitionKey: aws.String(order), Data: []byte(order),
		})
		if err != nil {
			panic(err)
		}
		seqs = append(seqs, aws.ToString(out.SequenceNumber))
	}

	// The previous run processed order-01.
	start, err := kinesisio.ParseStartingPosition(fmt.Sprintf(
		`{"shardId-000000000000": {"iteratorType": "AFTER_SEQUENCE_NUMBER", "iteratorPosition": %q}}`, seqs[0]))
	if err != nil {
		panic(err)
	}
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.ReadBounded(s, "orders",
		kinesisio.WithEndpoint(srv.URL()),
		kinesisio.WithRegion("us-east-1"),
		kinesisio.WithStaticCredentials("test", "test"),
		kinesisio.WithStartingPosition(start),
	)
	beam.ParDo0(s, printRecord, recs)
	if err := beamx.Run(context.Background(), p); err != nil {
		panic(err)
	}
	// Unordered output:
	// TRIM_HORIZON
	// LATEST
	// AT_TIMESTAMP(2026-01-02T03:04:05Z)
	// error: starting position "yesterday" is not latest, trim_horizon, earliest, AT_TIMESTAMP <time> or a JSON map of shard positions
	// read order-02
	// read order-03
}
