package main

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestCheckpointTableFlagsResumeTheNextRun copies a stream twice with the same
// --checkpoint_table (dynalite): the second run, started after more records arrived, must
// copy only those, since the first run's positions were committed to the table.
func TestCheckpointTableFlagsResumeTheNextRun(t *testing.T) {
	dyn := emulators.StartT(t, emulators.Dynalite).URL()
	srv, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, s := range []string{"in", "out"} {
		if err := srv.CreateStream(s, 2); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "k2k-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "k2k-test")
	ctx := context.Background()
	batch := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("record-%03d", i))
		}
		return out
	}
	runOnce := func() {
		t.Helper()
		cfg := parse(t, "--input_stream=in", "--output_stream=out", "--transform=passthrough", "--bounded", "--aggregation=false",
			"--kinesis_endpoint="+srv.URL(), "--kinesis_region="+kinesistest.Region, "--aws_credentials_from_env",
			"--checkpoint_table=k2k-positions", "--checkpoint_table_endpoint="+dyn, "--checkpoint_lease_duration=1s")
		j, err := prepare(ctx, cfg, environment{})
		if err != nil {
			t.Fatal(err)
		}
		defer j.stop()
		p, s := beam.NewPipelineWithRoot()
		passert.Empty(s, j.build(s))
		ptest.RunAndValidate(t, p)
	}

	for i, key := range []string{"a", "b", "c", "d"} {
		if err := embedded.PutStrings(ctx, srv.Client(), "in", key, batch(i*10, i*10+10)...); err != nil {
			t.Fatal(err)
		}
	}
	runOnce()
	if got, want := streamData(t, srv, "out"), batch(0, 40); !slices.Equal(got, want) {
		t.Fatalf("after the first run the output holds %q, want %q", got, want)
	}
	for i, key := range []string{"e", "f"} {
		if err := embedded.PutStrings(ctx, srv.Client(), "in", key, batch(40+i*10, 50+i*10)...); err != nil {
			t.Fatal(err)
		}
	}
	runOnce()
	if got, want := streamData(t, srv, "out"), batch(0, 60); !slices.Equal(got, want) {
		t.Errorf("after the second run the output holds %d records %q, want each of the %d put exactly once: the second run must resume from the table", len(got), got, len(want))
	}
}

// streamData returns the data of every user record in stream, sorted.
func streamData(t *testing.T, srv *kinesistest.Server, stream string) []string {
	t.Helper()
	recs, _, err := embedded.UserRecords(srv, stream)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Data)
	}
	slices.Sort(got)
	return got
}
