package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/prismtest"
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

	prismtest.UseJobServer(t)

	j := start(t, environment{seed: seed}, "--transform=passthrough", "--reshuffle", "--bounded")
	p, s := beam.NewPipelineWithRoot()
	passert.Empty(s, j.build(s))
	if _, err := beam.Run(context.Background(), "universal", p); err != nil {
		t.Fatalf("job on the Prism job server: %v", err)
	}

	got := streamData(t, j.srv, j.output)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the output stream holds %v, want exactly %v", streamcheck.Digests(got), streamcheck.Digests(want))
	}
}
