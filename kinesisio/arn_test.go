package kinesisio

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

// TestStreamARNWriteAndReadBounded writes to a stream by its ARN and reads it back by ARN:
// every message arrives, and the records read are exactly those stored, each carrying the
// stream's name.
func TestStreamARNWriteAndReadBounded(t *testing.T) {
	const n = 2000
	srv := kinesistest.StartT(t, kinesistest.WithStream("by-arn", 2))
	arn := srv.StreamARN("by-arn")
	p, s := beam.NewPipelineWithRoot()
	passert.Empty(s, Write(s, arn, generated(s, n), to(srv, WithoutAggregation())...))
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	res := readStream(t, srv, "by-arn")
	if d := streamcheck.Diff(streamcheck.Multiset(res.Records, userRecordKey), wantMessages(n), 5); d != "" {
		t.Fatal(d)
	}

	want := expected(t, srv, "by-arn", nil, nil)
	p, s = beam.NewPipelineWithRoot()
	recs := ReadBounded(s, arn, connect(srv, WithStartingPosition(TrimHorizon()))...)
	passert.Equals(s, canonical(s, recs), anys(want)...)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

func TestStreamARNRegion(t *testing.T) {
	const arn = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
	cfg := buildConfig(targetRead, []ReadOption(nil))
	regionFromStreamARN("kinesisio.Read", arn, &cfg)
	if cfg.client.Region != "eu-west-1" {
		t.Errorf("region %q from the ARN; want eu-west-1", cfg.client.Region)
	}
	cfg = buildConfig(targetRead, []ReadOption{WithRegion("us-east-1")})
	if msg := panicMessage(func() { regionFromStreamARN("kinesisio.Read", arn, &cfg) }); !strings.Contains(msg, "eu-west-1") || !strings.Contains(msg, "us-east-1") {
		t.Errorf("a WithRegion other than the ARN's: panic %q; want one naming both regions", msg)
	}
	if msg := panicMessage(func() { validateStreamName("kinesisio.Read", "arn:aws:kinesis:eu-west-1:123:stream/orders") }); !strings.Contains(msg, "stream ARN") {
		t.Errorf("a malformed ARN: panic %q; want one about the stream ARN", msg)
	}
	if msg := panicMessage(func() { validateStreamName("kinesisio.Read", arn) }); msg != "" {
		t.Errorf("a valid ARN panicked: %s", msg)
	}
}

func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}
