package kinesisio

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
	"github.com/beamkinesis/beamkinesis/testing/streamcheck"
)

func init() {
	register.DoFn2x0[[]byte, func(Message)](&genMessagesFn{})
	register.DoFn3x1[context.Context, Message, func(Message), error](&splitShardsAtFn{})
	register.DoFn2x0[FailedMessage, func(Message)](&deadLetterFn{})
	register.Function1x1(describeFailure)
	register.Function1x1(keyOfString)
	register.Function1x1(messageSummary)
	register.Function1x1(validKeyAndData)
}

// genMessagesFn emits messages From..To-1 of testMessage.
type genMessagesFn struct{ From, To int }

func (f *genMessagesFn) ProcessElement(_ []byte, emit func(Message)) {
	for i := f.From; i < f.To; i++ {
		emit(testMessage(i))
	}
}

// testMessage i has a distinct partition key and a 100-byte payload.
func testMessage(i int) Message {
	data := fmt.Appendf(nil, "message %08d ", i)
	data = append(data, strings.Repeat("x", 100-len(data))...)
	return Message{PartitionKey: fmt.Sprintf("k%07d", i), Data: data}
}

func wantMessages(n int) map[string]int {
	m := make(map[string]int, n)
	for i := 0; i < n; i++ {
		msg := testMessage(i)
		m[msg.PartitionKey+"|"+string(msg.Data)]++
	}
	return m
}

func userRecordKey(u streamcheck.UserRecord) string { return u.PartitionKey + "|" + string(u.Data) }

// to connects the connector to srv.
func to(srv *kinesistest.Server, opts ...WriteOption) []WriteOption {
	return append([]WriteOption{WithEndpoint(srv.URL()), WithRegion("us-east-1"), WithStaticCredentials("test", "test")}, opts...)
}

func readStream(t testing.TB, srv *kinesistest.Server, stream string) streamcheck.Result {
	t.Helper()
	srv.SetLimits(false)
	srv.SetFaults(kinesistest.Faults{})
	res, err := streamcheck.Read(context.Background(), srv.Client(), stream)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func writeCounter(t *testing.T, pr beam.PipelineResult, name string) int64 {
	t.Helper()
	var total int64
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		if c.Key.Namespace == "kinesisio.Write" && c.Key.Name == name {
			total += c.Committed
		}
	}
	return total
}

func generated(s beam.Scope, n int) beam.PCollection {
	return beam.ParDo(s, &genMessagesFn{From: 0, To: n}, beam.Impulse(s))
}

// Done when 1: 100,000 messages with aggregation read back with raw GetRecords and
// deaggregation equal the input, each in the shard whose range holds its key.
func TestWriteAggregatedLandsEveryMessageInItsShard(t *testing.T) {
	const n = 100_000
	srv := kinesistest.StartT(t, kinesistest.WithStream("out", 8))
	p, s := beam.NewPipelineWithRoot()
	failed := Write(s, "out", generated(s, n), to(srv, WithAggregation())...)
	passert.Empty(s, failed)
	pr, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	res := readStream(t, srv, "out")
	if d := streamcheck.Diff(streamcheck.Multiset(res.Records, userRecordKey), wantMessages(n), 5); d != "" {
		t.Fatal(d)
	}
	for _, u := range res.Records {
		if !u.InRange {
			t.Fatalf("message %q is in shard %s, whose range does not hold its key", u.PartitionKey, u.Shard)
		}
	}
	if res.Aggregates == 0 || res.KinesisRecords > n/100 {
		t.Errorf("%d Kinesis records (%d aggregates) for %d messages: not aggregated", res.KinesisRecords, res.Aggregates, n)
	}
	if got := writeCounter(t, pr, "user_records"); got != n {
		t.Errorf("user_records = %d, want %d", got, n)
	}
	if got := writeCounter(t, pr, "kinesis_records"); got != int64(res.KinesisRecords) {
		t.Errorf("kinesis_records = %d, the stream holds %d", got, res.KinesisRecords)
	}
}

