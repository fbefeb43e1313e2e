package kinesisio

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/awsconf"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/backoff"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/streamarn"
)

// option is one configuration step: the option's name, for panics, and what it sets. The
// exported option types wrap it; they differ only in the transforms that accept them.
type option struct {
	name  string
	apply func(*config) error
}

// ReadOption configures Read and ReadBounded. The read options (WithStartingPosition, the
// checkpoint table's options, …), the client options (ClientOption) and the options of both
// reads (SourceOption) are ReadOptions; a write option is not, so passing one to Read does
// not compile.
type ReadOption interface {
	unwrap() option
	readOption()
}

// WriteOption configures Write. The write options (WithAggregation, WithMaxConnections, …)
// and the client options (ClientOption) are WriteOptions.
type WriteOption interface {
	unwrap() option
	writeOption()
}

// QueueOption configures the queue read, the second source beside the shard read. The
// client options (ClientOption) and the options of both reads (SourceOption) are
// QueueOptions.
type QueueOption interface {
	unwrap() option
	queueOption()
}

// ClientOption says how to reach AWS: region, endpoint, credentials and retries. It is a
// ReadOption, a WriteOption and a QueueOption, so that one set of client options serves
// every transform. Build it with WithRegion, WithEndpoint, WithStaticCredentials,
// WithSessionToken, WithAssumeRole, WithProfile or WithRetries; a zero ClientOption panics
// when it is used.
type ClientOption struct{ o option }

func (c ClientOption) unwrap() option { return c.o }
func (ClientOption) readOption()      {}
func (ClientOption) writeOption()     {}
func (ClientOption) queueOption()     {}

// SourceOption configures both reads, the shard read (Read, ReadBounded) and the queue read:
// it is a ReadOption and a QueueOption. Build it with WithCommitAfterSinks or
// WithoutDeaggregation; a zero SourceOption panics when it is used.
type SourceOption struct{ o option }

func (c SourceOption) unwrap() option { return c.o }
func (SourceOption) readOption()      {}
func (SourceOption) queueOption()     {}

// readOnly is an option of Read and ReadBounded alone.
type readOnly struct{ o option }

func (c readOnly) unwrap() option { return c.o }
func (readOnly) readOption()      {}

// writeOnly is an option of Write alone.
type writeOnly struct{ o option }

func (c writeOnly) unwrap() option { return c.o }
func (writeOnly) writeOption()     {}

// target is the transform a list of options configures.
type target uint8

const (
	targetRead target = iota
	targetReadBounded
	targetWrite
	targetQueue
	targetQueueDeadLetters
)

func (t target) String() string {
	switch t {
	case targetRead:
		return "kinesisio.Read"
	case targetReadBounded:
		return "kinesisio.ReadBounded"
	case targetWrite:
		return "kinesisio.Write"
	case targetQueue:
		return "kinesisio.ReadQueue"
	case targetQueueDeadLetters:
		return "kinesisio.ReadQueueDeadLetters"
	}
	return fmt.Sprintf("kinesisio.target(%d)", uint8(t))
}

// reads says t is a shard read.
func (t target) reads() bool { return t == targetRead || t == targetReadBounded }

// config is everything the options set. The read and write sections are defined beside the
// transforms they configure (read_option.go, write_option.go).
type config struct {
	client clientConfig
	retry  retryConfig
	source sourceConfig
	read   readConfig
	write  writeConfig
	// given holds the names of the options given, for the rules that refuse an option that
	// does nothing for the transform or beside another option (refuseReadNoOps,
	// refuseWriteNoOps).
	given map[string]bool
	queue queueConfig
}

// sourceConfig holds the options of both reads (SourceOption).
type sourceConfig struct {
	deaggregate bool
	// commit, when set, is the Commit the read fills (WithCommitAfterSinks).
	commit *Commit
}

// clientConfig is how to reach Kinesis. It travels inside DoFns, so its fields are exported;
// its String method redacts the secret and session token, and it must never be put into
// display data or logs as a whole.
type clientConfig struct {
	Region          string
	Endpoint        string
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	RoleARN         string
	RoleSessionName string
	Profile         string
}

// settings is the configuration in awsconf's terms.
func (c clientConfig) settings() awsconf.Settings {
	return awsconf.Settings{
		Region: c.Region, Endpoint: c.Endpoint, Profile: c.Profile,
		AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken,
		RoleARN: c.RoleARN, RoleSessionName: c.RoleSessionName,
	}
}

// String describes the configuration with credentials redacted.
func (c clientConfig) String() string { return c.settings().String() }

// GoString makes %#v redact too.
func (c clientConfig) GoString() string { return c.String() }

// credentialsSource names where credentials come from, for logs and display data.
func (c clientConfig) credentialsSource() string { return c.settings().CredentialsSource() }

// retryConfig is the connector's own retry policy for Kinesis calls (the SDK's retries are
// turned off so that the two layers do not multiply). It mirrors the Spark connectors'
// kinesis.client.numRetries, retryIntervalMs and maxRetryIntervalMs.
type retryConfig struct {
	NumRetries       int
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
}

