package kinesistest_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// newQueueEnv is newEnv with an ON_DEMAND stream "s" of 2 shards.
func newQueueEnv(t *testing.T, opts ...kinesistest.Option) *env {
	t.Helper()
	e := newEnv(t, opts...)
	if err := e.srv.CreateOnDemandStream("s", 2, ""); err != nil {
		t.Fatal(err)
	}
	return e
}

// createQueue creates a queue on stream over HTTP; mutate adjusts the input.
func (e *env) createQueue(name, stream string, mutate ...func(*kinesis.CreateQueueInput)) *types.QueueDescription {
	e.t.Helper()
	in := &kinesis.CreateQueueInput{
		QueueName:               aws.String(name),
		StreamConfigurationList: []types.QueueStreamConfiguration{{StreamARN: aws.String(e.srv.StreamARN(stream))}},
	}
	for _, m := range mutate {
		m(in)
	}
	out, err := e.kc.CreateQueue(e.ctx, in)
	if err != nil {
		e.t.Fatalf("CreateQueue(%s): %v", name, err)
	}
	return out.QueueDescription
}

// queue creates a queue on "s" directly, ACTIVE at once, and returns its ARN.
func (e *env) queue(name string, cfg kinesistest.QueueConfig) string {
	e.t.Helper()
	arn, err := e.srv.CreateQueue(name, "s", cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return arn
}

func startAt(typ types.QueueStartingPositionType) func(*kinesis.CreateQueueInput) {
	return func(in *kinesis.CreateQueueInput) {
		in.StreamConfigurationList[0].StartingPosition = &types.QueueStartingPosition{Type: typ}
	}
}

// receive calls ReceiveQueueRecords without waiting; mutate adjusts the input.
func (e *env) receive(arn string, limit int32, mutate ...func(*kinesis.ReceiveQueueRecordsInput)) []types.QueueRecord {
	e.t.Helper()
	out, err := e.receiveErr(arn, limit, mutate...)
	if err != nil {
		e.t.Fatalf("ReceiveQueueRecords: %v", err)
	}
	return out
}

func (e *env) receiveErr(arn string, limit int32, mutate ...func(*kinesis.ReceiveQueueRecordsInput)) ([]types.QueueRecord, error) {
	in := &kinesis.ReceiveQueueRecordsInput{QueueARN: aws.String(arn), Limit: aws.Int32(limit), WaitTimeSeconds: aws.Int32(0)}
	for _, m := range mutate {
		m(in)
	}
	out, err := e.kc.ReceiveQueueRecords(e.ctx, in)
	if err != nil {
		return nil, err
	}
	return out.QueueRecords, nil
}

// receiveDead calls ReceiveDeadLetterQueueRecords without waiting.
func (e *env) receiveDead(arn string, limit int32) []types.QueueRecord {
	e.t.Helper()
	out, err := e.kc.ReceiveDeadLetterQueueRecords(e.ctx, &kinesis.ReceiveDeadLetterQueueRecordsInput{
		QueueARN: aws.String(arn), Limit: aws.Int32(limit), WaitTimeSeconds: aws.Int32(0),
	})
	if err != nil {
		e.t.Fatalf("ReceiveDeadLetterQueueRecords: %v", err)
	}
	return out.QueueRecords
}

// entryResult is one entry's outcome of an entry operation: "" for success,
// else its error code.
type entryResult map[string]string

// ack acknowledges handles in one call and returns each handle's outcome.
func (e *env) ack(arn string, handles ...string) entryResult {
	e.t.Helper()
	in := &kinesis.AcknowledgeQueueRecordsInput{QueueARN: aws.String(arn)}
	for _, h := range handles {
		in.Entries = append(in.Entries, types.AcknowledgeQueueRecordsRequestEntry{ReceiptHandle: aws.String(h)})
	}
	out, err := e.kc.AcknowledgeQueueRecords(e.ctx, in)
	if err != nil {
		e.t.Fatalf("AcknowledgeQueueRecords: %v", err)
	}
	res := entryResult{}
	for _, s := range out.Successful {
		res[*s.ReceiptHandle] = ""
	}
	for _, f := range out.Failed {
		res[*f.ReceiptHandle] = *f.ErrorCode
	}
	if len(res) != len(handles) {
		e.t.Fatalf("AcknowledgeQueueRecords answered %d entries for %d handles", len(res), len(handles))
	}
	return res
}

// setVisibility calls UpdateQueueRecordsVisibility for handles with one
// timeout and returns each handle's outcome.
func (e *env) setVisibility(arn string, sec int32, handles ...string) entryResult {
	e.t.Helper()
	in := &kinesis.UpdateQueueRecordsVisibilityInput{QueueARN: aws.String(arn)}
	for _, h := range handles {
		in.Entries = append(in.Entries, types.UpdateQueueRecordsVisibilityRequestEntry{ReceiptHandle: aws.String(h), VisibilityTimeoutSeconds: aws.Int32(sec)})
	}
	out, err := e.kc.UpdateQueueRecordsVisibility(e.ctx, in)
	if err != nil {
		e.t.Fatalf("UpdateQueueRecordsVisibility: %v", err)
	}
	res := entryResult{}
	for _, s := range out.Successful {
		res[*s.ReceiptHandle] = ""
	}
	for _, f := range out.Failed {
		res[*f.ReceiptHandle] = *f.ErrorCode
	}
	return res
}

// putN writes n records "r0".."r<n-1>" with keys "k0".. to stream, in
// PutRecords calls of up to 500, and returns their sequence numbers by data.
func (e *env) putN(stream string, n int) map[string]string {
	e.t.Helper()
	seqs := make(map[string]string, n)
	for start := 0; start < n; start += 500 {
		in := &kinesis.PutRecordsInput{StreamName: aws.String(stream)}
		for i := start; i < min(n, start+500); i++ {
			in.Records = append(in.Records, types.PutRecordsRequestEntry{
				PartitionKey: aws.String("k" + strconv.Itoa(i)), Data: []byte("r" + strconv.Itoa(i)),
			})
		}
		out, err := e.kc.PutRecords(e.ctx, in)
		if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
			e.t.Fatalf("PutRecords: %v %+v", err, out)
		}
		for i, r := range out.Records {
			seqs[string(in.Records[i].Data)] = *r.SequenceNumber
		}
	}
	return seqs
}

// drain receives until a receive returns nothing, and returns the records.
func (e *env) drain(arn string) []types.QueueRecord {
	e.t.Helper()
	var all []types.QueueRecord
	for {
		got := e.receive(arn, 10)
		if len(got) == 0 {
			return all
		}
		all = append(all, got...)
	}
}

// handles returns the records' receipt handles.
func handles(recs []types.QueueRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = *r.ReceiptHandle
	}
	return out
}

// datas returns the records' data, sorted.
func datas(recs []types.QueueRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Data)
	}
	slices.Sort(out)
	return out
}

// wantNames returns "r0".."r<n-1>" sorted as strings.
func wantNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "r" + strconv.Itoa(i)
	}
	slices.Sort(out)
	return out
}

func (e *env) stats(arn string) kinesistest.QueueStats {
	e.t.Helper()
	st, err := e.srv.QueueStats(arn)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}
