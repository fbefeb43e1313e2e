package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// Target names, as subtests show them.
const (
	ours         = "kinesistest"
	kinesisLocal = string(emulators.KinesisLocal)
	kinesalite   = string(emulators.Kinesalite)
)

// targetNames lists every implementation the suite runs against.
var targetNames = []string{ours, kinesisLocal, kinesalite}

// gaps records, per emulator and per feature, where the emulator is wrong or
// lacks a feature, as found by this suite. A scenario that depends on the
// feature skips on that emulator with the reason below.
var gaps = map[string]map[string]string{
	kinesisLocal: {
		"subscribeToShard":           "kinesis-local 0.6.2 starts the SubscribeToShard event stream without the initial-response frame that aws-sdk-go-v2 >= 1.55 requires (the SDK fails with: deserialize initial response: expected initial-response, got SubscribeToShardEvent)",
		"deletingStatus":             "kinesis-local 0.6.2 sometimes reports a stream ACTIVE again after DeleteStream has returned, before removing it; the service reports DELETING until the stream is gone",
		"shardFilterAT_TRIM_HORIZON": "kinesis-local 0.6.2 also lists shards created after the trim horizon (split children) for ShardFilter AT_TRIM_HORIZON; the API reference lists only the shards open at TRIM_HORIZON",
		"endingSequenceNumber":       "kinesis-local 0.6.2 closes a shard with EndingSequenceNumber 9223372036854775807 (Long.MaxValue), smaller than the shard's own 56-digit sequence numbers",
		"badIterator":                "kinesis-local 0.6.2 answers a malformed shard iterator with HTTP 500 and no error type (java.lang.IllegalArgumentException: Illegal base64 character) instead of InvalidArgumentException",
		"partitionKeyValidation":     "kinesis-local 0.6.2 rejects a partition key outside 1..256 characters with InvalidArgumentException; the service's model validation answers ValidationException (as kinesalite does)",
		"emptyPutRecords":            "kinesis-local 0.6.2 accepts PutRecords with no records; the model requires 1..500 entries (ValidationException)",
		"recordSizeCountsKey":        "kinesis-local 0.6.2 counts only the data against the maximum record size; the service counts data plus partition key",
		"foreignSequenceNumber":      "kinesis-local 0.6.2 gives an AT_SEQUENCE_NUMBER iterator for a sequence number that belongs to another shard; the service rejects it with InvalidArgumentException (as kinesalite does)",
		"sequenceNumberPattern":      "kinesis-local 0.6.2 rejects a StartingSequenceNumber that does not match the model pattern with InvalidArgumentException; model validation answers ValidationException (as kinesalite does)",
		"hashKeyPattern":             "kinesis-local 0.6.2 answers a malformed ExplicitHashKey (\"12a\") with HTTP 500 and no error type (java.lang.NumberFormatException) instead of ValidationException",
		"putRecordsSize":             "kinesis-local 0.6.2 does not check the record size in PutRecords (it stores a 1 MiB + 1 byte record; PutRecord does reject it)",
	},
	kinesalite: {
		"consumers":            "kinesalite 3.3.3 implements neither enhanced fan-out consumers nor SubscribeToShard (UnknownOperationException)",
		"streamModeDetails":    "kinesalite 3.3.3 does not implement capacity modes: DescribeStreamSummary has no StreamModeDetails",
		"streamARN":            "kinesalite 3.3.3 does not accept the StreamARN request parameter: it requires StreamName (ValidationException: Value null at 'streamName')",
		"listShardsPaging":     "kinesalite 3.3.3 ignores ListShards MaxResults: it returns every shard in one page without a NextToken",
		"describeStreamPaging": "kinesalite 3.3.3 validates DescribeStream Limit and ExclusiveStartShardId but ignores them (actions/describeStream.js): every shard comes in one page",
		"shardFilter":          "kinesalite 3.3.3 does not implement ListShards ShardFilter and ignores it, listing every shard",
		"childShards":          "kinesalite 3.3.3 does not implement GetRecords ChildShards: the last page of a closed shard carries none",
		"getRecordsLimit":      "kinesalite 3.3.3 checks GetRecords Limit as a model constraint (ValidationException); the API reference says a Limit above 10,000 gets InvalidArgumentException",
		"recordSizeCountsKey":  "kinesalite 3.3.3 limits only the data to 1 MiB; the service counts data plus partition key against the record size",
		"oldRecordSizeModel":   "kinesalite 3.3.3 validates Data against the older model limit of 1 MiB (ValidationException); the current model allows 10 MiB and the service rejects a record over the stream's limit with InvalidArgumentException",
		"putRecordsSize":       "kinesalite 3.3.3 validates Data against the older model limit of 1 MiB (ValidationException); the current model allows 10 MiB and the service rejects a record over the stream's limit with InvalidArgumentException",
	},
}

