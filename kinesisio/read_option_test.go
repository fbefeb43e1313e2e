package kinesisio

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

func TestReadOptionsRejectBadValuesNamingTheOption(t *testing.T) {
	cases := []struct {
		opt  ReadOption
		want []string
	}{
		{WithStartingPosition(StartingPosition{}), []string{"WithStartingPosition", "zero StartingPosition"}},
		{WithStartingPosition(AtTimestamp(time.Time{})), []string{"WithStartingPosition", "after 1970"}},
		{WithStartingPosition(ShardPositions()), []string{"WithStartingPosition", "at least one"}},
		{WithStartingPosition(ShardPositions(AtSequenceNumber("shardId-0", "0123"))), []string{"WithStartingPosition", "leading zero"}},
		{WithStartingPosition(ShardPositions(AtSequenceNumber("bad shard", seqA))), []string{"WithStartingPosition", "shard id"}},
		{WithStartingPosition(ShardPositions(AtSequenceNumber("s", seqA), AfterSequenceNumber("s", seqB))), []string{"WithStartingPosition", "two positions"}},
		{WithMaxFetchTime(0), []string{"WithMaxFetchTime", "positive"}},
		{WithMaxRecordsPerFetch(0), []string{"WithMaxRecordsPerFetch", "positive"}},
		{WithMaxRecordsPerRead(0), []string{"WithMaxRecordsPerRead", "1..10000"}},
		{WithMaxRecordsPerRead(10001), []string{"WithMaxRecordsPerRead", "1..10000"}},
		{WithIdleTimeBetweenReads(-time.Second), []string{"WithIdleTimeBetweenReads", "negative"}},
		{WithMaxReadAheadBytes(4096), []string{"WithMaxReadAheadBytes", "under 1 MiB", "WithoutReadAhead"}},
		{WithPollInterval(0), []string{"WithPollInterval", "positive"}},
		{WithDescribeShardInterval(-1), []string{"WithDescribeShardInterval", "positive"}},
		{WithIdleThreshold(0), []string{"WithIdleThreshold", "positive"}},
		{WithMaxRecords(0), []string{"WithMaxRecords", "positive"}},
		{WithMaxReadTime(0), []string{"WithMaxReadTime", "positive"}},
		{WithPropagationDelay(-time.Second), []string{"WithPropagationDelay", "negative"}},
		{WithCustomWatermarkPolicy(nil), []string{"WithCustomWatermarkPolicy", "nil"}},
		{WithCustomWatermarkPolicy(unregisteredTimeFn{}), []string{"WithCustomWatermarkPolicy", "not registered", "beam.RegisterType"}},
	}
	for _, c := range cases {
		msg := mustPanic(t, func() { buildConfig(targetRead, []ReadOption{c.opt}) })
		for _, w := range append([]string{"kinesisio.Read"}, c.want...) {
			if !strings.Contains(msg, w) {
				t.Errorf("panic %q does not mention %q", msg, w)
			}
		}
	}
}

func TestReadAndReadBoundedPanicOnBadStreamOrOption(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	_ = p
	msg := mustPanic(t, func() { Read(s, "bad name") })
	if !strings.Contains(msg, "kinesisio.Read") || !strings.Contains(msg, "stream name") {
		t.Errorf("panic %q", msg)
	}
	msg = mustPanic(t, func() { ReadBounded(s, "orders", WithMaxRecordsPerRead(0)) })
	if !strings.Contains(msg, "kinesisio.ReadBounded") || !strings.Contains(msg, "WithMaxRecordsPerRead") {
		t.Errorf("panic %q", msg)
	}
}

