package main

import (
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/preflight"
)

// preflight is what the launch checks: the stream written.
func (c config) preflight() (preflight.Plan, error) {
	return pipeflags.Plan(c.Kinesis, nil, "without --stream, load writes to its embedded demo server, which needs no AWS account",
		preflight.Stream{Name: c.Stream, Flag: "--stream"})
}
