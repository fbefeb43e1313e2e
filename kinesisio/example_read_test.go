package kinesisio_test

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x1(one)
	register.Function1x0(printCount)
	register.Function1x2(dataKey)
}

// one counts a record.
func one(kinesisio.Record) int { return 1 }

// dataKey keys a record by its partition key.
func dataKey(r kinesisio.Record) (string, int) { return r.PartitionKey, 1 }

func printCount(n int) { fmt.Println("read", n, "records") }

// ExampleRead counts the records of each partition key per minute of arrival time, reading
// the stream "orders" from its oldest record as it grows.
func ExampleRead() {
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.Read(s, "orders",
		kinesisio.WithRegion("eu-west-1"),
		kinesisio.WithStartingPosition(kinesisio.TrimHorizon()),
		kinesisio.WithIdleThreshold(30*time.Second),
	)
	perKey := beam.ParDo(s, dataKey, beam.WindowInto(s, window.NewFixedWindows(time.Minute), recs))
	_ = stats.SumPerKey(s, perKey) // write the counts somewhere
	_ = p                          // run with beamx.Run(ctx, p); the read never ends by itself
}

// ExampleWithCommitAfterSinks keeps the stream's positions in a checkpoint table and writes
// them only once the per-minute counts holding their records were written: a job that dies
// with a minute's window open loses nothing when a new job starts on the table.
func ExampleWithCommitAfterSinks() {
	p, s := beam.NewPipelineWithRoot()
	var commit kinesisio.Commit
	recs := kinesisio.Read(s, "orders",
		kinesisio.WithRegion("eu-west-1"),
		kinesisio.WithStartingPosition(kinesisio.TrimHorizon()),
		kinesisio.WithCheckpointTable("orders-positions"),
		kinesisio.WithCommitAfterSinks(&commit),
	)
	perKey := beam.ParDo(s, dataKey, beam.WindowInto(s, window.NewFixedWindows(time.Minute), recs))
	written := stats.SumPerKey(s, perKey) // in a real job: the sink's output
	commit.After(s, written)
	_ = p // run with beamx.Run(ctx, p)
}

// ExampleReadBounded reads every record a stream holds as a bounded PCollection, here from
// an in-process test server.
func ExampleReadBounded() {
	srv, err := kinesistest.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	if err := srv.CreateStream("orders", 2); err != nil {
		panic(err)
	}
	for _, order := range []string{"order-01", "order-02", "order-03"} {
		if _, err := srv.Client().PutRecord(context.Background(), &kinesis.PutRecordInput{
			StreamName: aws.String("orders"), PartitionKey: aws.String(order), Data: []byte(order + " created"),
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
	)
	beam.ParDo0(s, printCount, stats.Sum(s, beam.ParDo(s, one, recs)))
	if err := beamx.Run(context.Background(), p); err != nil {
		panic(err)
	}
	// Output: read 3 records
}
