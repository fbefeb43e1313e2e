package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

// TestANineMiBRecordCrossesThePrismJobServer submits a bounded passthrough with --reshuffle
// to a separately started Prism job server, as --runner=universal
// --endpoint=localhost:PORT --environment_type=LOOPBACK does, from an input stream holding
// a 9 MiB record and a few small ones to an output stream, both raised to 10 MiB records.
// The reshuffle makes the large record leave the Go SDK worker that read it for Prism over
// the Fn API's data channel and come back to the worker that writes it; the output stream
// must hold exactly the input records, bytes equal.
func TestANineMiBRecordCrossesThePrismJobServer(t *testing.T) {
	large := make([]byte, 9<<20)
	rand.NewChaCha8([32]byte{9}).Read(large)
	want := []string{string(large), ""}
	for i := range 8 {
		want = append(want, fmt.Sprintf("small-%d", i))
	}
	seed := func(ctx context.Context, srv *kinesistest.Server) error {
		for _, stream := range []string{embeddedInput, embeddedOutput} {
			if _, err := srv.Client().UpdateMaxRecordSize(ctx, &kinesis.UpdateMaxRecordSizeInput{
				StreamARN: aws.String(srv.StreamARN(stream)), MaxRecordSizeInKiB: aws.Int32(10240)}); err != nil {
				return fmt.Errorf("raising %s's record size limit: %w", stream, err)
			}
		}
		var entries []embedded.Entry
		for i, d := range want {
			entries = append(entries, embedded.Entry{PartitionKey: fmt.Sprint("k", i), Data: []byte(d)})
		}
		return embedded.Put(ctx, srv.Client(), embeddedInput, entries)
	}

	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := prism.CreateJobServer(ctx, prism.Options{Port: port}); err != nil {
		t.Fatalf("starting the Prism job server: %v", err)
	}
	oldEndpoint, oldEnv := *jobopts.Endpoint, *jobopts.EnvironmentType
	*jobopts.Endpoint, *jobopts.EnvironmentType = fmt.Sprintf("localhost:%d", port), "LOOPBACK"
	defer func() { *jobopts.Endpoint, *jobopts.EnvironmentType = oldEndpoint, oldEnv }()

	j := start(t, environment{seed: seed}, "--transform=passthrough", "--reshuffle", "--bounded")
	p, s := beam.NewPipelineWithRoot()
	passert.Empty(s, j.build(s))
	if _, err := beam.Run(ctx, "universal", p); err != nil {
		t.Fatalf("job on the Prism job server: %v", err)
	}

	recs, _, err := embedded.UserRecords(j.srv, j.output)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Data)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the output stream holds %v, want exactly %v", streamcheck.Digests(got), streamcheck.Digests(want))
	}
}

// freePort returns a TCP port nothing listens on now. prism.Options takes a port number,
// not a listener, so there is a small window in which something else could take it.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