func TestReadOptionsSetTheSpec(t *testing.T) {
	cfg := buildConfig(targetRead, []ReadOption{
		WithStartingPosition(TrimHorizon()), WithSkipOnDataLoss(), WithMaxFetchTime(3 * time.Second),
		WithMaxRecordsPerFetch(7), WithMaxRecordsPerRead(500), WithIdleTimeBetweenReads(time.Millisecond),
		WithPollInterval(2 * time.Second), WithDescribeShardInterval(4 * time.Second), WithIdleThreshold(time.Minute),
		WithoutDeaggregation(), WithMaxRecords(9), WithMaxReadTime(time.Hour), WithCustomWatermarkPolicy(&testTimeFn{Offset: 5}),
		WithRegion("eu-west-1"), WithPropagationDelay(3 * time.Second),
	})
	got := newReadSpec("orders", cfg)
	want := readSpec{
		Stream: "orders", ReadID: cfg.read.readID, Client: clientConfig{Region: "eu-west-1"}, Retry: defaultConfig().retry,
		FailOnDataLoss: false, MaxFetchTime: 3 * time.Second, MaxRecordsPerFetch: 7, MaxRecordsPerRead: 500,
		IdleTimeBetweenReads: time.Millisecond, PollInterval: 2 * time.Second, ReadAheadBytes: defaultReadAheadBytes, WatermarkPolicy: watermarkCustom,
		EventTimeFn:   eventTimeSpec{Type: "*github.com/beamkinesis/beamkinesis/kinesisio.testTimeFn", JSON: `{"Offset":5}`},
		IdleThreshold: time.Minute, Deaggregate: false, MaxRecords: 9, PropagationDelay: 3 * time.Second,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("readSpec = %+v\nwant %+v", got, want)
	}
	fn, err := got.EventTimeFn.decode()
	if err != nil {
		t.Fatal(err)
	}
	if et := fn.EventTime(Record{ApproximateArrivalTimestamp: time.UnixMilli(10)}); et.UnixMilli() != 15 {
		t.Errorf("decoded EventTimeFn gave %v", et)
	}
	d := newDiscoverySpec("orders", cfg)
	if d.Interval != 4*time.Second || d.MaxReadTime != time.Hour || d.Start.Kind != startTrimHorizon {
		t.Errorf("discoverySpec = %+v", d)
	}
	if def := defaultReadConfig(); def.start.kind != startLatest || !def.failOnDataLoss || !defaultConfig().source.deaggregate ||
		def.maxRecordsPerRead != 10000 || def.maxRecordsPerFetch != 100000 || def.maxFetchTime != time.Second {
		t.Errorf("defaults = %+v", def)
	}
}

func TestReadDoFnsNeverShowCredentials(t *testing.T) {
	cfg := buildConfig(targetRead, []ReadOption{
		WithStaticCredentials("AKIDSECRETID", "wJalrXUtnFEMI"), WithSessionToken("FwoGZXIvYXdzE"), WithRegion("us-east-1"),
	})
	rfn := &readFn{shardFn{Spec: newReadSpec("orders", cfg)}}
	dfn := &discoverFn{Spec: newDiscoverySpec("orders", cfg)}
	for _, s := range []string{
		fmt.Sprintf("%v", rfn), fmt.Sprintf("%+v", rfn), fmt.Sprintf("%v", *rfn), fmt.Sprintf("%+v", rfn.Spec),
		fmt.Sprintf("%#v", rfn.Spec.Client), fmt.Sprintf("%+v", dfn.Spec), fmt.Sprintf("%v", *dfn),
	} {
		for _, secret := range []string{"wJalrXUtnFEMI", "FwoGZXIvYXdzE", "AKIDSECRETID"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q leaks %q", s, secret)
			}
		}
	}
}

// testTimeFn is a registered custom event time function: arrival time plus Offset ms.
type testTimeFn struct{ Offset int64 }

func (f *testTimeFn) EventTime(r Record) time.Time {
	return r.ApproximateArrivalTimestamp.Add(time.Duration(f.Offset) * time.Millisecond)
}

type unregisteredTimeFn struct{}

func (unregisteredTimeFn) EventTime(r Record) time.Time { return r.ApproximateArrivalTimestamp }

func init() {
	beam.RegisterType(reflect.TypeOf((*testTimeFn)(nil)).Elem())
}

// With enhanced fan-out the read-ahead options shape the drain of parked subscriptions
// (fetch_efo_drain.go): they are accepted, and they reach the spec the subscriber reads.
func TestReadAheadOptionsReachTheSpecOfAnEnhancedFanOutRead(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []ReadOption
		want int64
	}{
		{"default", nil, defaultReadAheadBytes},
		{"WithMaxReadAheadBytes", []ReadOption{WithMaxReadAheadBytes(32 << 20)}, 32 << 20},
		{"WithoutReadAhead", []ReadOption{WithoutReadAhead()}, 0},
	} {
		cfg := buildConfig(targetRead, append([]ReadOption{WithEnhancedFanOut("app")}, c.opts...))
		if got := newReadSpec("orders", cfg).ReadAheadBytes; got != c.want {
			t.Errorf("%s: ReadAheadBytes = %d, want %d", c.name, got, c.want)
		}
	}
}
