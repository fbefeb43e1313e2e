package main

import (
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/clitest"
)

// Without credentials the load fails before it launches, in one line that names the
// embedded demo.
func TestLoadWithoutCredentialsIsOneLine(t *testing.T) {
	r := clitest.Run(t, clitest.Env(t), time.Minute, "--stream=events", "--kinesis_region=eu-west-1")
	clitest.Expect(t, r, 1, "load: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile with --aws_profile (or AWS_PROFILE), or run where an instance or task role provides them; without --stream, load writes to its embedded demo server, which needs no AWS account")
}
