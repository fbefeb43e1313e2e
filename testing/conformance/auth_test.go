package conformance

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The connector against our server with its stricter transports on: TLS with
// HTTP/2 (the real service's only transport), SigV4 checking, and
// credentials from an assumed role. Each writes with kinesisio.Write and
// reads back with kinesisio.ReadBounded (polling and enhanced fan-out) on
// Prism, and checks the exact multiset of messages.

// authKey is the long-term key the strict servers accept.
var authKey = kinesistest.Credential{AccessKeyID: "AKIACONFORMANCE", SecretAccessKey: "conformance-secret"}

// roundTrip writes n messages and reads them back with and without enhanced
// fan-out, through opts.
func roundTrip(t *testing.T, srv *kinesistest.Server, stream string, n int, opts ...kinesisio.ClientOption) {
	t.Helper()
	if err := srv.CreateStream(stream, 2); err != nil {
		t.Fatal(err)
	}
	var msgs []kinesisio.Message
	var want []any
	for i := range n {
		m := kinesisio.Message{PartitionKey: fmt.Sprintf("k%03d", i), Data: fmt.Appendf(nil, "message %d", i)}
		msgs = append(msgs, m)
		want = append(want, m.PartitionKey+"|"+string(m.Data))
	}
	p, s := beam.NewPipelineWithRoot()
	wo := []kinesisio.WriteOption{kinesisio.WithoutAggregation()}
	ro := []kinesisio.ReadOption{kinesisio.WithStartingPosition(kinesisio.TrimHorizon())}
	for _, o := range opts {
		wo, ro = append(wo, o), append(ro, o)
	}
	passert.Empty(s, kinesisio.Write(s, stream, beam.CreateList(s, msgs), wo...))
	if err := ptest.Run(p); err != nil {
		t.Fatalf("Write: %v", err)
	}
	for _, efo := range []bool{false, true} {
		read := ro
		if efo {
			read = append(slices.Clip(ro), kinesisio.WithEnhancedFanOut("conformance"))
		}
		p, s := beam.NewPipelineWithRoot()
		recs := kinesisio.ReadBounded(s, stream, read...)
		passert.Equals(s, beam.ParDo(s, messageKey, recs), want...)
		if err := ptest.Run(p); err != nil {
			t.Fatalf("ReadBounded (enhanced fan-out %v): %v", efo, err)
		}
	}
	if n := srv.CallCount("SubscribeToShard"); n < 2 {
		t.Errorf("%d SubscribeToShard calls, want at least one per shard", n)
	}
}

func init() { register.Function1x1(messageKey) }

// messageKey is a record's partition key and data.
func messageKey(r kinesisio.Record) string { return r.PartitionKey + "|" + string(r.Data) }

func startStrict(t *testing.T, opts ...kinesistest.Option) *kinesistest.Server {
	t.Helper()
	return kinesistest.StartT(t, append([]kinesistest.Option{kinesistest.WithResubscribeWindow(0)}, opts...)...)
}

// TestConnectorOverTLSAndHTTP2 points the connector at the TLS port, trusting
// the server's certificate through AWS_CA_BUNDLE as a user would, and checks
// that every request, subscriptions included, came over HTTP/2.
func TestConnectorOverTLSAndHTTP2(t *testing.T) {
	srv := startStrict(t, kinesistest.WithTLS(""))
	t.Setenv("AWS_CA_BUNDLE", srv.CertFile())
	roundTrip(t, srv, "tls", 200, kinesisio.WithEndpoint(srv.TLSURL()), kinesisio.WithRegion("us-east-1"),
		kinesisio.WithStaticCredentials("test", "test"))
	protos := srv.Protocols()
	if protos["HTTP/2.0"] == 0 || len(protos) != 1 {
		t.Errorf("requests per protocol %v, want HTTP/2.0 only", protos)
	}
}

// TestConnectorWithSigV4Checks runs the connector against a server that
// checks signatures, then with a wrong secret, which must fail with the
// service's error.
func TestConnectorWithSigV4Checks(t *testing.T) {
	srv := startStrict(t, kinesistest.WithCredentials(authKey))
	base := []kinesisio.ClientOption{kinesisio.WithEndpoint(srv.URL()), kinesisio.WithRegion("eu-west-1")}
	roundTrip(t, srv, "signed", 200, append(base, kinesisio.WithStaticCredentials(authKey.AccessKeyID, authKey.SecretAccessKey))...)
	if n := srv.AccessKeyUses()[authKey.AccessKeyID]; n == 0 {
		t.Errorf("no request verified with %s", authKey.AccessKeyID)
	}

	p, s := beam.NewPipelineWithRoot()
	kinesisio.ReadBounded(s, "signed", base[0], base[1], kinesisio.WithStaticCredentials(authKey.AccessKeyID, "wrong-secret"),
		kinesisio.WithRetries(0, time.Millisecond, time.Millisecond))
	err := ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), "InvalidSignatureException") {
		t.Fatalf("ReadBounded with a wrong secret: %v, want an InvalidSignatureException", err)
	}
	if strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("the error shows the secret: %v", err)
	}
}

// TestConnectorWithAssumeRole gives the connector a base key that may only
// call STS and a role to assume, and checks that every Kinesis request was
// signed with temporary credentials the server's STS issued for that role.
func TestConnectorWithAssumeRole(t *testing.T) {
	srv := startStrict(t, kinesistest.WithCredentials(authKey))
	t.Setenv("AWS_ENDPOINT_URL_STS", srv.URL())
	const role = "arn:aws:iam::123456789012:role/beam-reader"
	roundTrip(t, srv, "assumed", 100, kinesisio.WithEndpoint(srv.URL()), kinesisio.WithRegion("us-east-1"),
		kinesisio.WithStaticCredentials(authKey.AccessKeyID, authKey.SecretAccessKey), kinesisio.WithAssumeRole(role, "conformance"))
	roles := srv.AssumedRoles()
	if len(roles) == 0 {
		t.Fatal("no role was assumed")
	}
	temp := map[string]bool{}
	for _, r := range roles {
		if r.RoleARN != role || r.SessionName != "conformance" || r.CallerKeyID != authKey.AccessKeyID {
			t.Errorf("assumed %+v", r)
		}
		temp[r.AccessKeyID] = true
	}
	uses := srv.AccessKeyUses()
	kinesisCalls := 0
	for op, n := range srv.CallCounts() {
		if !strings.HasPrefix(op, "sts:") {
			kinesisCalls += n
		}
	}
	tempUses := 0
	for k, n := range uses {
		if temp[k] {
			tempUses += n
		}
	}
	// The base key signed the AssumeRole calls and nothing else; the
	// temporary keys signed every Kinesis call.
	if uses[authKey.AccessKeyID] != len(roles) || tempUses != kinesisCalls || srv.CallCount("sts:AssumeRole") != len(roles) {
		t.Errorf("base key used %d times for %d roles; temporary keys %d times for %d Kinesis calls (uses %v)",
			uses[authKey.AccessKeyID], len(roles), tempUses, kinesisCalls, uses)
	}
}
