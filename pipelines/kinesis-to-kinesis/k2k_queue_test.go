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
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// queueDrained fails t unless the queue j read ingested want records and acknowledged each
// once, with none left in flight, visible or redelivered.
func queueDrained(t *testing.T, j job, want int) {
	t.Helper()
	st, err := j.srv.QueueStats(j.in.Queue)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ingested != int64(want) || st.Acked != int64(want) || st.InFlight != 0 || st.Visible != 0 || st.Redelivered != 0 {
		t.Fatalf("the queue after the job: %+v; want %d records ingested and acknowledged, none left", st, want)
	}
}

// TestEmbeddedQueueWritesEachValuesCount is the default demo read through a queue
// (--queue=embedded): the same counts reach the output stream.
func TestEmbeddedQueueWritesEachValuesCount(t *testing.T) {
	j := start(t, environment{}, "--queue=embedded")
	if j.in.Queue == "" || j.in.Stream != "" || !j.in.Bounded {
		t.Fatalf("--queue=embedded resolved to %+v, want a bounded read of the embedded queue", j.in)
	}
	p, s := beam.NewPipelineWithRoot()
	passert.Empty(s, j.build(s))
	ptest.RunAndValidate(t, p)
	got, _ := output(t, j)
	want := []string{
		`Apache {"key":"Apache","count":2}`,
		`Connector {"key":"Connector","count":1}`,
		`Kinesis {"key":"Kinesis","count":3}`,
		`Spark {"key":"Spark","count":1}`,
		`for {"key":"for","count":1}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("output stream holds\n%q\nwant\n%q", got, want)
	}
	queueDrained(t, j, len(embeddedRecords))
}

// TestStreamingQueuePassthroughWritesEveryRecordOnce streams 600 records through a queue
// into the output stream: the output holds each exactly once.
func TestStreamingQueuePassthroughWritesEveryRecordOnce(t *testing.T) {
	const n = 600
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("rec-%04d", i))
	}
	env := environment{seed: func(ctx context.Context, srv *kinesistest.Server) error {
		var entries []embedded.Entry
		for i, d := range want {
			entries = append(entries, embedded.Entry{PartitionKey: fmt.Sprint(i), Data: []byte(d)})
		}
		return embedded.Put(ctx, srv.Client(), embeddedInput, entries)
	}}
	j := start(t, env, "--queue=embedded", "--transform=passthrough", "--bounded=false", "--aggregation=false", "--window=2s")
	if j.in.Bounded {
		t.Fatal("--bounded=false resolved to a bounded read")
	}
	p, s := beam.NewPipelineWithRoot()
	passert.Empty(s, j.build(s))
	ptest.RunAndValidate(t, p)
	recs, _, err := embedded.UserRecords(j.srv, j.output)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Data)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("output stream holds %d records, want the %d put, each once", len(got), len(want))
	}
	queueDrained(t, j, n)
}
