package pipeflags

import (
	"flag"

	"github.com/beamkinesis/beamkinesis/transforms/filesink"
)

// S3 is how a pipeline writes to s3:// paths. Credentials are the Kinesis flags' own
// (--aws_profile, --role_arn, --aws_credentials_from_env): one identity for the job.
type S3 struct {
	// Endpoint replaces the regional S3 endpoint, e.g. a local S3-compatible server; it
	// turns on path-style addressing.
	Endpoint string
	// Region is the bucket's region; empty means --kinesis_region.
	Region string
}

// Register defines --s3_endpoint and --s3_region on fs.
func (s *S3) Register(fs *flag.FlagSet) {
	fs.StringVar(&s.Endpoint, "s3_endpoint", "", "S3 endpoint URL replacing the regional one, with path-style addressing, e.g. http://127.0.0.1:5000 for a local S3 server")
	fs.StringVar(&s.Region, "s3_region", "", "AWS region of the S3 bucket (default: --kinesis_region, else the AWS SDK's resolution)")
}

// Config returns the filesink S3 configuration of the flags, with the credentials k
// stands for, reading static keys through getenv with --aws_credentials_from_env.
func (s S3) Config(k Kinesis, getenv func(string) string) (filesink.S3, error) {
	settings, err := k.Settings(getenv)
	if err != nil {
		return filesink.S3{}, err
	}
	cfg := filesink.S3{Endpoint: s.Endpoint, Region: s.Region, Profile: settings.Profile,
		AccessKeyID: settings.AccessKeyID, SecretAccessKey: settings.SecretAccessKey, SessionToken: settings.SessionToken,
		RoleARN: settings.RoleARN, RoleSessionName: settings.RoleSessionName}
	if cfg.Region == "" {
		cfg.Region = settings.Region
	}
	return cfg, nil
}
