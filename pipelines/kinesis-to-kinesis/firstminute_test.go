package main

import (
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/clitest"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// Both streams are checked before the launch; the line names the flag of the one missing.
func TestAMissingOutputStreamIsOneLine(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("in", 1))
	r := clitest.Run(t, clitest.Env(t, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test"), time.Minute,
		"--input_stream=in", "--output_stream=out", "--kinesis_endpoint="+srv.URL(), "--kinesis_region=us-east-1")
	clitest.Expect(t, r, 1, "kinesis-to-kinesis: stream out (--output_stream) does not exist at "+srv.URL()+" (Stream out under account 123456789012 not found.): check --output_stream, and that the stream is in --kinesis_region=us-east-1")
}