// policy is the retry policy in internal/backoff's terms.
func (r retryConfig) policy() backoff.Policy {
	return backoff.Policy{Retries: r.NumRetries, Initial: r.RetryInterval, Max: r.MaxRetryInterval}
}

func defaultConfig() config {
	return config{
		retry:  retryConfig{NumRetries: 3, RetryInterval: time.Second, MaxRetryInterval: 10 * time.Second},
		source: sourceConfig{deaggregate: true},
		read:   defaultReadConfig(),
		write:  defaultWriteConfig(),
		given:  map[string]bool{},
		queue:  defaultQueueConfig(),
	}
}

// buildConfig applies opts for the transform t. It panics on a bad option, as Beam
// transforms do at construction: a nil or zero one, a bad value, or an option that does
// nothing for t or beside another option given.
func buildConfig[O interface{ unwrap() option }](t target, opts []O) config {
	cfg := defaultConfig()
	for _, o := range opts {
		if any(o) == nil {
			panic(fmt.Sprintf("%s: a nil option was passed; build options with the kinesisio.With... functions", t))
		}
		op := o.unwrap()
		if op.apply == nil {
			panic(fmt.Sprintf("%s: a zero %T was passed; build options with the kinesisio.With... functions", t, o))
		}
		if err := op.apply(&cfg); err != nil {
			panic(fmt.Sprintf("%s: option %s: %v", t, op.name, err))
		}
		cfg.given[op.name] = true
	}
	if err := cfg.validate(t); err != nil {
		panic(fmt.Sprintf("%s: %v", t, err))
	}
	if t.reads() {
		cfg.read.readID = newReadID()
	}
	return cfg
}

func (c *config) validate(t target) error {
	if c.client.RoleSessionName != "" && c.client.RoleARN == "" {
		return fmt.Errorf("a role session name was given without a role ARN; use WithAssumeRole(roleARN, sessionName)")
	}
	if c.retry.MaxRetryInterval < c.retry.RetryInterval {
		return fmt.Errorf("WithRetries: the maximum retry interval %v is shorter than the first interval %v; make it at least as long", c.retry.MaxRetryInterval, c.retry.RetryInterval)
	}
	if t.reads() {
		if err := c.read.validate(); err != nil {
			return err
		}
		return c.refuseReadNoOps(t == targetReadBounded)
	}
	if t == targetWrite {
		if err := c.write.validate(); err != nil {
			return err
		}
		return c.refuseWriteNoOps()
	}
	if t == targetQueue || t == targetQueueDeadLetters {
		return c.queue.validate(t)
	}
	return nil
}

// onlyOne returns an error naming the options of names that were given, when more than one
// was: each sets what the others set, and the last one would silently win.
func (c *config) onlyOne(what string, names ...string) error {
	var given []string
	for _, n := range names {
		if c.given[n] {
			given = append(given, n)
		}
	}
	if len(given) < 2 {
		return nil
	}
	return fmt.Errorf("options %s each set %s; keep one", strings.Join(given, " and "), what)
}

// noOp is the error of an option that does nothing where it was given.
func noOp(name, why, fix string) error {
	return fmt.Errorf("option %s does nothing here: %s; %s", name, why, fix)
}

