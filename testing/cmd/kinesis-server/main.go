// Command kinesis-server runs the kinesistest Kinesis Data Streams server as a
// standalone program, for tools and SDKs in other processes or languages.
//
// Usage:
//
//	kinesis-server [--addr 127.0.0.1:4567] [--streams orders:4,events:1,clicks:4:auto]
//	               [--queues work:clicks[:60],...] [--queue-transition-delay 0s]
//	               [--queue-seed 0] [--queue-in-flight-limit 120000]
//	               [--limits] [--large-read-throttle]
//	               [--iterator-ttl 5m] [--consumer-activation-delay 0s]
//	               [--subscription-lifetime 5m] [--subscription-heartbeat 1s]
//	               [--tls-addr 127.0.0.1:4568] [--cert-file cert.pem]
//	               [--credentials id:secret,...] [--log] [--admin-addr 127.0.0.1:4569]
//	               [--outage none|refuse|unavailable] [fault flags]
//
// --streams creates streams at start as name[:shards[:mode]]: one shard unless
// given; mode provisioned (the default), on-demand (ON_DEMAND, partition keys
// place records) or auto (ON_DEMAND with RecordDistributionStrategy AUTO: the
// server places records, keys are optional). --large-read-throttle pauses a
// shard's GetRecords for B / (2 MiB/s) after a page of B > 2 MiB, 5 s after
// 10 MiB, as the service does (kinesistest.Server.SetLargeReadThrottle).
//
// --queues creates Kinesis queues at start as name:stream[:visibility] (the
// visibility timeout in whole seconds, 30 unless given; "60" or "1m"), and
// prints each queue's ARN. A queue's stream must be on-demand: one that
// --streams does not name is created ON_DEMAND with 4 shards, one it names
// provisioned is refused.
//
// --admin-addr adds a plain-HTTP admin endpoint on its own port (see admin.go): a
// stream's records, the faults, an outage of the Kinesis port, the server's memory.
//
// It prints the URL it listens on (and the TLS URL and certificate file, with
// --tls-addr) and runs until SIGINT or SIGTERM, then stops gracefully. State
// lives in memory only.
//
// Protocols: the plain port serves HTTP/1.1 and cleartext HTTP/2 with prior
// knowledge; --tls-addr adds a TLS port (ALPN h2 and http/1.1) with a
// self-signed certificate written to --cert-file (default: a temporary file,
// printed). Bodies are JSON 1.1 or CBOR (application/x-amz-cbor-1.1, the Java
// SDKs' default), answered in the request's protocol. With --credentials the
// server checks SigV4 signatures and accepts only those keys and the
// temporary credentials its own STS AssumeRole (same ports) issues; without
// it any signature is accepted, and AssumeRole still answers.
//
// The AWS CLI talks to it with any credentials:
//
//	export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1
//	aws --endpoint-url http://127.0.0.1:4567 kinesis list-streams
//	aws --endpoint-url http://127.0.0.1:4567 kinesis put-record --stream-name orders \
//	    --partition-key k --data aGVsbG8= --cli-binary-format base64
//
// Over TLS, trust the certificate with the CLI's --ca-bundle, AWS_CA_BUNDLE
// (boto3, aws-sdk-go-v2), NODE_EXTRA_CA_CERTS (JavaScript) or a trust store
// (Java). From aws-sdk-go-v2:
//
//	client := kinesis.New(kinesis.Options{
//		Region:       "us-east-1",
//		BaseEndpoint: aws.String("http://127.0.0.1:4567"),
//		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
//		HTTPClient:   kinesistest.HTTPClient(), // optional; see its doc
//	})
//
// Fault flags (rates are probabilities in [0, 1], drawn from --fault-seed):
// --put-throttle-rate and --put-internal-failure-rate fail PutRecords entries,
// --server-error-rate answers 500/503, --get-throttle-rate and
// --expired-iterator-rate fail GetRecords, --drop-connection-rate closes
// connections without an answer, --latency delays every request and
// --subscription-drop-rate resets SubscribeToShard connections before an event,
// --event-latency delays every SubscribeToShard event, --queue-throttle-rate
// fails queue requests with ThrottlingException, --queue-entry-throttle-rate and
// --queue-entry-internal-failure-rate fail entries of the queue entry operations,
// --queue-redeliver-after-ack-rate loses acknowledgements (the record comes back
// after its visibility timeout) and --fault-ops limits all of them to some
// operations.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "kinesis-server:", err)
		}
		os.Exit(2)
	}
}

