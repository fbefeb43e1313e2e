package kinesistest_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// protoRecorder remembers the HTTP version of every response.
type protoRecorder struct {
	next   http.RoundTripper
	mu     sync.Mutex
	protos map[string]int
}

func (p *protoRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.next.RoundTrip(req)
	if err == nil {
		p.mu.Lock()
		p.protos[resp.Proto]++
		p.mu.Unlock()
	}
	return resp, err
}

func (p *protoRecorder) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k := range p.protos {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestTransports runs put, get and a subscription to the end of a shard over
// every transport the server offers, and checks which HTTP version carried
// each call.
func TestTransports(t *testing.T) {
	srv, err := kinesistest.Start(kinesistest.WithTLS(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if _, err := os.Stat(srv.CertFile()); err != nil {
		t.Fatalf("certificate file: %v", err)
	}
	http1TLS := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: srv.CertPool(), NextProtos: []string{"http/1.1"}},
	}}
	cases := []struct {
		name, url string
		client    *http.Client
		want      string
	}{
		{"http1", srv.URL(), kinesistest.HTTPClient(), "HTTP/1.1"},
		{"h2c", srv.URL(), kinesistest.H2CHTTPClient(), "HTTP/2.0"},
		{"tls-h2", srv.TLSURL(), srv.TLSHTTPClient(), "HTTP/2.0"},
		{"tls-http1", srv.TLSURL(), http1TLS, "HTTP/1.1"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &protoRecorder{next: c.client.Transport, protos: map[string]int{}}
			kc := srv.Client(func(o *kinesis.Options) {
				o.BaseEndpoint = aws.String(c.url)
				o.HTTPClient = &http.Client{Transport: rec}
				o.RetryMaxAttempts = 1
			}, ownCodec)
			ctx := t.Context()
			stream := "transport-" + c.name
			if err := srv.CreateStream(stream, 1); err != nil {
				t.Fatal(err)
			}
			var want []string
			for j := range 3 {
				data := []byte{byte('a' + i), byte('0' + j)}
				if _, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: data}); err != nil {
					t.Fatalf("PutRecord: %v", err)
				}
				want = append(want, string(data))
			}
			it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(sid(0)), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatalf("GetShardIterator: %v", err)
			}
			got, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
			if err != nil {
				t.Fatalf("GetRecords: %v", err)
			}
			if d := dataOf(got.Records); !slices.Equal(d, want) {
				t.Errorf("GetRecords: %q, want %q", d, want)
			}

			// SubscribeToShard: the shard is closed by a split, so the
			// subscription reads to its end and the body ends.
			arn, err := srv.RegisterConsumer(stream, "c")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kc.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(stream), ShardToSplit: aws.String(sid(0)), NewStartingHashKey: aws.String("1000")}); err != nil {
				t.Fatalf("SplitShard: %v", err)
			}
			out, err := kc.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
				ConsumerARN: aws.String(arn), ShardId: aws.String(sid(0)),
				StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
			})
			if err != nil {
				t.Fatalf("SubscribeToShard: %v", err)
			}
			es := out.GetStream()
			defer es.Close()
			var subGot []string
			var children int
			for ev := range es.Events() {
				e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
				if !ok {
					t.Fatalf("unexpected event %T", ev)
				}
				subGot = append(subGot, dataOf(e.Value.Records)...)
				children += len(e.Value.ChildShards)
			}
			if err := es.Err(); err != nil {
				t.Fatalf("subscription: %v", err)
			}
			if !slices.Equal(subGot, want) || children != 2 {
				t.Errorf("subscription read %q and %d child shards, want %q and 2", subGot, children, want)
			}
			if seen := rec.seen(); !slices.Equal(seen, []string{c.want}) {
				t.Errorf("responses came over %v, want only %s", seen, c.want)
			}
		})
	}
}

func dataOf(rs []types.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Data)
	}
	return out
}

// TestTLSCertificateFile checks that WithCertFile puts the certificate where
// asked, that it verifies the TLS port and that Shutdown leaves it.
func TestTLSCertificateFile(t *testing.T) {
	path := t.TempDir() + "/kinesis.pem"
	srv, err := kinesistest.Start(kinesistest.WithTLS(""), kinesistest.WithCertFile(path))
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("%s holds no PEM certificate", path)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err := c.Get(srv.TLSURL())
	if err != nil {
		t.Fatalf("GET over TLS with the written certificate: %v", err)
	}
	resp.Body.Close()
	if resp.Proto != "HTTP/2.0" {
		t.Errorf("GET negotiated %s, want HTTP/2.0", resp.Proto)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("after Close: %v; the file given to WithCertFile must stay", err)
	}
	if _, err := kinesistest.Start(kinesistest.WithCertFile(path)); err == nil {
		t.Error("Start with WithCertFile and no WithTLS succeeded, want an error")
	}
}
