package kinesisio_test

import (
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func init() {
	// A key function crosses Beam's boundaries by name, so it is registered.
	register.Function1x1(orderKey)
}

// orderKey keys an order event by its first 8 bytes (the order id), so that the events of
// one order stay in order on one shard.
func orderKey(event []byte) string { return string(event[:min(8, len(event))]) }

// ExampleWrite writes byte events to the stream "orders", KPL-aggregated, and keeps the
// ones that could not be written for a dead-letter sink.
func ExampleWrite() {
	p, s := beam.NewPipelineWithRoot()
	events := beam.Create(s, []byte("order-01 created"), []byte("order-01 paid"))

	msgs := kinesisio.MessagesFromBytes(s, events, orderKey)
	failed := kinesisio.Write(s, "orders", msgs,
		kinesisio.WithRegion("eu-west-1"),
		kinesisio.WithAggregation(),
		kinesisio.WithRetries(5, 100*time.Millisecond, 5*time.Second),
	)
	_ = failed // e.g. write to a dead-letter table; each has Reason and ErrorCode
	_ = p      // run with beamx.Run(ctx, p)
}
