package main

import (
	"strings"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/preflight"
)

// preflight is what the launch checks: the stream, the checkpoint table and the S3 bucket
// of an s3:// --staging_dir.
func (c config) preflight() (preflight.Plan, error) {
	p, err := pipeflags.Plan(c.Kinesis, &c.Source, "without --stream, kinesis-to-files runs its embedded demo, which needs no AWS account",
		preflight.Stream{Name: c.Stream, Flag: "--stream"})
	if err != nil || (len(p.Streams) == 0 && len(p.Queues) == 0) {
		return p, err
	}
	if rest, ok := strings.CutPrefix(c.StagingDir, "s3://"); ok {
		bucket, _, _ := strings.Cut(rest, "/")
		p.S3 = preflight.S3{Bucket: bucket, Dir: c.StagingDir, Endpoint: c.S3.Endpoint, Region: c.S3.Region}
	}
	return p, nil
}
