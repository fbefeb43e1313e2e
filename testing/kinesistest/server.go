package kinesistest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Server is a Kinesis Data Streams endpoint served over HTTP from this
// process. It is safe for concurrent use by many clients.
type Server struct {
	clock           Clock
	iteratorTTL     time.Duration
	transitionDelay time.Duration
	logger          *log.Logger
	key             []byte // seals iterators and paging tokens

	keys   *keyring // nil: signatures are not checked
	region string   // WithRegion; empty: any region
	roles  roleLog  // AssumeRole calls answered
	limits atomic.Bool
	// largeReads turns on the pause after large GetRecords pages (SetLargeReadThrottle).
	largeReads atomic.Bool
	faults     atomic.Pointer[injector]
	control    rateLimiter
	// commitment is the account's billing commitment (account.go).
	commitment commitment
	calls      sync.Map // operation name -> *atomic.Int64
	protos     sync.Map // HTTP version ("HTTP/1.1", "HTTP/2.0") -> *atomic.Int64
	media      sync.Map // request body protocol (JSON or CBOR content type) -> *atomic.Int64

	mu      sync.RWMutex
	streams map[string]*stream
	nextUID uint64

	// queues are the Kinesis queues (queue.go).
	queues queueRegistry

	// Enhanced fan-out: see consumers.go for what consumerMu guards.
	consumerDelay time.Duration
	subLifetime   time.Duration
	subHeartbeat  time.Duration
	resubWindow   time.Duration
	// readDelay is how long after its arrival a record becomes readable.
	readDelay   time.Duration
	consumerMu  sync.Mutex
	subs        map[*subscription]struct{}
	subsChanged chan struct{} // closed when a subscription opens or ends
	subsClosed  bool          // set by Shutdown: no new subscriptions
	subsWG      sync.WaitGroup
	quit        chan struct{} // closed by Shutdown to end open subscriptions

	connMu   sync.Mutex
	newConns map[net.Conn]struct{} // connections without a request in flight (new or idle)
	closing  bool

	// outageMu guards outage and, while an outage replaces them, ln and http.
	outageMu  sync.Mutex
	outage    Outage
	ln        net.Listener
	http      *http.Server
	url       string
	tls       *tlsListener // nil without WithTLS
	closeOnce sync.Once
	closeErr  error
}

// Start starts a server listening on 127.0.0.1 at a free port, or where
// WithAddr says. Close it when done.
func Start(opts ...Option) (*Server, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("kinesistest: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("kinesistest: making the token key: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("kinesistest: listening on %s: %w", cfg.addr, err)
	}
	s := &Server{
		clock:           cfg.clock,
		iteratorTTL:     cfg.iteratorTTL,
		transitionDelay: cfg.transitionDelay,
		consumerDelay:   cfg.consumerDelay,
		subLifetime:     cfg.subLifetime,
		subHeartbeat:    cfg.subHeartbeat,
		resubWindow:     cfg.resubWindow,
		readDelay:       cfg.readDelay,
		subs:            make(map[*subscription]struct{}),
		quit:            make(chan struct{}),
		logger:          cfg.logger,
		key:             key,
		keys:            newKeyring(cfg.creds),
		region:          cfg.region,
		streams:         make(map[string]*stream),
		queues:          newQueueRegistry(cfg),
		newConns:        make(map[net.Conn]struct{}),
		ln:              ln,
		url:             "http://" + hostPort(ln.Addr()),
	}
	s.limits.Store(cfg.limits)
	s.largeReads.Store(cfg.largeReads)
	s.faults.Store(newInjector(cfg.faults))
	if cfg.tls {
		t, err := s.startTLS(cfg.tlsAddr, cfg.certFile)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("kinesistest: %w", err)
		}
		s.tls = t
	}
	s.http = s.newHTTPServer()
	go s.http.Serve(ln) //nolint:errcheck // returns ErrServerClosed on Close
	for _, st := range cfg.streams {
		if err := st.create(s); err != nil {
			s.Close()
			return nil, fmt.Errorf("kinesistest: %w", err)
		}
	}
	return s, nil
}

