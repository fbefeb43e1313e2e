package flink

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x1(toMessageDroppingData)
	register.Function1x2(keyByPartitionKey)
	register.Function3x0(ungroupMessages)
	register.Emitter1[kinesisio.Message]()
	register.Iter1[kinesisio.Message]()
}

// toMessageDroppingData makes a Message of a record as a user's code might: with no Data at
// all (nil) when the record says "nothing".
func toMessageDroppingData(r kinesisio.Record) kinesisio.Message {
	m := kinesisio.Message{PartitionKey: r.PartitionKey}
	if string(r.Data) != "nothing" {
		m.Data = r.Data
	}
	return m
}

// keyByPartitionKey keys a message by its partition key.
func keyByPartitionKey(m kinesisio.Message) (string, kinesisio.Message) { return m.PartitionKey, m }

// ungroupMessages emits a group's messages again.
func ungroupMessages(_ string, msgs func(*kinesisio.Message) bool, emit func(kinesisio.Message)) {
	var m kinesisio.Message
	for msgs(&m) {
		emit(m)
	}
}

// TestMessagesWithNilDataCrossAGroupByKeyOnFlink runs a streaming job that builds Messages
// as a user would, half of them with a nil Data, groups them by key (Flink keeps a streaming
// GroupByKey's values in its state, decoded and re-encoded by Beam Java's row coder) and
// writes them: the output stream holds every message exactly once, the nil ones as empty
// records. Before Message had a row encoder of its own, Java re-encoded a nil Data without
// its null bit and the stage after the GroupByKey could not decode the bytes.
func TestMessagesWithNilDataCrossAGroupByKeyOnFlink(t *testing.T) {
	needCluster(t)
	started := time.Now()
	srv := kinesistest.StartT(t)
	for name, shards := range map[string]int{"values-in": 2, "values-out": 2} {
		if err := srv.CreateStream(name, shards); err != nil {
			t.Fatal(err)
		}
	}
	var data, want []string
	for i := range 40 {
		d := fmt.Sprintf("message-%02d", i)
		if i%2 == 0 {
			d = "nothing"
		}
		data = append(data, d)
	}
	in := entries("k", data...)
	put(t, srv.Client(), "values-in", in...)
	for i, e := range in {
		want = append(want, *e.PartitionKey+"="+strings.TrimPrefix(data[i], "nothing"))
	}
	sort.Strings(want)

	endpoint, region, keys := kinesisio.WithEndpoint(srv.URL()), kinesisio.WithRegion(kinesistest.Region), kinesisio.WithStaticCredentials("flink-e2e", "flink-e2e")
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.Read(s, "values-in", kinesisio.WithStartingPosition(kinesisio.TrimHorizon()), kinesisio.WithMaxReadTime(5*time.Second), endpoint, region, keys)
	grouped := beam.GroupByKey(s, beam.ParDo(s, keyByPartitionKey, beam.ParDo(s, toMessageDroppingData, recs)))
	// WithFailOnError: a message the write gives up on fails the job instead of going to
	// the failed output.
	kinesisio.Write(s, "values-out", beam.ParDo(s, ungroupMessages, grouped), kinesisio.WithoutAggregation(), kinesisio.WithFailOnError(), endpoint, region, keys)

	// A streaming job on Flink runs until it is cancelled: wait for the output to hold every
	// message (or the job to fail), then cancel it.
	before, done := executeInProcess(t, p)
	var job string
	output := func() []string {
		stored, err := srv.StreamRecords("values-out")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range stored {
			got = append(got, r.PartitionKey+"="+string(r.Data))
		}
		sort.Strings(got)
		return got
	}
	var got []string
	await(t, pipelineTimeout, func() string {
		return fmt.Sprintf("job %q: the output holds %d of %d messages", job, len(got), len(want))
	}, func() bool {
		for id, state := range jobIDs(t) {
			if _, old := before[id]; !old {
				job = id
				if state == "FAILED" {
					t.Fatalf("job %s failed; its exceptions: %v", id, failures(t, id))
				}
			}
		}
		got = output()
		return len(got) >= len(want)
	})
	if err := cluster().Cancel(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	<-done
	if got = output(); !slices.Equal(got, want) {
		t.Errorf("the output holds %q\nwant %q", got, want)
	}
	t.Logf("measured: %v in all, %d records", time.Since(started).Round(time.Millisecond), len(got))
}

// executeInProcess submits p to the suite's job server with its workers in this process
// (LOOPBACK) without waiting for it, and returns the jobs the cluster had before, to tell
// p's job from them, and where p's run ends. The run is cancelled when t ends.
func executeInProcess(t *testing.T, p *beam.Pipeline) (before map[string]string, done <-chan error) {
	t.Helper()
	setJobFlags(t)
	before = jobIDs(t)
	ctx, cancel := context.WithTimeout(context.Background(), pipelineTimeout)
	t.Cleanup(cancel)
	ended := make(chan error, 1)
	go func() {
		_, err := flinkrunner.Execute(ctx, p, flinkrunner.Flags)
		ended <- err
	}()
	return before, ended
}

// setJobFlags points flinkrunner.Execute at the suite's job server with the workers in this
// process, and puts the flags back after t.
func setJobFlags(t *testing.T) {
	endpoint, env := *jobopts.Endpoint, *jobopts.EnvironmentType
	t.Cleanup(func() { *jobopts.Endpoint, *jobopts.EnvironmentType = endpoint, env })
	*jobopts.Endpoint, *jobopts.EnvironmentType = suite.endpoint, "LOOPBACK"
}

// failures returns the names of the exceptions Flink recorded for job, oldest first.
func failures(t *testing.T, job string) []string {
	t.Helper()
	fs, err := cluster().Failures(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		out = append(out, f.Name)
	}
	return out
}
