// Package pipeflags holds the command-line flags the pipelines share: how to reach Kinesis,
// where to start reading, bounded or streaming, and the window size, and turns them into
// kinesisio options. Main is the commands' shared main function.
//
// Beam already owns --region (the GCP region of a Dataflow job) and --endpoint (the job
// service of the universal, Flink and Prism job-server runners), so the Kinesis flags are
// --kinesis_region and --kinesis_endpoint. Importing this package also registers Beam's vet
// runner, so every pipeline accepts --runner=vet.
package pipeflags

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/vet" // --runner=vet

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/awsconf"
)

// Kinesis is how a pipeline reaches Kinesis. Empty fields leave the AWS SDK's defaults:
// the region and the credentials of the default chain (environment, shared config,
// instance or task role).
type Kinesis struct {
	// Region is the AWS region, e.g. "eu-west-1".
	Region string
	// Endpoint replaces the regional endpoint, e.g. a VPC endpoint or a local server.
	Endpoint string
	// Profile names a profile of the shared AWS config and credentials files.
	Profile string
	// RoleARN is a role to assume through STS, with RoleSessionName as its session name.
	RoleARN         string
	RoleSessionName string
	// StaticFromEnv takes static keys from the launching process's AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN and ships them with the pipeline, for
	// workers that have no AWS credentials of their own (Dataflow, Flink in Docker).
	StaticFromEnv bool
}

// Register defines the flags --kinesis_region, --kinesis_endpoint, --aws_profile,
// --role_arn and --role_session_name on fs.
func (k *Kinesis) Register(fs *flag.FlagSet) {
	fs.StringVar(&k.Region, "kinesis_region", "", "AWS region of the Kinesis streams, e.g. eu-west-1 (default: the AWS SDK's resolution, e.g. AWS_REGION)")
	fs.StringVar(&k.Endpoint, "kinesis_endpoint", "", "Kinesis endpoint URL replacing the regional one, e.g. http://127.0.0.1:4567 for a local server")
	fs.StringVar(&k.Profile, "aws_profile", "", "profile of the shared AWS config/credentials files to take credentials from")
	fs.StringVar(&k.RoleARN, "role_arn", "", "IAM role to assume through STS for Kinesis calls")
	fs.StringVar(&k.RoleSessionName, "role_session_name", "beamkinesis", "STS session name used with --role_arn")
	fs.BoolVar(&k.StaticFromEnv, "aws_credentials_from_env", false, "ship the launcher's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) to the workers as static keys, for workers without AWS credentials (e.g. Dataflow); they are redacted in logs")
}

// Options returns the kinesisio client options the flags stand for, reading static keys
// from the environment with --aws_credentials_from_env. kinesisio validates them when the
// transform is built; ReadOptions and WriteOptions give them to a read and a write.
func (k Kinesis) Options() ([]kinesisio.ClientOption, error) {
	return k.OptionsFrom(os.Getenv)
}

// OptionsFrom is Options with the environment read through getenv.
func (k Kinesis) OptionsFrom(getenv func(string) string) ([]kinesisio.ClientOption, error) {
	settings, err := k.Settings(getenv)
	if err != nil {
		return nil, err
	}
	var opts []kinesisio.ClientOption
	if settings.AccessKeyID != "" {
		opts = append(opts, kinesisio.WithStaticCredentials(settings.AccessKeyID, settings.SecretAccessKey))
		if settings.SessionToken != "" {
			opts = append(opts, kinesisio.WithSessionToken(settings.SessionToken))
		}
	}
	if settings.Region != "" {
		opts = append(opts, kinesisio.WithRegion(settings.Region))
	}
	if settings.Endpoint != "" {
		opts = append(opts, kinesisio.WithEndpoint(settings.Endpoint))
	}
	if settings.Profile != "" {
		opts = append(opts, kinesisio.WithProfile(settings.Profile))
	}
	if settings.RoleARN != "" {
		opts = append(opts, kinesisio.WithAssumeRole(settings.RoleARN, settings.RoleSessionName))
	}
	return opts, nil
}

// Settings returns the AWS settings the flags stand for, reading static keys through getenv
// with --aws_credentials_from_env: the same identity as Options, for the clients a
// pipeline's launcher calls AWS with itself (awsconf.Load).
func (k Kinesis) Settings(getenv func(string) string) (awsconf.Settings, error) {
	s := awsconf.Settings{Region: k.Region, Endpoint: k.Endpoint, Profile: k.Profile, RoleARN: k.RoleARN, RoleSessionName: k.RoleSessionName}
	if k.StaticFromEnv {
		s.AccessKeyID, s.SecretAccessKey, s.SessionToken = getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"), getenv("AWS_SESSION_TOKEN")
		if s.AccessKeyID == "" || s.SecretAccessKey == "" {
			return awsconf.Settings{}, errors.New("--aws_credentials_from_env: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set")
		}
	}
	return s, nil
}