// hostPort is the host:port clients dial; a wildcard listen address is
// reached through the loopback interface.
func hostPort(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// URL returns the server's plain endpoint, e.g. "http://127.0.0.1:39401". It
// serves HTTP/1.1 and cleartext HTTP/2 with prior knowledge.
func (s *Server) URL() string { return s.url }

// TestCredential is the access key Client signs with; pass it to
// WithCredentials to check Client's signatures.
var TestCredential = Credential{AccessKeyID: "AKIAKINESISTEST", SecretAccessKey: "kinesistest-secret"}

// Client returns an aws-sdk-go-v2 Kinesis client for the server: region
// us-east-1, TestCredential, BaseEndpoint set to URL and the HTTP
// client of HTTPClient (see there for why). The SDK's retry settings are left at their defaults unless
// optFns change them (for example o.RetryMaxAttempts = 1 in tests that assert
// errors).
func (s *Server) Client(optFns ...func(*kinesis.Options)) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.url),
		Credentials:  credentials.NewStaticCredentialsProvider(TestCredential.AccessKeyID, TestCredential.SecretAccessKey, ""),
		HTTPClient:   HTTPClient(),
	}, optFns...)
}

// Shutdown stops the server gracefully: it stops accepting connections, ends
// open SubscribeToShard streams (their bodies end normally, as at the end of a
// subscription's lifetime) and waits, until ctx is done, for requests in
// flight.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closeNewConns()
		s.consumerMu.Lock()
		s.subsClosed = true
		s.consumerMu.Unlock()
		close(s.quit)
		s.outageMu.Lock()
		plain, ln := s.http, s.ln
		s.outageMu.Unlock()
		servers := []*http.Server{plain}
		if s.tls != nil {
			servers = append(servers, s.tls.http)
		}
		for _, hs := range servers {
			if err := hs.Shutdown(ctx); err != nil {
				s.closeErr = errors.Join(s.closeErr, fmt.Errorf("kinesistest: shutting down: %w", err), hs.Close())
			}
		}
		// Serve may not have taken the listener yet; free the port for sure.
		ln.Close()
		if s.tls != nil {
			s.tls.ln.Close()
			s.tls.remove()
		}
		// Subscriptions whose connection a fault hijacked are not requests
		// http.Server waits for; they have seen quit by now and end at once.
		s.subsWG.Wait()
	})
	return s.closeErr
}

// trackConn remembers connections without a request in flight: new ones,
// which HTTP clients dial as spares and http.Server.Shutdown would wait five
// seconds for each before treating as idle, and idle ones, which for HTTP/2
// Shutdown would keep for a second after its GOAWAY.
func (s *Server) trackConn(c net.Conn, state http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if state != http.StateNew && state != http.StateIdle {
		delete(s.newConns, c)
		return
	}
	if s.closing {
		c.Close()
		return
	}
	s.newConns[c] = struct{}{}
}

// closeNewConns closes the connections without a request in flight, now and
// from now on.
func (s *Server) closeNewConns() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.closing = true
	for c := range s.newConns {
		c.Close()
	}
	clear(s.newConns)
}

// Close stops the server, giving requests in flight a few seconds to finish.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}

// SetFaults replaces the injected faults; the zero Faults turns them off. It
// panics if a rate is outside [0, 1].
func (s *Server) SetFaults(f Faults) {
	if err := f.validate(); err != nil {
		panic("kinesistest: SetFaults: " + err.Error())
	}
	s.faults.Store(newInjector(f))
}

// SetLimits turns enforcement of the service's throughput limits on or off:
// per shard 1,000 records/s and 1 MiB/s in, 5 GetRecords/s and 2 MiB/s out,
// 5 GetShardIterator/s; control-plane rates (LimitExceededException) and the
// UpdateShardCount quotas.
func (s *Server) SetLimits(on bool) { s.limits.Store(on) }

