package pipeflags

import (
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

const testQueueARN = "arn:aws:kinesis:eu-west-1:123456789012:queue/q-1"

func TestQueueFlagResolvesAQueueRead(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		stream      string
		wantBounded bool
		wantOpts    int // the queue options without the client's
	}{
		{[]string{"--queue=" + testQueueARN}, "", false, 0},
		{[]string{"--queue=" + testQueueARN, "--bounded"}, "", true, 1},                // stops when idle
		{[]string{"--queue=embedded"}, "", true, 2},                                    // the demo ends when idle
		{[]string{"--queue=embedded", "--bounded=false", "--window=5s"}, "", false, 2}, // streaming, still ends
	} {
		_, s, err := parse(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		in, err := s.Input("--stream", tc.stream)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if in.Stream != "" || in.Queue == "" || in.Bounded != tc.wantBounded || len(in.QueueOpts) != tc.wantOpts || len(in.ReadOpts) != 0 {
			t.Errorf("%q: %+v; want a queue read, bounded=%v with %d options", tc.args, in, tc.wantBounded, tc.wantOpts)
		}
		if got := in.Embedded(); got != (tc.args[0] == "--queue=embedded") {
			t.Errorf("%q: Embedded() = %v", tc.args, got)
		}
	}
	// The options, with the client's, are ones ReadQueue takes.
	_, s, err := parse(t, "--queue="+testQueueARN, "--bounded")
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.Input("--stream", "")
	if err != nil {
		t.Fatal(err)
	}
	in = in.Connect([]kinesisio.ClientOption{kinesisio.WithRegion("eu-west-1"), kinesisio.WithStaticCredentials("k", "s")})
	_, scope := beam.NewPipelineWithRoot()
	recs, commit := in.Read(scope)
	commit.After(scope, recs)
}

func TestQueueFlagRefusesWhatAppliesToShardsOnly(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		stream  string
		wantErr string
	}{
		{[]string{"--queue=" + testQueueARN}, "orders", "--stream and --queue are exclusive"},
		{[]string{"--queue=orders"}, "", `--queue="orders" is not a Kinesis queue ARN`},
		{[]string{"--queue=arn:aws:kinesis:eu-west-1:123456789012:stream/orders"}, "", "is not a Kinesis queue ARN"},
		{[]string{"--queue=" + testQueueARN, "--starting_position=latest"}, "", "--starting_position does not apply to --queue"},
		{[]string{"--queue=" + testQueueARN, "--max_read_time=1m"}, "", "--max_read_time does not apply to --queue"},
		{[]string{"--queue=" + testQueueARN, "--checkpoint_table=positions"}, "", "checkpoint table flags do not apply to --queue"},
		{[]string{"--queue=" + testQueueARN, "--window=0s"}, "", "--window=0s"},
	} {
		_, s, err := parse(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Input("--stream", tc.stream)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q with stream %q: %v; want one line containing %q", tc.args, tc.stream, err, tc.wantErr)
		}
	}
}

func TestPlanChecksTheQueue(t *testing.T) {
	_, s, err := parse(t, "--queue="+testQueueARN)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Plan(Kinesis{Region: "eu-west-1"}, &s, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Queues) != 1 || p.Queues[0].ARN != testQueueARN || p.Queues[0].Flag != "--queue" || len(p.Streams) != 0 {
		t.Errorf("plan %+v; want the queue of --queue", p)
	}
	s.Queue = EmbeddedQueue
	if p, err := Plan(Kinesis{}, &s, "demo"); err != nil || len(p.Queues) != 0 {
		t.Errorf("--queue=embedded planned %+v, %v; want no checks", p, err)
	}
}