// Source says where and how a pipeline reads its input stream.
type Source struct {
	// Queue is the ARN of a Kinesis queue to read instead of a stream's shards
	// (kinesisio.ReadQueue), or EmbeddedQueue; see Input.
	Queue string
	// StartingPosition is the Spark connectors' startingPosition: latest, trim_horizon,
	// earliest, AT_TIMESTAMP <RFC 3339> or a JSON map of shard positions. Empty means the
	// pipeline's default.
	StartingPosition string
	// Bounded reads what the stream holds when the read starts and stops
	// (kinesisio.ReadBounded) instead of reading forever (kinesisio.Read).
	Bounded OptionalBool
	// MaxReadTime, when positive, ends a streaming read after the records that arrived
	// within it of the read's start (kinesisio.WithMaxReadTime).
	MaxReadTime time.Duration
	// Window is the size of the fixed event-time windows of a streaming pipeline.
	Window time.Duration
	// StartupTimeout bounds how long a streaming read that has never reached Kinesis keeps
	// trying (kinesisio.WithStartupTimeout); 0 rides out without a bound.
	StartupTimeout time.Duration
	// Table is the KCL-compatible DynamoDB table that keeps each shard's position
	// (kinesisio.WithCheckpointTable); empty keeps none.
	Table Checkpoints
}

// Checkpoints are the flags of the checkpoint table: a job started on it resumes every
// shard after the position the last job committed, and can take over a KCL application's
// table.
type Checkpoints struct {
	// Name is the table's name (kinesisio.WithCheckpointTable).
	Name string
	// Endpoint replaces the regional DynamoDB endpoint (kinesisio.WithCheckpointTableEndpoint).
	Endpoint string
	// Takeover takes the leases of a live owner at once (kinesisio.WithCheckpointTakeover).
	Takeover bool
	// LeaseDuration is how long a lease lives unrenewed (kinesisio.WithCheckpointLeaseDuration);
	// 0 keeps kinesisio's default.
	LeaseDuration time.Duration
}

// register defines --checkpoint_table, --checkpoint_table_endpoint, --checkpoint_takeover
// and --checkpoint_lease_duration on fs.
func (c *Checkpoints) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Name, "checkpoint_table", "", "DynamoDB table (KCL lease table layout) that keeps each shard's position, written after the runner commits; a job started on it resumes where the last one stopped, and --starting_position applies only to shards it has no position for (default: none)")
	fs.StringVar(&c.Endpoint, "checkpoint_table_endpoint", "", "DynamoDB endpoint URL of --checkpoint_table replacing the regional one, e.g. http://127.0.0.1:8000 for a local DynamoDB")
	fs.BoolVar(&c.Takeover, "checkpoint_takeover", false, "take the leases of --checkpoint_table from a live owner at once (a redeployment replacing a running job); false waits one lease duration and fails if the owner is alive")
	fs.DurationVar(&c.LeaseDuration, "checkpoint_lease_duration", 0, "how long a lease of --checkpoint_table lives without renewal, at least 300ms (0: kinesisio's default, 10s)")
}

// options returns the kinesisio options of the flags given.
func (c Checkpoints) options() ([]kinesisio.ReadOption, error) {
	if c.Name == "" {
		if c.Endpoint != "" || c.Takeover || c.LeaseDuration != 0 {
			return nil, errors.New("--checkpoint_table_endpoint, --checkpoint_takeover and --checkpoint_lease_duration need --checkpoint_table")
		}
		return nil, nil
	}
	opts := []kinesisio.ReadOption{kinesisio.WithCheckpointTable(c.Name)}
	if c.Endpoint != "" {
		opts = append(opts, kinesisio.WithCheckpointTableEndpoint(c.Endpoint))
	}
	if c.Takeover {
		opts = append(opts, kinesisio.WithCheckpointTakeover())
	}
	if c.LeaseDuration < 0 {
		return nil, fmt.Errorf("--checkpoint_lease_duration=%v must not be negative", c.LeaseDuration)
	}
	if c.LeaseDuration > 0 {
		opts = append(opts, kinesisio.WithCheckpointLeaseDuration(c.LeaseDuration))
	}
	return opts, nil
}

// Register defines --queue, --starting_position, --bounded, --max_read_time, --window,
// --startup_timeout and the checkpoint table's flags on fs.
func (s *Source) Register(fs *flag.FlagSet, defaultWindow time.Duration) {
	fs.StringVar(&s.Queue, "queue", "", "ARN of a Kinesis queue to read instead of a stream's shards, each record acknowledged once the pipeline's sinks wrote it (\"embedded\": the embedded demo reads its stream through a queue)")
	fs.StringVar(&s.StartingPosition, "starting_position", "", "where to start reading: latest, trim_horizon, earliest, \"AT_TIMESTAMP <RFC 3339 time>\" or a JSON map of shard positions (default trim_horizon when bounded or with the embedded server, latest otherwise)")
	fs.Var(&s.Bounded, "bounded", "read what the stream holds now and stop (a batch job); --bounded=false reads forever in fixed windows (default true with the embedded server, false otherwise)")
	fs.DurationVar(&s.MaxReadTime, "max_read_time", 0, "end a streaming read after the records that arrived within this time of its start (0: never)")
	fs.DurationVar(&s.Window, "window", defaultWindow, "size of the fixed event-time (arrival-time) windows")
	fs.DurationVar(&s.StartupTimeout, "startup_timeout", DefaultStartupTimeout, "a streaming read that has not once listed the stream's shards within this time of its start fails, naming the endpoint and the error (a wrong endpoint or region); once it has, it rides out outages (0: rides out from the start)")
	s.Table.register(fs)
}

