package kinesisio

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// TestABoundedReadWaitsOutThePropagationDelayAtItsEnd writes records just before a bounded
// read starts to a server that makes a record readable only some time after its arrival, as
// Kinesis does. The records arrived before the read's end, so the read owes them all: with
// the default WithPropagationDelay it reads each exactly once, by polling and by enhanced
// fan-out. With WithPropagationDelay(0) every shard ends on its first caught-up read after
// the end, before the records are readable, and skips them: the rule the default fixes.
func TestABoundedReadWaitsOutThePropagationDelayAtItsEnd(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []ReadOption
	}{
		{"polling", nil},
		{"enhanced fan-out", []ReadOption{WithEnhancedFanOut("end-rule")}},
	} {
		for _, c := range []struct {
			name string
			// serverDelay is how long the server keeps a record unreadable.
			serverDelay time.Duration
			opts        []ReadOption
			wantRead    bool
		}{
			// The default (1 s) covers a server delay below it, however fast the read starts.
			{"default delay", 700 * time.Millisecond, nil, true},
			// The shards' first caught-up reads come long before the records are readable.
			{"no delay", 10 * time.Second, []ReadOption{WithPropagationDelay(0)}, false},
		} {
			t.Run(mode.name+"/"+c.name, func(t *testing.T) {
				stream := "end-rule"
				srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2), kinesistest.WithReadVisibilityDelay(c.serverDelay))
				w := newWorkload(t, "e", 40, 4, 5)
				putAll(t, srv.Client(), stream, w.entries)
				want := expected(t, srv, stream, w.aggregates, nil)
				if len(want) != 60 {
					t.Fatalf("workload has %d user records, want 60", len(want))
				}

				p, s := beam.NewPipelineWithRoot()
				opts := append(append([]ReadOption{WithStartingPosition(TrimHorizon())}, mode.opts...), c.opts...)
				got := collect(s, t.Name(), ReadBounded(s, stream, connect(srv, opts...)...))
				if err := ptest.Run(p); err != nil {
					t.Fatal(err)
				}
				if c.wantRead {
					assertSameRecords(t, got.get(), want)
				} else if n := len(got.get()); n != 0 {
					t.Fatalf("read %d records with WithPropagationDelay(0) before any was readable; want 0 (the skip the default prevents)", n)
				}
			})
		}
	}
}
