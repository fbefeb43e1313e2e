package kinesistest

import (
	"fmt"
	"log"
	"time"
)

// Option configures a Server at Start.
type Option func(*config)

// config holds everything Start needs; defaults live in defaultConfig.
type config struct {
	addr            string
	clock           Clock
	limits          bool
	largeReads      bool
	faults          Faults
	iteratorTTL     time.Duration
	logger          *log.Logger
	transitionDelay time.Duration
	consumerDelay   time.Duration
	subLifetime     time.Duration
	subHeartbeat    time.Duration
	resubWindow     time.Duration
	readDelay       time.Duration
	tls             bool
	tlsAddr         string
	certFile        string
	creds           []Credential // nil: signatures are not checked
	queueDelay      time.Duration
	queueSeed       int64
	queueInFlight   int
	region          string // empty: requests may be signed for any region
	streams         []streamSpec
}

func defaultConfig() config {
	return config{
		addr:         "127.0.0.1:0",
		clock:        systemClock{},
		iteratorTTL:  5 * time.Minute,
		subLifetime:  defaultSubLifetime,
		subHeartbeat: defaultSubHeartbeat,
		resubWindow:  defaultResubscribeWindow,
		tlsAddr:      "127.0.0.1:0",

		queueInFlight: defaultQueueInFlightLimit,
	}
}

func (c *config) validate() error {
	if c.clock == nil {
		return fmt.Errorf("WithClock: clock is nil; pass a Clock such as NewManualClock(t) or leave the option out")
	}
	if c.iteratorTTL <= 0 {
		return fmt.Errorf("WithIteratorTTL: TTL %v must be positive", c.iteratorTTL)
	}
	if c.transitionDelay < 0 {
		return fmt.Errorf("WithTransitionDelay: delay %v must not be negative", c.transitionDelay)
	}
	if c.consumerDelay < 0 {
		return fmt.Errorf("WithConsumerActivationDelay: delay %v must not be negative", c.consumerDelay)
	}
	if c.subLifetime <= 0 {
		return fmt.Errorf("WithSubscriptionLifetime: lifetime %v must be positive", c.subLifetime)
	}
	if c.resubWindow < 0 {
		return fmt.Errorf("WithResubscribeWindow: window %v must not be negative", c.resubWindow)
	}
	if c.readDelay < 0 {
		return fmt.Errorf("WithReadVisibilityDelay: delay %v must not be negative", c.readDelay)
	}
	if c.subHeartbeat <= 0 {
		return fmt.Errorf("WithSubscriptionHeartbeat: interval %v must be positive", c.subHeartbeat)
	}
	if c.creds != nil {
		if len(c.creds) == 0 {
			return fmt.Errorf("WithCredentials: give at least one access key, or leave the option out to accept any signature")
		}
		for _, k := range c.creds {
			if k.AccessKeyID == "" || k.SecretAccessKey == "" {
				return fmt.Errorf("WithCredentials: access key %q has an empty ID or secret", k.AccessKeyID)
			}
		}
	}
	if c.certFile != "" && !c.tls {
		return fmt.Errorf("WithCertFile: the certificate is made for the TLS port; pass WithTLS too")
	}
	if err := c.validateQueues(); err != nil {
		return err
	}
	if err := c.faults.validate(); err != nil {
		return fmt.Errorf("WithFaults: %w", err)
	}
	return nil
}

// WithAddr makes the server listen on addr (host:port) instead of a free port
// on 127.0.0.1.
func WithAddr(addr string) Option {
	return func(c *config) { c.addr = addr }
}

// WithClock makes the server read time from c instead of the wall clock.
// Injected latency (Faults.Latency) always uses real time.
func WithClock(c Clock) Option {
	return func(cfg *config) { cfg.clock = c }
}

// WithLimits makes the server enforce the service's per-shard throughput
// limits and control-plane rates from the start (see SetLimits).
func WithLimits() Option {
	return func(c *config) { c.limits = true }
}

// WithLargeReadThrottle makes GetRecords throttle a shard's reads after a
// large page, as the service documents ("If a call returns [10 MiB],
// subsequent calls made within the next 5 seconds throw
// ProvisionedThroughputExceededException"), from the start (see
// SetLargeReadThrottle for the rule). It is independent of WithLimits.
func WithLargeReadThrottle() Option {
	return func(c *config) { c.largeReads = true }
}

// WithFaults makes the server inject f's faults from the start (see SetFaults).
func WithFaults(f Faults) Option {
	return func(c *config) { c.faults = f }
}