// DefaultStartupTimeout is --startup_timeout's default, kinesisio.WithStartupTimeout's.
const DefaultStartupTimeout = 3 * time.Minute

// EmbeddedMaxReadTime ends a streaming read of the embedded server, which receives no new
// records, unless --max_read_time says otherwise, so that the demo ends.
const EmbeddedMaxReadTime = 5 * time.Second

// Resolve returns whether the read is bounded and its read options (starting position,
// maximum read time, the startup bound of a streaming read, and checkpoint table).
//
// Against the embedded server (embedded true) a read is bounded unless --bounded=false,
// starts at the trim horizon, and a streaming read ends after EmbeddedMaxReadTime. Against
// real streams a read is streaming unless --bounded, and starts at LATEST, the Spark
// connectors' default, or at the trim horizon when bounded: a one-shot read from LATEST
// would read nothing. --starting_position and --max_read_time override these defaults.
func (s Source) Resolve(embedded bool) (bounded bool, opts []kinesisio.ReadOption, err error) {
	if err := s.Validate(); err != nil {
		return false, nil, err
	}
	bounded = s.Bounded.Or(embedded)
	start := kinesisio.Latest()
	if bounded || embedded {
		start = kinesisio.TrimHorizon()
	}
	if s.StartingPosition != "" {
		p, err := kinesisio.ParseStartingPosition(s.StartingPosition)
		if err != nil {
			return false, nil, fmt.Errorf("--starting_position: %w", err)
		}
		start = p
	}
	opts = []kinesisio.ReadOption{kinesisio.WithStartingPosition(start)}
	maxReadTime := s.MaxReadTime
	if maxReadTime == 0 && embedded && !bounded {
		maxReadTime = EmbeddedMaxReadTime
	}
	if maxReadTime > 0 {
		opts = append(opts, kinesisio.WithMaxReadTime(maxReadTime))
	}
	if !bounded {
		opts = append(opts, kinesisio.WithStartupTimeout(s.StartupTimeout))
	}
	table, err := s.Table.options()
	if err != nil {
		return false, nil, err
	}
	return bounded, append(opts, table...), nil
}

// Validate reports a flag value no pipeline can run with.
func (s Source) Validate() error {
	if s.Window <= 0 {
		return fmt.Errorf("--window=%v: the window size must be positive", s.Window)
	}
	if s.MaxReadTime < 0 {
		return fmt.Errorf("--max_read_time=%v must not be negative", s.MaxReadTime)
	}
	if s.StartupTimeout < 0 {
		return fmt.Errorf("--startup_timeout=%v must not be negative (0 rides out without a bound)", s.StartupTimeout)
	}
	return nil
}

// ReadOptions returns a new slice of the client options followed by opts, for a read.
func ReadOptions(client []kinesisio.ClientOption, opts ...kinesisio.ReadOption) []kinesisio.ReadOption {
	all := make([]kinesisio.ReadOption, 0, len(client)+len(opts))
	for _, o := range client {
		all = append(all, o)
	}
	return append(all, opts...)
}

// WriteOptions returns a new slice of the client options followed by opts, for a write.
func WriteOptions(client []kinesisio.ClientOption, opts ...kinesisio.WriteOption) []kinesisio.WriteOption {
	all := make([]kinesisio.WriteOption, 0, len(client)+len(opts))
	for _, o := range client {
		all = append(all, o)
	}
	return append(all, opts...)
}

// OptionalBool is a boolean flag that knows whether it was given, so that its default can
// depend on other flags.
type OptionalBool struct {
	set, value bool
}

// Or returns the flag's value if it was given, def otherwise.
func (b OptionalBool) Or(def bool) bool {
	if b.set {
		return b.value
	}
	return def
}

// Set implements flag.Value.
func (b *OptionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	b.set, b.value = true, v
	return nil
}

// String implements flag.Value.
func (b *OptionalBool) String() string {
	if b == nil || !b.set {
		return ""
	}
	return strconv.FormatBool(b.value)
}

// IsBoolFlag lets the flag be given as plain --bounded.
func (b *OptionalBool) IsBoolFlag() bool { return true }

// SetBool sets the flag as if it had been given with value v.
func (b *OptionalBool) SetBool(v bool) { b.set, b.value = true, v }
