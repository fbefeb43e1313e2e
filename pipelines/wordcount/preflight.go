package main

import (
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/preflight"
)

// preflight is what the launch checks: the stream and the checkpoint table.
func (c config) preflight() (preflight.Plan, error) {
	return pipeflags.Plan(c.Kinesis, &c.Source, "without --stream, wordcount runs its embedded demo, which needs no AWS account",
		preflight.Stream{Name: c.Stream, Flag: "--stream"})
}
