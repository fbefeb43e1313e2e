package main

import (
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/preflight"
)

// preflight is what the launch checks: both streams and the checkpoint table.
func (c config) preflight() (preflight.Plan, error) {
	return pipeflags.Plan(c.Kinesis, &c.Source, "without --input_stream and --output_stream, kinesis-to-kinesis runs its embedded demo, which needs no AWS account",
		preflight.Stream{Name: c.Input, Flag: "--input_stream"}, preflight.Stream{Name: c.Output, Flag: "--output_stream"})
}