// skipGap skips t when target has a recorded gap for feature.
func skipGap(t *testing.T, target, feature string) {
	t.Helper()
	if reason, ok := gaps[target][feature]; ok {
		t.Skipf("%s: %s", target, reason)
	}
}

// shared holds the emulators started for this test binary, one of each kind,
// started on first use and stopped by TestMain.
var shared struct {
	mu   sync.Mutex
	emus map[emulators.Kind]*emulators.Emulator
	errs map[emulators.Kind]error
}

// TestMain runs the tests with ptest (the end-to-end tests run pipelines on
// Prism) and then stops the shared emulators.
func TestMain(m *testing.M) {
	code := ptest.MainRet(m)
	shared.mu.Lock()
	for kind, e := range shared.emus {
		if err := e.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping %s: %v\n", kind, err)
		}
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// emulator returns the shared emulator of kind, starting it if needed. It
// skips t (or fails it, see emulators.Unavailable) when the emulator is not
// installed.
func emulator(t testing.TB, kind emulators.Kind) *emulators.Emulator {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.emus == nil {
		shared.emus = map[emulators.Kind]*emulators.Emulator{}
		shared.errs = map[emulators.Kind]error{}
	}
	e, ok := shared.emus[kind]
	err := shared.errs[kind]
	if !ok && err == nil {
		e, err = emulators.Start(context.Background(), kind)
		if err != nil {
			shared.errs[kind] = err
		} else {
			shared.emus[kind] = e
		}
	}
	if errors.Is(err, emulators.ErrUnavailable) {
		emulators.Unavailable(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// env is one target as a scenario sees it.
type env struct {
	target string
	url    string // endpoint
	c      *kinesis.Client
	// output returns the emulator's recent output, for failure messages.
	output func() string
}

// streamSeq makes stream names unique within the test binary; emulators are
// shared by every scenario.
var streamSeq atomic.Int64

// openTarget returns the env for target. The in-process server is started per
// call; emulators are shared.
func openTarget(t *testing.T, target string) *env {
	t.Helper()
	switch target {
	case ours:
		srv, err := kinesistest.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		return &env{target: target, url: srv.URL(), c: srv.Client(), output: func() string { return "" }}
	default:
		e := emulator(t, emulators.Kind(target))
		return &env{target: target, url: e.URL(), c: e.Client(), output: e.Output}
	}
}

// forEachTarget runs fn as a subtest per target, in parallel.
func forEachTarget(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, target := range targetNames {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			e := openTarget(t, target)
			fn(t, e)
			if t.Failed() && e.output() != "" {
				t.Logf("%s output (last part):\n%s", target, tail(e.output(), 4000))
			}
		})
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[...]" + s[len(s)-n:]
}

// ctx returns a context for one scenario step.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// newStream creates a PROVISIONED stream with shards shards, waits until it is
// ACTIVE and deletes it when the test ends.
func (e *env) newStream(t *testing.T, shards int32) string {
	t.Helper()
	name := fmt.Sprintf("conf-%s-%d", t.Name(), streamSeq.Add(1))
	name = sanitize(name)
	_, err := e.c.CreateStream(ctx(t), &kinesis.CreateStreamInput{
		StreamName: aws.String(name),
		ShardCount: aws.Int32(shards),
	})
	if err != nil {
		t.Fatalf("CreateStream %s: %v", name, err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := e.c.DeleteStream(c, &kinesis.DeleteStreamInput{StreamName: aws.String(name)})
		var nf *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			t.Errorf("DeleteStream %s: %v", name, err)
		}
	})
	e.waitActive(t, name)
	return name
}

// sanitize keeps the characters a stream name may hold ([a-zA-Z0-9_.-]) and
// at most 128 of them, keeping the end (which carries the sequence number).
func sanitize(s string) string {
	b := []byte(s)
	out := b[:0]
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
			out = append(out, c)
		default:
			out = append(out, '_')
		}
	}
	if len(out) > 128 {
		out = out[len(out)-128:]
	}
	return string(out)
}