var (
	regionPattern      = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)+$`)
	roleARNPattern     = regexp.MustCompile(`^arn:aws[a-z0-9-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$`)
	sessionNamePattern = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
	streamNamePattern  = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)
)

// validateStreamName checks a stream name, or a stream ARN, against the service's patterns.
func validateStreamName(transform, name string) {
	if strings.HasPrefix(name, "arn:") {
		if _, ok := streamarn.Parse(name); !ok {
			panic(fmt.Sprintf("%s: stream ARN %q is invalid: a Kinesis stream ARN is arn:aws:kinesis:<region>:<12-digit account>:stream/<name>", transform, name))
		}
		return
	}
	if !streamNamePattern.MatchString(name) {
		panic(fmt.Sprintf("%s: stream name %q is invalid: Kinesis stream names are 1 to 128 characters of a-z, A-Z, 0-9, '_', '.' and '-'; or pass the stream's ARN", transform, name))
	}
}

// regionFromStreamARN makes the region of a stream given by ARN the client's region. A
// WithRegion that names another region panics: the ARN's stream is only in its own.
func regionFromStreamARN(transform, stream string, cfg *config) {
	a, ok := streamarn.Parse(stream)
	if !ok {
		return
	}
	switch cfg.client.Region {
	case "":
		cfg.client.Region = a.Region
	case a.Region:
	default:
		panic(fmt.Sprintf("%s: the stream ARN %s is in region %s but WithRegion says %s; drop WithRegion or make them agree", transform, stream, a.Region, cfg.client.Region))
	}
}

// WithRegion sets the AWS region, e.g. "eu-west-1". Without it the SDK's default resolution
// applies (AWS_REGION, the shared config file).
func WithRegion(region string) ClientOption {
	return ClientOption{option{name: "WithRegion", apply: func(c *config) error {
		if !regionPattern.MatchString(region) {
			return fmt.Errorf("region %q is not an AWS region name like \"us-east-1\"", region)
		}
		c.client.Region = region
		return nil
	}}}
}

// WithEndpoint sends every request to endpoint instead of the regional Kinesis endpoint, e.g.
// a VPC endpoint or a local Kinesis-compatible server ("http://127.0.0.1:4567"). It is the
// Spark connectors' endpointUrl.
func WithEndpoint(endpoint string) ClientOption {
	return ClientOption{option{name: "WithEndpoint", apply: func(c *config) error {
		u, err := url.Parse(endpoint)
		if err != nil {
			return fmt.Errorf("endpoint %q is not a URL: %w", endpoint, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("endpoint %q must be an absolute http:// or https:// URL with a host", endpoint)
		}
		if u.User != nil {
			return fmt.Errorf("endpoint must not carry credentials in the URL; use WithStaticCredentials")
		}
		c.client.Endpoint = endpoint
		return nil
	}}}
}

// WithStaticCredentials uses a fixed access key instead of the default credential chain (the
// Spark connectors' awsAccessKeyId and awsSecretKey). Prefer the default chain or WithAssumeRole
// in production: static keys travel inside the serialised pipeline. They are never logged or
// shown in display data.
func WithStaticCredentials(accessKeyID, secretKey string) ClientOption {
	return ClientOption{option{name: "WithStaticCredentials", apply: func(c *config) error {
		if accessKeyID == "" || secretKey == "" {
			return fmt.Errorf("both the access key ID and the secret key must be non-empty")
		}
		c.client.AccessKeyID, c.client.SecretAccessKey = accessKeyID, secretKey
		return nil
	}}}
}

// WithSessionToken adds a session token to the keys given by WithStaticCredentials, for
// temporary credentials.
func WithSessionToken(token string) ClientOption {
	return ClientOption{option{name: "WithSessionToken", apply: func(c *config) error {
		if token == "" {
			return fmt.Errorf("the session token is empty")
		}
		if c.client.AccessKeyID == "" {
			return fmt.Errorf("a session token needs static keys; pass WithStaticCredentials before WithSessionToken")
		}
		c.client.SessionToken = token
		return nil
	}}}
}

// WithAssumeRole assumes roleARN through STS with the given session name, using the base
// credentials (default chain, profile or static keys) to call STS. It is the Spark
// connectors' awsSTSRoleARN and awsSTSSessionName.
func WithAssumeRole(roleARN, sessionName string) ClientOption {
	return ClientOption{option{name: "WithAssumeRole", apply: func(c *config) error {
		if !roleARNPattern.MatchString(roleARN) {
			return fmt.Errorf("role ARN %q is not an IAM role ARN like arn:aws:iam::123456789012:role/name", roleARN)
		}
		if !sessionNamePattern.MatchString(sessionName) {
			return fmt.Errorf("session name %q must be 2 to 64 characters of letters, digits and +=,.@_-", sessionName)
		}
		c.client.RoleARN, c.client.RoleSessionName = roleARN, sessionName
		return nil
	}}}
}

// WithProfile loads credentials and settings from the named profile of the shared AWS config
// and credentials files.
func WithProfile(profile string) ClientOption {
	return ClientOption{option{name: "WithProfile", apply: func(c *config) error {
		if profile == "" {
			return fmt.Errorf("the profile name is empty")
		}
		c.client.Profile = profile
		return nil
	}}}
}

// WithRetries sets how often a failed Kinesis call (throttling, 5xx, a dropped connection) is
// retried and the exponential backoff between attempts: the first wait is about interval, each
// later one doubles, capped at maxInterval, with full jitter. Defaults: 3 retries, 1s, 10s (the
// Spark connectors' kinesis.client.numRetries, retryIntervalMs and maxRetryIntervalMs).
// Errors that cannot succeed on retry (an unknown stream, bad input) are not retried.
func WithRetries(numRetries int, interval, maxInterval time.Duration) ClientOption {
	return ClientOption{option{name: "WithRetries", apply: func(c *config) error {
		if numRetries < 0 {
			return fmt.Errorf("the number of retries %d is negative; use 0 to disable retries", numRetries)
		}
		if interval <= 0 || maxInterval <= 0 {
			return fmt.Errorf("retry intervals must be positive, got %v and %v", interval, maxInterval)
		}
		c.retry = retryConfig{NumRetries: numRetries, RetryInterval: interval, MaxRetryInterval: maxInterval}
		return nil
	}}}
}

// newReadID names one Read or ReadBounded transform, so that its workers' state keys are
// its own and two reads of one stream in a pipeline do not slow each other down.
func newReadID() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("kinesisio: reading random bytes for a read id: %v", err))
	}
	return hex.EncodeToString(b)
}