// Done when 2, first half: with limits on, 30% failing entries and some 5xx responses,
// nothing is lost and the failed output is empty.
func TestWriteSurvivesFailingEntriesAndServerErrors(t *testing.T) {
	const n = 20_000
	srv := kinesistest.StartT(t, kinesistest.WithStream("out", 2), kinesistest.WithLimits(), kinesistest.WithFaults(kinesistest.Faults{Seed: 11, PutEntryThrottleRate: 0.15, PutEntryInternalFailureRate: 0.15,
		ServerErrorRate: 0.05, Operations: []string{"PutRecords"}}))
	p, s := beam.NewPipelineWithRoot()
	failed := Write(s, "out", generated(s, n), to(srv, WithRetries(30, 10*time.Millisecond, 100*time.Millisecond),
		WithMaxAggregateRecords(50))...) // small aggregates: many entries to fail
	passert.Empty(s, failed)
	pr, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	if writeCounter(t, pr, "throttled_entries") == 0 || writeCounter(t, pr, "retries") == 0 {
		t.Errorf("throttled_entries = %d, retries = %d: the faults were not exercised",
			writeCounter(t, pr, "throttled_entries"), writeCounter(t, pr, "retries"))
	}
	res := readStream(t, srv, "out")
	// 5xx answers come before any work is done, so there are no duplicates either.
	if d := streamcheck.Diff(streamcheck.Multiset(res.Records, userRecordKey), wantMessages(n), 5); d != "" {
		t.Fatal(d)
	}
}

// deadLetterFn turns a failed message back into a message for a dead-letter stream,
// with a partition key that reports whether the failure was well described.
type deadLetterFn struct{ Attempts int }

func (f *deadLetterFn) ProcessElement(m FailedMessage, emit func(Message)) {
	ok := m.Attempts == f.Attempts && strings.Contains(m.Reason, m.ErrorCode) &&
		(m.ErrorCode == "ProvisionedThroughputExceededException" || m.ErrorCode == "InternalFailure")
	tag := "ok"
	if !ok {
		tag = fmt.Sprintf("bad %s %d %.80s", m.ErrorCode, m.Attempts, m.Reason)
	}
	emit(Message{PartitionKey: tag, Data: append([]byte(m.PartitionKey+"|"), m.Data...)})
}

// Done when 2, second half: when retries run out, the failed output holds every message
// not written, with its reason, and written + failed = input.
func TestWriteReportsMessagesWhoseRetriesRanOut(t *testing.T) {
	for _, tc := range []struct {
		name               string
		throttle, internal float64
		wantAllFailed      bool
	}{
		{"every entry fails", 0.5, 0.5, true},
		{"most entries fail", 0.5, 0.3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 5000
			srv := kinesistest.StartT(t, kinesistest.WithStream("out", 2), kinesistest.WithFaults(kinesistest.Faults{Seed: 5,
				PutEntryThrottleRate: tc.throttle, PutEntryInternalFailureRate: tc.internal, Operations: []string{"PutRecords"}}))
			dead := kinesistest.StartT(t, kinesistest.WithStream("dead", 1))
			p, s := beam.NewPipelineWithRoot()
			failed := Write(s, "out", generated(s, n), to(srv, WithRetries(2, time.Millisecond, 5*time.Millisecond),
				WithMaxAggregateRecords(20))...)
			Write(s, "dead", beam.ParDo(s, &deadLetterFn{Attempts: 3}, failed), to(dead)...)
			if err := ptest.Run(p); err != nil {
				t.Fatal(err)
			}
			written := readStream(t, srv, "out")
			letters := readStream(t, dead, "dead")
			got := streamcheck.Multiset(written.Records, userRecordKey)
			for _, u := range letters.Records {
				if u.PartitionKey != "ok" {
					t.Fatalf("failed message badly described: %s", u.PartitionKey)
				}
				got[string(u.Data)]++
			}
			if d := streamcheck.Diff(got, wantMessages(n), 5); d != "" {
				t.Fatalf("written + failed != input: %s", d)
			}
			if tc.wantAllFailed && (len(written.Records) != 0 || len(letters.Records) != n) {
				t.Errorf("%d written, %d failed; want every message failed", len(written.Records), len(letters.Records))
			}
			if !tc.wantAllFailed && (len(written.Records) == 0 || len(letters.Records) == 0) {
				t.Errorf("%d written, %d failed; want both", len(written.Records), len(letters.Records))
			}
		})
	}
}

func TestWriteFailOnErrorFailsThePipeline(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("out", 1), kinesistest.WithFaults(kinesistest.Faults{PutEntryThrottleRate: 1, Operations: []string{"PutRecords"}}))
	p, s := beam.NewPipelineWithRoot()
	Write(s, "out", generated(s, 10), to(srv, WithRetries(1, time.Millisecond, time.Millisecond), WithFailOnError())...)
	err := ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), "WithFailOnError") || !strings.Contains(err.Error(), "ProvisionedThroughputExceededException") {
		t.Fatalf("Run = %v, want a failure naming WithFailOnError and the error code", err)
	}
}

// splitShardsAtFn passes messages through and, before message At, splits every open shard
// of the stream in the middle: the writer downstream (fused into the same bundle) has its
// shard map already and learns of the split only from its writes.
type splitShardsAtFn struct {
	At       int
	Stream   string
	Endpoint string
	seen     int
}