// WithIteratorTTL sets how long a shard iterator stays valid, measured on the
// server clock. The service's value, and the default, is 5 minutes.
func WithIteratorTTL(d time.Duration) Option {
	return func(c *config) { c.iteratorTTL = d }
}

// WithLogger makes the server log one line per stream created or deleted and
// per request that ends in an error. A nil logger, the default, keeps it quiet.
func WithLogger(l *log.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithTransitionDelay keeps a stream created over HTTP in CREATING, and a
// stream being resharded or having its retention changed in UPDATING, for d on
// the server clock before it turns ACTIVE, as the service does. The default, 0,
// makes every change take effect at once. Shard changes are visible
// immediately either way; the status only affects DescribeStream* output and
// which operations the stream accepts.
func WithTransitionDelay(d time.Duration) Option {
	return func(c *config) { c.transitionDelay = d }
}

// WithConsumerActivationDelay keeps a consumer registered over HTTP in
// CREATING for d on the server clock before it turns ACTIVE, and a
// deregistered consumer in DELETING for d before it is gone, as the service
// does (it takes seconds). The default, 0, makes consumers ACTIVE at once and
// removes them at once. SubscribeToShard refuses consumers that are not ACTIVE.
func WithConsumerActivationDelay(d time.Duration) Option {
	return func(c *config) { c.consumerDelay = d }
}

// WithSubscriptionLifetime sets how long a SubscribeToShard stream lasts,
// measured on the server clock, before the server ends it normally and the
// client must subscribe again. The service's value, and the default, is 5
// minutes. On a ManualClock, moving the clock past the lifetime ends open
// subscriptions at once.
func WithSubscriptionLifetime(d time.Duration) Option {
	return func(c *config) { c.subLifetime = d }
}

// WithResubscribeWindow sets how long, on the server clock, after a
// successful SubscribeToShard the server refuses another one for the same
// consumer and shard with ResourceInUseException. The service's value, and the
// default, is 5 seconds. Tests that make a reader subscribe again and again
// (as happens when each checkpoint lands on another worker) shorten it so that
// they do not wait the service's window every time.
func WithResubscribeWindow(d time.Duration) Option {
	return func(c *config) { c.resubWindow = d }
}

// WithSubscriptionHeartbeat sets how long, in real time, a subscription with
// nothing new to deliver waits before it sends an empty SubscribeToShardEvent
// (no records, an up-to-date ContinuationSequenceNumber and
// MillisBehindLatest). The default is 1 second. Events with records go out as
// soon as the records are stored, whatever this says.
func WithSubscriptionHeartbeat(d time.Duration) Option {
	return func(c *config) { c.subHeartbeat = d }
}

// WithReadVisibilityDelay makes a stored record readable only d after its
// arrival time, measured on the server clock: GetRecords and SubscribeToShard
// stop before the first record that is not readable yet and answer as caught up
// (MillisBehindLatest 0), as the service does during its put-to-get
// propagation delay. A closed shard reports its children only once every record
// is readable. The default, 0, makes a record readable as soon as it is stored.
func WithReadVisibilityDelay(d time.Duration) Option {
	return func(c *config) { c.readDelay = d }
}

// WithTLS makes the server listen on a second port, addr (host:port; "" for
// a free port on 127.0.0.1), for HTTPS with ALPN h2 and http/1.1. Its
// certificate is self-signed, made at start, and written to a file (see
// WithCertFile, CertFile, CertPool and TLSHTTPClient).
func WithTLS(addr string) Option {
	return func(c *config) {
		c.tls = true
		if addr != "" {
			c.tlsAddr = addr
		}
	}
}

// WithCertFile makes WithTLS write its certificate, PEM-encoded, to path
// instead of a temporary file. The file is left in place on Shutdown.
func WithCertFile(path string) Option {
	return func(c *config) { c.certFile = path }
}

// WithCredentials makes the server check the SigV4 signature of every
// request: only the given keys, and temporary credentials the server's own
// STS AssumeRole issued, are accepted. Requests without a signature fail
// with MissingAuthenticationTokenException, with an unknown key (or session
// token) with UnrecognizedClientException, with a wrong signature or one
// dated more than 5 minutes from the wall clock with
// InvalidSignatureException, all with HTTP 400. Without this option any
// signature, or none, is accepted.
func WithCredentials(creds ...Credential) Option {
	return func(c *config) { c.creds = append(make([]Credential, 0, len(creds)), creds...) }
}
