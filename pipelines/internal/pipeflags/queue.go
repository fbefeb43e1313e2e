package pipeflags

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func init() {
	register.Function1x1(queueRecordToRecord)
}

// EmbeddedQueue is the --queue value that makes a pipeline's embedded demo read its input
// stream through a queue of the embedded server instead of from the stream's shards.
const EmbeddedQueue = "embedded"

// QueueShardID is the ShardID of the records a queue read gives a pipeline: a queue has no
// shards, and the pipelines key files and logs by it.
const QueueShardID = "queue"

// Idle times that end a queue read that is bounded (--bounded) or embedded: the read ends
// once every receiver got nothing from the queue for this long.
const (
	QueueIdle         = 30 * time.Second
	EmbeddedQueueIdle = 3 * time.Second
)

// queueARN is the form of a Kinesis queue's ARN, as kinesisio.ReadQueue takes it.
var queueARN = regexp.MustCompile(`^arn:aws[a-z0-9-]*:kinesis:[a-z0-9-]+:\d{12}:queue/\S+$`)

// Input is what a pipeline reads, resolved from its flags: a stream's shards (Stream) or a
// Kinesis queue (Queue).
type Input struct {
	// Stream is the stream whose shards are read; empty when a queue is read.
	Stream string
	// Queue is the ARN of the queue read (EmbeddedQueue until the embedded server made it).
	Queue string
	// Bounded: the shard read is kinesisio.ReadBounded, the queue read ends once idle.
	Bounded bool
	// ReadOpts are the shard read's options, QueueOpts the queue read's.
	ReadOpts  []kinesisio.ReadOption
	QueueOpts []kinesisio.QueueOption
}

// Embedded reports whether the input is the embedded demo's.
func (in Input) Embedded() bool {
	return in.Stream == "" && (in.Queue == "" || in.Queue == EmbeddedQueue)
}

// Input resolves the read the flags ask for: the stream streamFlag named (its value
// stream), or --queue. Neither is the embedded demo, which reads its stream's shards, or a
// queue on it with --queue=embedded; its stream is set by the pipeline once the server
// started. --queue and the stream flag are exclusive, and the flags that only a shard read
// has (--starting_position, --max_read_time, the checkpoint table) are refused with a
// queue: a queue's starting position is the queue's own, and it keeps what was
// acknowledged itself.
func (s Source) Input(streamFlag, stream string) (Input, error) {
	if s.Queue == "" {
		bounded, opts, err := s.Resolve(stream == "")
		return Input{Stream: stream, Bounded: bounded, ReadOpts: opts}, err
	}
	if err := s.Validate(); err != nil {
		return Input{}, err
	}
	embedded := s.Queue == EmbeddedQueue
	switch {
	case stream != "":
		return Input{}, fmt.Errorf("%s and --queue are exclusive: read a stream's shards (%s) or a queue on it (--queue), not both", streamFlag, streamFlag)
	case !embedded && !queueARN.MatchString(s.Queue):
		return Input{}, fmt.Errorf("--queue=%q is not a Kinesis queue ARN (arn:aws:kinesis:<region>:<12-digit account>:queue/<id>); give the queue's ARN, or --queue=%s for the demo", s.Queue, EmbeddedQueue)
	case s.StartingPosition != "":
		return Input{}, errors.New("--starting_position does not apply to --queue: a queue starts where its CreateQueue said, and delivers what was not acknowledged")
	case s.MaxReadTime != 0:
		return Input{}, errors.New("--max_read_time does not apply to --queue; --bounded reads a queue until it stays empty")
	case s.Table.Name != "" || s.Table.Endpoint != "" || s.Table.Takeover || s.Table.LeaseDuration != 0:
		return Input{}, errors.New("the checkpoint table flags do not apply to --queue: a queue keeps what was acknowledged itself")
	}
	in := Input{Queue: s.Queue, Bounded: s.Bounded.Or(embedded)}
	switch {
	case embedded:
		// The demo ends once it has read what was put, streaming or not.
		in.QueueOpts = []kinesisio.QueueOption{kinesisio.WithQueueWait(time.Second), kinesisio.WithQueueStopWhenIdle(EmbeddedQueueIdle)}
	case in.Bounded:
		in.QueueOpts = []kinesisio.QueueOption{kinesisio.WithQueueStopWhenIdle(QueueIdle)}
	}
	return in, nil
}

// Connect returns in with the client options in front of its read's options.
func (in Input) Connect(client []kinesisio.ClientOption) Input {
	in.ReadOpts = ReadOptions(client, in.ReadOpts...)
	q := make([]kinesisio.QueueOption, 0, len(client)+len(in.QueueOpts))
	for _, o := range client {
		q = append(q, o)
	}
	in.QueueOpts = append(q, in.QueueOpts...)
	return in
}

// Read adds the read to s: kinesisio.Read or ReadBounded of the stream, or
// kinesisio.ReadQueue of the queue, whose records become kinesisio.Records (ShardID
// QueueShardID, SequenceNumber the RecordID, StreamName the queue's ARN, their event time
// the read's) so that the rest of a pipeline is the same for both. Its commit is the read's
// WithCommitAfterSinks: call After once the sinks are in the graph, and the read commits
// (acknowledges) what the sinks wrote. The records are a PCollection<kinesisio.Record>.
func (in Input) Read(s beam.Scope) (beam.PCollection, *Commit) {
	c := &Commit{c: &kinesisio.Commit{}}
	if in.Queue != "" {
		opts := append(slices.Clip(in.QueueOpts), kinesisio.WithCommitAfterSinks(c.c))
		recs := kinesisio.ReadQueue(s, in.Queue, opts...)
		return beam.ParDo(s.Scope("QueueRecords"), queueRecordToRecord, recs), c
	}
	opts := append(slices.Clip(in.ReadOpts), kinesisio.WithCommitAfterSinks(c.c))
	if in.Bounded {
		return kinesisio.ReadBounded(s, in.Stream, opts...), c
	}
	return kinesisio.Read(s, in.Stream, opts...), c
}

// Commit is the commit of Input.Read's read.
type Commit struct {
	c *kinesisio.Commit
}

// After commits the read's positions, or acknowledges its queue records, once the sinks
// whose outputs are written wrote them (kinesisio.Commit.After).
func (c *Commit) After(s beam.Scope, written ...beam.PCollection) {
	if c.c != nil {
		c.c.After(s, written...)
	}
}

// queueRecordToRecord is a queue record as the pipelines' shard records are.
func queueRecordToRecord(q kinesisio.QueueRecord) kinesisio.Record {
	data := q.Data
	if data == nil {
		data = []byte{}
	}
	return kinesisio.Record{
		StreamName: q.QueueARN, ShardID: QueueShardID, PartitionKey: q.PartitionKey, ExplicitHashKey: q.ExplicitHashKey,
		SequenceNumber: q.RecordID, SubSequenceNumber: q.SubIndex,
		ApproximateArrivalTimestamp: q.ApproximateArrivalTimestamp, Data: data, Aggregated: q.Aggregated,
	}
}