// SetLargeReadThrottle turns the throttle after large GetRecords pages on or
// off. The rule: a page of B bytes (data plus partition keys) larger than one
// second of a shard's read rate, 2 MiB, pauses that shard's reads for as long
// as the rate takes to pay for it, B / (2 MiB/s) on the server clock: every
// GetRecords call on the shard within that time, from any reader, fails with
// ProvisionedThroughputExceededException. So 5 s after a 10 MiB page, 1.5 s
// after 3 MiB; smaller pages pause nothing. SubscribeToShard is not affected
// (enhanced fan-out has its own 2 MiB/s per consumer). In limits mode a call
// must also pass the per-shard read limits, whose 2 MiB/s allowance holds one
// second and lets a large page run into debt (4 s after 10 MiB read from a
// full allowance).
func (s *Server) SetLargeReadThrottle(on bool) { s.largeReads.Store(on) }

// CallCount returns how many requests for op ("PutRecords", "GetRecords", ...)
// the server has received, including those that failed.
func (s *Server) CallCount(op string) int {
	if c, ok := s.calls.Load(op); ok {
		return int(c.(*atomic.Int64).Load())
	}
	return 0
}

// CallCounts returns the number of requests received per operation.
func (s *Server) CallCounts() map[string]int {
	out := make(map[string]int)
	s.calls.Range(func(k, v any) bool {
		out[k.(string)] = int(v.(*atomic.Int64).Load())
		return true
	})
	return out
}

// Protocols returns the number of requests received per HTTP version
// ("HTTP/1.1", "HTTP/2.0"), STS calls included.
func (s *Server) Protocols() map[string]int {
	out := make(map[string]int)
	s.protos.Range(func(k, v any) bool {
		out[k.(string)] = int(v.(*atomic.Int64).Load())
		return true
	})
	return out
}

// MediaTypes returns the number of Kinesis requests received per body
// protocol: "application/x-amz-json-1.1" or "application/x-amz-cbor-1.1".
func (s *Server) MediaTypes() map[string]int {
	out := make(map[string]int)
	s.media.Range(func(k, v any) bool {
		out[k.(string)] = int(v.(*atomic.Int64).Load())
		return true
	})
	return out
}

func (s *Server) countCall(op string) { countIn(&s.calls, op) }