// waitActive polls DescribeStreamSummary until the stream is ACTIVE.
func (e *env) waitActive(t *testing.T, name string) *types.StreamDescriptionSummary {
	t.Helper()
	var last types.StreamStatus
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := e.c.DescribeStreamSummary(ctx(t), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatalf("DescribeStreamSummary %s: %v", name, err)
		}
		last = out.StreamDescriptionSummary.StreamStatus
		if last == types.StreamStatusActive {
			return out.StreamDescriptionSummary
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s still %s after 30s", name, last)
		}
		<-tick.C
	}
}

// listShards returns every shard of the stream, following NextToken.
func (e *env) listShards(t *testing.T, in *kinesis.ListShardsInput) []types.Shard {
	t.Helper()
	var all []types.Shard
	for page := 0; ; page++ {
		out, err := e.c.ListShards(ctx(t), in)
		if err != nil {
			t.Fatalf("ListShards %+v: %v", in, err)
		}
		all = append(all, out.Shards...)
		if out.NextToken == nil {
			return all
		}
		if page > 100 {
			t.Fatalf("ListShards: more than 100 pages")
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: in.MaxResults}
	}
}

// put writes entries with one PutRecords call and fails t unless every entry
// succeeded.
func (e *env) put(t *testing.T, stream string, entries []types.PutRecordsRequestEntry) []types.PutRecordsResultEntry {
	t.Helper()
	out, err := e.c.PutRecords(ctx(t), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	if err != nil {
		t.Fatalf("PutRecords: %v", err)
	}
	if n := aws.ToInt32(out.FailedRecordCount); n != 0 {
		t.Fatalf("PutRecords: %d entries failed: %+v", n, out.Records)
	}
	if len(out.Records) != len(entries) {
		t.Fatalf("PutRecords returned %d results for %d entries", len(out.Records), len(entries))
	}
	return out.Records
}

// iterator returns a shard iterator.
func (e *env) iterator(t *testing.T, in *kinesis.GetShardIteratorInput) string {
	t.Helper()
	out, err := e.c.GetShardIterator(ctx(t), in)
	if err != nil {
		t.Fatalf("GetShardIterator %s %s: %v", aws.ToString(in.ShardId), in.ShardIteratorType, err)
	}
	return aws.ToString(out.ShardIterator)
}

// readResult is what reading a shard from an iterator produced.
type readResult struct {
	records []types.Record
	pages   []int // records per non-final page
	// closed is true when GetRecords returned no NextShardIterator: the end
	// of a closed shard.
	closed      bool
	childShards []types.ChildShard
}

// readAll reads from iter until the shard is caught up or, with toEnd, until
// GetRecords returns no NextShardIterator (the end of a closed shard). An open
// shard is caught up at the first empty page with MillisBehindLatest 0; a
// closed shard may return empty pages before its end.
func (e *env) readAll(t *testing.T, iter string, limit int32, toEnd bool) readResult {
	t.Helper()
	var res readResult
	for page := 0; page < 200; page++ {
		in := &kinesis.GetRecordsInput{ShardIterator: aws.String(iter)}
		if limit > 0 {
			in.Limit = aws.Int32(limit)
		}
		out, err := e.c.GetRecords(ctx(t), in)
		if err != nil {
			t.Fatalf("GetRecords: %v", err)
		}
		res.records = append(res.records, out.Records...)
		if len(out.Records) > 0 {
			res.pages = append(res.pages, len(out.Records))
		}
		if out.NextShardIterator == nil {
			res.closed = true
			res.childShards = out.ChildShards
			return res
		}
		if !toEnd && len(out.Records) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0 {
			return res
		}
		iter = aws.ToString(out.NextShardIterator)
	}
	if toEnd {
		t.Fatalf("closed shard: still a NextShardIterator after 200 GetRecords pages")
	}
	t.Fatalf("shard not drained after 200 GetRecords pages")
	return res
}

// errorCode returns the API error code of err, or "" when err is nil, or
// "<not an API error: ...>".
func errorCode(err error) string {
	if err == nil {
		return ""
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return fmt.Sprintf("<not an API error: %v>", err)
}

// noRetry makes a client send each request once, for error assertions.
func noRetry(o *kinesis.Options) { o.RetryMaxAttempts = 1 }