func (f *splitShardsAtFn) ProcessElement(ctx context.Context, m Message, emit func(Message)) error {
	if f.seen == f.At {
		if err := splitAll(ctx, f.Endpoint, f.Stream); err != nil {
			return err
		}
	}
	f.seen++
	emit(m)
	return nil
}

func splitAll(ctx context.Context, endpoint, stream string) error {
	c, err := newClient(ctx, clientConfig{Endpoint: endpoint, Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test"})
	if err != nil {
		return err
	}
	ls, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return err
	}
	for _, sh := range ls.Shards {
		start, _ := kpl.ParseUint128(aws.ToString(sh.HashKeyRange.StartingHashKey))
		end, _ := kpl.ParseUint128(aws.ToString(sh.HashKeyRange.EndingHashKey))
		mid := kpl.Uint128{Hi: start.Hi/2 + end.Hi/2, Lo: 0} // inside: both ranges span many Hi values
		if _, err := c.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(stream), ShardToSplit: sh.ShardId,
			NewStartingHashKey: aws.String(mid.String())}); err != nil {
			return fmt.Errorf("splitting %s: %w", aws.ToString(sh.ShardId), err)
		}
	}
	return nil
}

// Done when 3: a split during the write; every message still ends up, as a KCL consumer
// sees the stream, in the shard whose range holds its key.
func TestWriteSplitDuringTheWrite(t *testing.T) {
	const n = 20_000
	srv := kinesistest.StartT(t, kinesistest.WithStream("out", 2))
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.ParDo(s, &splitShardsAtFn{At: n / 2, Stream: "out", Endpoint: srv.URL()}, generated(s, n))
	failed := Write(s, "out", msgs, to(srv)...)
	passert.Empty(s, failed)
	pr, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	res := readStream(t, srv, "out")
	kept := res.Kept()
	if d := streamcheck.Diff(streamcheck.Multiset(kept, userRecordKey), wantMessages(n), 5); d != "" {
		t.Fatalf("messages a KCL consumer keeps: %s", d)
	}
	for _, u := range kept {
		if !u.InRange {
			t.Fatalf("message %q kept in shard %s outside its range", u.PartitionKey, u.Shard)
		}
	}
	// Whether the parents got records depends on what was sent before the split (the
	// producer test checks both sides deterministically); the children must have some.
	shardsWritten := make(map[string]bool)
	for _, u := range kept {
		shardsWritten[u.Shard] = true
	}
	for _, child := range []string{"shardId-000000000002", "shardId-000000000003", "shardId-000000000004", "shardId-000000000005"} {
		if !shardsWritten[child] {
			t.Errorf("no messages in child shard %s; shards written: %v", child, shardsWritten)
		}
	}
	if got := writeCounter(t, pr, "wrong_shard_aggregates"); got != int64(res.MisplacedAggregates) {
		t.Errorf("wrong_shard_aggregates = %d, the stream holds %d misplaced aggregates", got, res.MisplacedAggregates)
	}
}

// describeFailure summarises a failed message for an exact comparison.
func describeFailure(f FailedMessage) string {
	reason := f.Reason
	for _, want := range []string{"empty", "257 characters", "over the stream's record size limit", "explicit hash key"} {
		if strings.Contains(reason, want) {
			reason = want
		}
	}
	return fmt.Sprintf("key of %d bytes, %d data bytes, %s, attempts %d: %s", len(f.PartitionKey), len(f.Data), f.ErrorCode, f.Attempts, reason)
}

// Done when 4: invalid messages go to the failed output with clear reasons, and the valid
// ones around them are written.
func TestWriteInvalidMessagesGoToTheFailedOutput(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("out", 1))
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.Create(s,
		Message{PartitionKey: "", Data: []byte("no key")},
		Message{PartitionKey: strings.Repeat("k", 257), Data: []byte("long key")},
		Message{PartitionKey: "big", Data: make([]byte, 1<<20)},
		Message{PartitionKey: "ehk", ExplicitHashKey: "not-a-number", Data: []byte("bad hash key")},
		Message{PartitionKey: "good-1", Data: []byte("one")},
		Message{PartitionKey: strings.Repeat("k", 256), Data: []byte("longest key")},
		Message{PartitionKey: "max", Data: make([]byte, 1<<20-3)},
		Message{PartitionKey: "empty", Data: nil},
	)
	failed := Write(s, "out", msgs, to(srv)...)
	passert.Equals(s, beam.ParDo(s, describeFailure, failed),
		"key of 0 bytes, 6 data bytes, InvalidMessage, attempts 0: empty",
		"key of 257 bytes, 8 data bytes, InvalidMessage, attempts 0: 257 characters",
		"key of 3 bytes, 1048576 data bytes, InvalidMessage, attempts 0: over the stream's record size limit",
		"key of 3 bytes, 12 data bytes, InvalidMessage, attempts 0: explicit hash key",
	)
	pr, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	res := readStream(t, srv, "out")
	got := streamcheck.Multiset(res.Records, func(u streamcheck.UserRecord) string { return fmt.Sprint(len(u.PartitionKey), "/", len(u.Data)) })
	want := map[string]int{"6/3": 1, "256/11": 1, "3/1048573": 1, "5/0": 1}
	if d := streamcheck.Diff(got, want, 5); d != "" {
		t.Fatalf("valid messages written: %s", d)
	}
	if got := writeCounter(t, pr, "invalid_messages"); got != 4 {
		t.Errorf("invalid_messages = %d, want 4", got)
	}
}