// countIn adds one to m's counter for key.
func countIn(m *sync.Map, key string) {
	c, ok := m.Load(key)
	if !ok {
		c, _ = m.LoadOrStore(key, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}

func (s *Server) logf(format string, args ...any) {
	if s.logger != nil {
		s.logger.Printf("kinesistest: "+format, args...)
	}
}

// request is one decoded API call.
type request struct {
	body   []byte
	codec  codec     // the protocol of the request, and of its response
	region string    // from the SigV4 credential scope; used in ARNs
	nowMs  int64     // the server clock when the request was dispatched
	faults *injector // nil when no fault applies to this call
	limits bool
	// largeReads applies the pause after large GetRecords pages.
	largeReads bool
	// ctx ends when the client goes away or the server shuts down; long
	// polls (ReceiveQueueRecords) end with it.
	ctx context.Context
}

// decode reads the request's input into v.
func (r *request) decode(v any) error { return r.codec.decode(r.body, v) }

// handler carries out one operation. It returns the output to encode as
// JSON, nil for operations without output, a streamer for operations that
// stream their response, or an error (an *apiError for the client).
type handler func(*Server, *request) (any, error)

// streamer is the output of an operation that writes its own response once
// the request has been validated (SubscribeToShard's event stream). serve
// must return when the request's context ends.
type streamer interface {
	serve(w http.ResponseWriter, r *http.Request)
}

// handlers is the operation table.
var handlers = map[string]handler{
	"RegisterStreamConsumer":                 (*Server).registerStreamConsumer,
	"DescribeStreamConsumer":                 (*Server).describeStreamConsumer,
	"ListStreamConsumers":                    (*Server).listStreamConsumers,
	"DeregisterStreamConsumer":               (*Server).deregisterStreamConsumer,
	"SubscribeToShard":                       (*Server).subscribeToShard,
	"CreateStream":                           (*Server).createStream,
	"DeleteStream":                           (*Server).deleteStream,
	"DescribeStream":                         (*Server).describeStream,
	"DescribeStreamSummary":                  (*Server).describeStreamSummary,
	"ListStreams":                            (*Server).listStreams,
	"IncreaseStreamRetentionPeriod":          (*Server).increaseRetention,
	"DecreaseStreamRetentionPeriod":          (*Server).decreaseRetention,
	"UpdateMaxRecordSize":                    (*Server).updateMaxRecordSize,
	"UpdateStreamRecordDistributionStrategy": (*Server).updateRecordDistributionStrategy,
	"UpdateStreamWarmThroughput":             (*Server).updateStreamWarmThroughput,
	"DescribeAccountSettings":                (*Server).describeAccountSettings,
	"UpdateAccountSettings":                  (*Server).updateAccountSettings,
	"ListShards":                             (*Server).listShards,
	"PutRecord":                              (*Server).putRecord,
	"PutRecords":                             (*Server).putRecords,
	"GetShardIterator":                       (*Server).getShardIterator,
	"GetRecords":                             (*Server).getRecords,
	"SplitShard":                             (*Server).splitShard,
	"MergeShards":                            (*Server).mergeShards,
	"UpdateShardCount":                       (*Server).updateShardCount,
	"UpdateStreamMode":                       (*Server).updateStreamMode,
	"CreateQueue":                            (*Server).createQueue,
	"UpdateQueue":                            (*Server).updateQueue,
	"DeleteQueue":                            (*Server).deleteQueue,
	"DescribeQueue":                          (*Server).describeQueue,
	"ListQueues":                             (*Server).listQueues,
	"ReceiveQueueRecords":                    (*Server).receiveQueueRecords,
	"AcknowledgeQueueRecords":                (*Server).acknowledgeQueueRecords,
	"UpdateQueueRecordsVisibility":           (*Server).updateQueueRecordsVisibility,
	"ReceiveDeadLetterQueueRecords":          (*Server).receiveDeadLetterQueueRecords,
	"AcknowledgeDeadLetterQueueRecords":      (*Server).acknowledgeDeadLetterQueueRecords,
	"UpdateDeadLetterQueueRecordsVisibility": (*Server).updateDeadLetterQueueRecordsVisibility,
	"RestoreDeadLetterQueueRecords":          (*Server).restoreDeadLetterQueueRecords,
}

// ServeHTTP answers one JSON 1.1 or CBOR request: POST / with X-Amz-Target
// Kinesis_20131202.<Operation> and Content-Type application/x-amz-json-1.1 or
// application/x-amz-cbor-1.1; the response uses the request's protocol.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	w.Header()[headerRequestID] = []string{reqID}
	countIn(&s.protos, r.Proto)
	if isSTSRequest(r) {
		s.serveSTSBody(w, r, reqID)
		return
	}
	c := codecFor(r.Header.Get("Content-Type"))
	countIn(&s.media, c.contentType())
	target := r.Header.Get("X-Amz-Target")
	op := strings.TrimPrefix(target, targetPrefix)
	s.countCall(op)
	if s.unavailable(w, reqID, op, c) {
		return
	}

	in := s.faults.Load()
	if !in.appliesTo(op) {
		in = nil
	}
	if in != nil && in.f.Latency > 0 {
		t := time.NewTimer(in.f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return // the client gave up; nobody reads a response
		}
	}

	body := getBuf()
	defer putBuf(body)
	if _, err := body.ReadFrom(http.MaxBytesReader(w, r.Body, maxBodyBytes)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.writeError(w, reqID, op, c, &apiError{status: http.StatusRequestEntityTooLarge, code: codeInvalidArgument,
				message: fmt.Sprintf("Request body exceeds %d bytes.", maxBodyBytes)})
		}
		return // otherwise the connection is gone
	}
	if s.keys != nil {
		if _, err := s.keys.verify(r, body.Bytes(), "kinesis"); err != nil {
			s.writeError(w, reqID, op, c, err)
			return
		}
	}
	if err := s.checkRegion(r); err != nil {
		s.writeError(w, reqID, op, c, err)
		return
	}
	if in != nil {
		if in.hit(in.f.DropConnectionRate) {
			dropConnection(w)
			return
		}
		if err := in.serverError(); err != nil {
			s.writeError(w, reqID, op, c, err)
			return
		}
	}

	out, err := s.dispatch(r, op, target, body.Bytes(), c, in)
	if err != nil {
		s.writeError(w, reqID, op, c, err)
		return
	}
	if st, ok := out.(streamer); ok {
		st.serve(w, r)
		return
	}
	resp := getBuf()
	defer putBuf(resp)
	if out != nil {
		if err := c.encode(resp, out); err != nil {
			s.writeError(w, reqID, op, c, fmt.Errorf("encoding the %s response: %w", op, err))
			return
		}
	}
	if in != nil && in.hit(in.f.DropAfterProcessingRate) {
		dropConnection(w)
		return
	}
	h := w.Header()
	h["Content-Type"] = []string{c.contentType()}
	h["Content-Length"] = []string{strconv.Itoa(resp.Len())}
	w.WriteHeader(http.StatusOK)
	w.Write(resp.Bytes()) //nolint:errcheck // a client that hung up is not the server's problem
}

