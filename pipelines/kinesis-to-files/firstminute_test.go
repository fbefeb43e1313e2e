package main

import (
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/clitest"
	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The command checks the S3 bucket of an s3:// --staging_dir before it launches: a bucket
// that does not exist (moto's S3) is one line and exit status 1; one that exists passes.
func TestAStagingBucketThatDoesNotExistIsOneLine(t *testing.T) {
	moto := components.StartMotoT(t)
	createBucket(t, moto.Endpoint, "lake")
	srv := kinesistest.StartT(t, kinesistest.WithStream("events", 1))
	env := clitest.Env(t, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
	args := func(dir string) []string {
		return []string{"--stream=events", "--kinesis_endpoint=" + srv.URL(), "--bounded", "--staging_dir=" + dir, "--s3_endpoint=" + moto.Endpoint}
	}
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		r := clitest.Run(t, env, time.Minute, args("s3://no-such-lake/staging")...)
		clitest.Expect(t, r, 1, "kinesis-to-files: bucket no-such-lake of --staging_dir=s3://no-such-lake/staging does not exist: create it, or give --staging_dir a bucket that does")
	})
	t.Run("present", func(t *testing.T) {
		t.Parallel()
		r := clitest.Run(t, env, 2*time.Minute, args("s3://lake/staging")...)
		if r.Code != 0 || r.Stderr != "" {
			t.Errorf("exit %d, stderr:\n%s\nwant exit 0 and nothing on standard error", r.Code, r.Stderr)
		}
	})
}