func keyOfString(s string) string { return "key-" + s }

func messageSummary(m Message) string { return m.PartitionKey + "=" + string(m.Data) }

func validKeyAndData(m Message) string {
	if err := kpl.ValidatePartitionKey(m.PartitionKey); err != nil {
		return err.Error()
	}
	return "valid key: " + string(m.Data)
}

func TestMessageHelpers(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	words := beam.Create(s, "a", "b")
	passert.Equals(s, beam.ParDo(s, messageSummary, MessagesFromStrings(s, words, keyOfString)), "key-a=a", "key-b=b")
	random := MessagesWithRandomKeys(s, beam.Create(s, []byte("x"), []byte("y")))
	passert.Equals(s, beam.ParDo(s, validKeyAndData, random), "valid key: x", "valid key: y")
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

func TestWriteOptionsPanicNamingTheOption(t *testing.T) {
	for _, tc := range []struct {
		opt  WriteOption
		name string
	}{
		{WithMaxConnections(0), "WithMaxConnections"},
		{WithMaxConnections(257), "WithMaxConnections"},
		{WithRecordMaxBufferedTime(0), "WithRecordMaxBufferedTime"},
		{WithFlushWaitTime(-time.Second), "WithFlushWaitTime"},
		{WithMaxAggregateBytes(63), "WithMaxAggregateBytes"},
		{WithMaxAggregateBytes(1<<20 + 1), "WithMaxAggregateBytes"},
		{WithMaxAggregateRecords(0), "WithMaxAggregateRecords"},
		{WithRateLimit(0), "WithRateLimit"},
		{WithMaxBufferedBytes(1000), "WithMaxBufferedBytes"},
		{WithShardMapRefreshInterval(time.Millisecond), "WithShardMapRefreshInterval"},
	} {
		got := panicOf(func() {
			_, s := beam.NewPipelineWithRoot()
			Write(s, "out", beam.Create(s, Message{PartitionKey: "k"}), tc.opt)
		})
		if !strings.Contains(got, "kinesisio.Write") || !strings.Contains(got, tc.name) {
			t.Errorf("panic %q, want one naming kinesisio.Write and %s", got, tc.name)
		}
	}
	got := panicOf(func() {
		_, s := beam.NewPipelineWithRoot()
		Write(s, "out", beam.Create(s, "not a message"))
	})
	if !strings.Contains(got, "kinesisio.Message") {
		t.Errorf("panic %q for a PCollection<string>, want one naming kinesisio.Message", got)
	}
	cfg := buildConfig(targetWrite, []WriteOption{WithoutAggregation(), WithMaxConnections(3), WithRateLimit(50)})
	if cfg.write.Aggregate || cfg.write.MaxConnections != 3 || cfg.write.RateLimitPercent != 50 || cfg.write.MaxAggregateBytes != DefaultMaxAggregateBytes {
		t.Errorf("config %+v does not reflect the options over the defaults", cfg.write)
	}
}

func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func TestWriteFlushWaitTimeFailsASlowBundle(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("out", 1), kinesistest.WithFaults(kinesistest.Faults{Latency: 300 * time.Millisecond, Operations: []string{"PutRecords"}}))
	p, s := beam.NewPipelineWithRoot()
	Write(s, "out", generated(s, 10), to(srv, WithFlushWaitTime(20*time.Millisecond))...)
	err := ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), "flushing at the end of the bundle") || !strings.Contains(err.Error(), "unacknowledged") {
		t.Fatalf("Run = %v, want the bundle failed while flushing, naming the unacknowledged messages", err)
	}
}

func TestWriteToAMissingStreamFailsNamingIt(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("exists", 1))
	p, s := beam.NewPipelineWithRoot()
	Write(s, "missing", generated(s, 3), to(srv)...)
	err := ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), `"missing"`) || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Fatalf("Run = %v, want a failure naming the stream and ResourceNotFoundException", err)
	}
}