// serveSTSBody reads an STS request's body and answers it.
func (s *Server) serveSTSBody(w http.ResponseWriter, r *http.Request, reqID string) {
	body := getBuf()
	defer putBuf(body)
	if _, err := body.ReadFrom(http.MaxBytesReader(w, r.Body, 1<<20)); err != nil {
		return // too big or gone; STS requests are a few hundred bytes
	}
	s.serveSTS(w, r, reqID, body.Bytes())
}

// dispatch checks the request's envelope and runs the operation.
func (s *Server) dispatch(r *http.Request, op, target string, body []byte, c codec, in *injector) (any, error) {
	if r.Method != http.MethodPost {
		return nil, errorf(codeUnknownOperation, "Only POST requests are supported, got %s.", r.Method)
	}
	h := handlers[op]
	if h == nil || !strings.HasPrefix(target, targetPrefix) {
		return nil, errorf(codeUnknownOperation, "Operation %q is not supported by this server.", target)
	}
	req := &request{
		body:       body,
		codec:      c,
		region:     regionFromAuthorization(r.Header.Get("Authorization")),
		nowMs:      s.clock.Now().UnixMilli(),
		faults:     in,
		limits:     s.limits.Load(),
		largeReads: s.largeReads.Load(),
		ctx:        r.Context(),
	}
	if req.region == "" {
		req.region = Region
	}
	// ListShards is limited per stream, inside the operation.
	if tps, ok := controlPlaneTPS[op]; ok && req.limits && op != "ListShards" && !s.control.allow(op, tps, req.nowMs) {
		return nil, errorf(codeLimitExceeded, "Rate exceeded for operation %s under account %s.", op, AccountID)
	}
	return h(s, req)
}

type errorBody struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// writeError sends err as the service does: status, X-Amzn-ErrorType header
// and {"__type": code, "message": ...}. Errors that are not API errors are
// server bugs and go out as InternalFailureException.
func (s *Server) writeError(w http.ResponseWriter, reqID, op string, c codec, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = errorf(codeInternalFailure, "%v", err)
	}
	// Log before answering, so the line exists once the client has its answer.
	s.logf("%s %s -> %d %s: %s", reqID, op, ae.status, ae.code, ae.message)
	// A message may quote the request; a CBOR text string must be valid UTF-8.
	b, _ := c.marshal(errorBody{Type: ae.code, Message: strings.ToValidUTF8(ae.message, "\uFFFD")})
	h := w.Header()
	h[headerErrorType] = []string{ae.code}
	h["Content-Type"] = []string{c.contentType()}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(ae.status)
	w.Write(b) //nolint:errcheck // see ServeHTTP
}

// dropConnection closes the client's connection without a response.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // net/http closes the connection quietly
}