// run starts the server as args say, prints its URL to stdout and serves
// until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kinesis-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		addr        = fs.String("addr", "127.0.0.1:4567", "listen address, host:port")
		streams     = fs.String("streams", "", "streams to create at start, as name[:shards[:mode]],... with mode provisioned (default), on-demand or auto (e.g. orders:4,events:1,clicks:4:auto)")
		limits      = fs.Bool("limits", false, "enforce the service's per-shard and control-plane limits")
		largeReads  = fs.Bool("large-read-throttle", false, "throttle a shard's GetRecords for B / (2 MiB/s) after a page of B > 2 MiB (5 s after 10 MiB)")
		iteratorTTL = fs.Duration("iterator-ttl", 5*time.Minute, "how long shard iterators stay valid")
		verbose     = fs.Bool("log", false, "log streams created and failed requests to stderr")
		activation  = fs.Duration("consumer-activation-delay", 0, "how long registered consumers stay CREATING (and deregistered ones DELETING)")
		lifetime    = fs.Duration("subscription-lifetime", 5*time.Minute, "how long a SubscribeToShard stream lasts")
		heartbeat   = fs.Duration("subscription-heartbeat", time.Second, "interval of empty SubscribeToShard events while no records arrive")
		readDelay   = fs.Duration("read-visibility-delay", 0, "how long after its arrival a record becomes readable (the service's put-to-get delay)")
		tlsAddr     = fs.String("tls-addr", "", "also serve HTTPS (ALPN h2, http/1.1) on this host:port, with a self-signed certificate")
		certFile    = fs.String("cert-file", "", "where --tls-addr writes its certificate, PEM (default: a temporary file)")
		creds       = fs.String("credentials", "", "check SigV4 signatures and accept only these keys, as id:secret,...")
		adminAddr   = fs.String("admin-addr", "", "also serve the admin endpoint (records, faults, outages, memory; see admin.go) on this host:port")
		outage      = fs.String("outage", "none", "start in this outage: none, refuse (the Kinesis port refuses connections) or unavailable (503 to everything)")
		queues      = fs.String("queues", "", "queues to create at start, as name:stream[:visibility],... (visibility in whole seconds, default 30; a stream not in --streams is created on-demand)")
		queueDelay  = fs.Duration("queue-transition-delay", 0, "how long queues stay CREATING, UPDATING and DELETING")
		queueSeed   = fs.Int64("queue-seed", 0, "seed of the queues' shuffled delivery order")
		inFlight    = fs.Int("queue-in-flight-limit", 120000, "records a queue lets be in flight before receives fail with LimitExceededException")
		faults      kinesistest.Faults
		faultOps    = fs.String("fault-ops", "", "comma-separated operations the faults apply to (default: all)")
	)
	fs.Int64Var(&faults.Seed, "fault-seed", 1, "seed of the fault generator")
	fs.Float64Var(&faults.PutEntryThrottleRate, "put-throttle-rate", 0, "share of PutRecords entries failing with ProvisionedThroughputExceededException")
	fs.Float64Var(&faults.PutEntryInternalFailureRate, "put-internal-failure-rate", 0, "share of PutRecords entries failing with InternalFailure")
	fs.Float64Var(&faults.ServerErrorRate, "server-error-rate", 0, "share of requests answered with HTTP 500 or 503")
	fs.Float64Var(&faults.GetRecordsThrottleRate, "get-throttle-rate", 0, "share of GetRecords calls failing with ProvisionedThroughputExceededException")
	fs.Float64Var(&faults.ExpiredIteratorRate, "expired-iterator-rate", 0, "share of GetRecords calls failing with ExpiredIteratorException")
	fs.Float64Var(&faults.DropConnectionRate, "drop-connection-rate", 0, "share of requests whose connection is closed without an answer")
	fs.DurationVar(&faults.Latency, "latency", 0, "latency added to every request")
	fs.Float64Var(&faults.SubscriptionDropRate, "subscription-drop-rate", 0, "share of SubscribeToShard events before which the connection is reset")
	fs.DurationVar(&faults.EventLatency, "event-latency", 0, "latency added before every SubscribeToShard event")
	fs.Float64Var(&faults.QueueThrottleRate, "queue-throttle-rate", 0, "share of queue requests failing with ThrottlingException")
	fs.Float64Var(&faults.QueueEntryThrottleRate, "queue-entry-throttle-rate", 0, "share of queue acknowledge/visibility/restore entries failing with ThrottlingException")
	fs.Float64Var(&faults.QueueEntryInternalFailureRate, "queue-entry-internal-failure-rate", 0, "share of queue acknowledge/visibility/restore entries failing with InternalFailureException")
	fs.Float64Var(&faults.QueueRedeliverAfterAckRate, "queue-redeliver-after-ack-rate", 0, "share of acknowledgements lost: the record comes back after its visibility timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	specs, err := parseStreams(*streams)
	if err != nil {
		return err
	}
	queueSpecs, err := parseQueues(*queues)
	if err != nil {
		return err
	}
	keys, err := parseCredentials(*creds)
	if err != nil {
		return err
	}
	startOutage, err := kinesistest.ParseOutage(*outage)
	if err != nil {
		return fmt.Errorf("--outage: %w", err)
	}
	if *faultOps != "" {
		faults.Operations = strings.Split(*faultOps, ",")
	}

	opts := []kinesistest.Option{
		kinesistest.WithAddr(*addr),
		kinesistest.WithFaults(faults),
		kinesistest.WithIteratorTTL(*iteratorTTL),
		kinesistest.WithConsumerActivationDelay(*activation),
		kinesistest.WithSubscriptionLifetime(*lifetime),
		kinesistest.WithSubscriptionHeartbeat(*heartbeat),
		kinesistest.WithReadVisibilityDelay(*readDelay),
		kinesistest.WithQueueTransitionDelay(*queueDelay),
		kinesistest.WithQueueSeed(*queueSeed),
		kinesistest.WithQueueInFlightLimit(*inFlight),
	}
	if *limits {
		opts = append(opts, kinesistest.WithLimits())
	}
	if *largeReads {
		opts = append(opts, kinesistest.WithLargeReadThrottle())
	}
	if *tlsAddr != "" {
		opts = append(opts, kinesistest.WithTLS(*tlsAddr))
	}
	if *certFile != "" {
		if *tlsAddr == "" {
			return fmt.Errorf("--cert-file needs --tls-addr: the certificate is made for the TLS port")
		}
		opts = append(opts, kinesistest.WithCertFile(*certFile))
	}
	if keys != nil {
		opts = append(opts, kinesistest.WithCredentials(keys...))
	}
	if *verbose {
		opts = append(opts, kinesistest.WithLogger(log.New(stderr, "", log.LstdFlags)))
	}
	srv, err := kinesistest.Start(opts...)
	if err != nil {
		return err
	}
	for _, sp := range specs {
		if err := sp.create(srv); err != nil {
			return errors.Join(err, srv.Close())
		}
	}
	queueLines, err := createQueues(srv, queueSpecs, specs)
	if err != nil {
		return errors.Join(err, srv.Close())
	}
	if err := srv.SetOutage(startOutage); err != nil {
		return errors.Join(err, srv.Close())
	}
	fmt.Fprintf(stdout, "kinesis-server listening on %s\n", srv.URL())
	if srv.TLSURL() != "" {
		fmt.Fprintf(stdout, "kinesis-server listening on %s (certificate %s)\n", srv.TLSURL(), srv.CertFile())
	}
	if keys != nil {
		fmt.Fprintf(stdout, "kinesis-server checks SigV4 signatures for %d access keys\n", len(keys))
	}
	for _, line := range queueLines {
		fmt.Fprintln(stdout, line)
	}

	if *adminAddr != "" {
		url, stop, err := startAdmin(*adminAddr, srv)
		if err != nil {
			return errors.Join(err, srv.Close())
		}
		defer stop() //nolint:errcheck // the process is ending
		fmt.Fprintf(stdout, "kinesis-server admin on %s\n", url)
	}

	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// Stream modes of --streams.
const (
	modeProvisioned = "provisioned"
	modeOnDemand    = "on-demand"
	modeAuto        = "auto" // on-demand with RecordDistributionStrategy AUTO
)

type streamSpec struct {
	name   string
	shards int
	mode   string
}

// create creates the stream in srv.
func (sp streamSpec) create(srv *kinesistest.Server) error {
	switch sp.mode {
	case modeOnDemand:
		return srv.CreateOnDemandStream(sp.name, sp.shards, types.RecordDistributionStrategyUserPartitionKey)
	case modeAuto:
		return srv.CreateOnDemandStream(sp.name, sp.shards, types.RecordDistributionStrategyAuto)
	}
	return srv.CreateStream(sp.name, sp.shards)
}

// parseStreams reads "name[:shards[:mode]],..."; a name without ":shards" gets
// one shard, and one without ":mode" is provisioned.
func parseStreams(s string) ([]streamSpec, error) {
	var specs []streamSpec
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := strings.Split(part, ":")
		sp := streamSpec{name: fields[0], shards: 1, mode: modeProvisioned}
		if len(fields) > 3 {
			return nil, fmt.Errorf("--streams: %q: want name[:shards[:mode]]", part)
		}
		if len(fields) > 1 {
			n, err := strconv.Atoi(fields[1])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("--streams: %q: shard count must be a positive integer", part)
			}
			sp.shards = n
		}
		if len(fields) > 2 {
			switch sp.mode = fields[2]; sp.mode {
			case modeProvisioned, modeOnDemand, modeAuto:
			default:
				return nil, fmt.Errorf("--streams: %q: mode must be %s, %s or %s", part, modeProvisioned, modeOnDemand, modeAuto)
			}
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

// parseCredentials reads "id:secret,..."; "" means no checking (nil).
func parseCredentials(s string) ([]kinesistest.Credential, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []kinesistest.Credential
	for _, part := range strings.Split(s, ",") {
		id, secret, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || id == "" || secret == "" {
			// Never echo the part: it may hold a secret.
			return nil, fmt.Errorf("--credentials: entry %d is not id:secret with both parts non-empty", len(out)+1)
		}
		out = append(out, kinesistest.Credential{AccessKeyID: id, SecretAccessKey: secret})
	}
	return out, nil
}
