// Package embedded runs the in-process Kinesis server (testing/kinesistest) that every
// pipeline uses when it is given no stream, so that it runs with one command, without an
// AWS account, and can be tested end to end.
//
// The server lives in the pipeline's own process. Workers reach it only when they run in
// that process too: on Prism (the default runner) or on a job server with
// --environment_type=LOOPBACK. CheckRunner refuses the other set-ups at launch.
package embedded

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/pipeflags"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// maxPutAttempts bounds how often Put resends entries the server failed.
const maxPutAttempts = 20

// Start starts the embedded server and creates streams, each with shards shards. Close the
// server when the pipeline is done.
func Start(shards int, streams []string, opts ...kinesistest.Option) (*kinesistest.Server, error) {
	return start(Setup{Streams: streams, Shards: shards, ServerOptions: opts})
}

// start starts the server of setup and creates its streams.
func start(setup Setup) (*kinesistest.Server, error) {
	srv, err := kinesistest.Start(setup.ServerOptions...)
	if err != nil {
		return nil, fmt.Errorf("starting the embedded Kinesis server: %w", err)
	}
	create := srv.CreateStream
	if setup.OnDemand || setup.Queue != "" {
		create = func(name string, shards int) error { return srv.CreateOnDemandStream(name, shards, "") }
	}
	for _, name := range setup.Streams {
		if err := create(name, setup.Shards); err != nil {
			srv.Close()
			return nil, fmt.Errorf("creating stream %q on the embedded Kinesis server: %w", name, err)
		}
	}
	if setup.Queue != "" && len(setup.Streams) > 0 {
		if _, err := srv.CreateQueue(setup.Queue, setup.Streams[0], kinesistest.QueueConfig{StartingPosition: types.QueueStartingPositionTypeTrimHorizon}); err != nil {
			srv.Close()
			return nil, fmt.Errorf("creating queue %q on the embedded Kinesis server: %w", setup.Queue, err)
		}
	}
	return srv, nil
}

// Setup is the embedded mode of a pipeline: the streams it needs and their records.
type Setup struct {
	// Streams are created with Shards shards each.
	Streams []string
	Shards  int
	// OnDemand makes the streams ON_DEMAND (with user partition keys) instead of
	// PROVISIONED.
	OnDemand bool
	// Queue, when not empty, is created on the first stream, which is then ON_DEMAND,
	// starting at its trim horizon, before the seed: read it with QueueARN.
	Queue string
	// Seed, if not nil, puts the pipeline's input records once the streams exist.
	Seed func(ctx context.Context, srv *kinesistest.Server) error
	// ServerOptions configure the server (tests pass a manual clock).
	ServerOptions []kinesistest.Option
}

// Launch checks that the runner's workers can reach an in-process server (CheckRunner),
// starts the server, creates the streams and seeds them. Close the server when the
// pipeline is done.
func Launch(ctx context.Context, setup Setup) (*kinesistest.Server, error) {
	if err := CheckRunner(); err != nil {
		return nil, err
	}
	srv, err := start(setup)
	if err != nil {
		return nil, err
	}
	if setup.Seed != nil {
		if err := setup.Seed(ctx, srv); err != nil {
			srv.Close()
			return nil, fmt.Errorf("seeding the embedded streams: %w", err)
		}
	}
	return srv, nil
}

// DemoQueue is the queue a pipeline's embedded demo reads with --queue=embedded
// (Setup.Queue).
const DemoQueue = "demo-queue"

// Input returns in reading srv: its queue DemoQueue when in reads a queue, else stream,
// with the client options that point at srv (Options).
func Input(srv *kinesistest.Server, in pipeflags.Input, stream string) (pipeflags.Input, error) {
	if in.Queue != "" {
		arn, err := srv.QueueARN(DemoQueue)
		if err != nil {
			return pipeflags.Input{}, fmt.Errorf("the embedded queue: %w", err)
		}
		in.Queue = arn
	} else {
		in.Stream = stream
	}
	return in.Connect(Options(srv)), nil
}

// Options are the kinesisio client options that point a transform at srv. The server does
// not check signatures, so any static keys do; retries are quick because it is local.
func Options(srv *kinesistest.Server) []kinesisio.ClientOption {
	return []kinesisio.ClientOption{
		kinesisio.WithEndpoint(srv.URL()),
		kinesisio.WithRegion(kinesistest.Region),
		kinesisio.WithStaticCredentials("embedded", "embedded"),
		kinesisio.WithRetries(10, 10*time.Millisecond, 200*time.Millisecond),
	}
}

// Entry is one record to put.
type Entry struct {
	PartitionKey string
	Data         []byte
}

// Put writes entries to stream in order, with PutRecords in batches of up to 500 entries,
// resending the entries the server failed. Entries with the same partition key keep their
// order in the stream.
func Put(ctx context.Context, client *kinesis.Client, stream string, entries []Entry) error {
	for len(entries) > 0 {
		n := min(len(entries), 500)
		batch := make([]types.PutRecordsRequestEntry, n)
		for i, e := range entries[:n] {
			batch[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(e.PartitionKey), Data: e.Data}
		}
		if err := putBatch(ctx, client, stream, batch); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}

// putBatch puts one batch, resending failed entries. A resent entry may land after a later
// entry of the batch with the same key; the embedded server fails entries only when a test
// asks it to.
func putBatch(ctx context.Context, client *kinesis.Client, stream string, batch []types.PutRecordsRequestEntry) error {
	for attempt := 1; len(batch) > 0; attempt++ {
		out, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: batch})
		if err != nil {
			if attempt == maxPutAttempts {
				return fmt.Errorf("putting %d records to %q: %w", len(batch), stream, err)
			}
			continue
		}
		var failed []types.PutRecordsRequestEntry
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				failed = append(failed, batch[i])
			}
		}
		if len(failed) > 0 && attempt == maxPutAttempts {
			return fmt.Errorf("putting records to %q: %d entries still failed after %d attempts", stream, len(failed), attempt)
		}
		batch = failed
	}
	return nil
}

// PutStrings puts each string as one record with partition key key.
func PutStrings(ctx context.Context, client *kinesis.Client, stream, key string, data ...string) error {
	entries := make([]Entry, len(data))
	for i, d := range data {
		entries[i] = Entry{PartitionKey: key, Data: []byte(d)}
	}
	return Put(ctx, client, stream, entries)
}

// CheckRunner reports whether the runner chosen by Beam's flags runs workers in this
// process, where they can reach the embedded server.
func CheckRunner() error {
	switch strings.ToLower(*runners.Runner) {
	case "", "prism", "prismrunner", "direct", "vet":
		return nil
	}
	if jobopts.IsLoopback() {
		return nil
	}
	return fmt.Errorf("the embedded Kinesis server runs in this process and --runner=%s with --environment_type=%q runs workers elsewhere; pass --stream (and --kinesis_region or --kinesis_endpoint) to use a real stream, or add --environment_type=LOOPBACK", *runners.Runner, *jobopts.EnvironmentType)
}

// SeedWords are the records of the Spark Kinesis connector's examples, one word each, put
// with partition key "1" as its `aws kinesis put-record` commands do.
var SeedWords = []string{"Kinesis", "Connector", "for", "Apache", "Spark"}

// UserRecord is a user record as stored in a stream, after KPL deaggregation.
type UserRecord struct {
	ShardID      string
	PartitionKey string
	Data         string
}

// UserRecords returns the user records stream holds on srv, deaggregating KPL aggregates,
// in shard and sequence order, and how many Kinesis records carried them.
func UserRecords(srv *kinesistest.Server, stream string) (recs []UserRecord, kinesisRecords int, err error) {
	stored, err := srv.StreamRecords(stream)
	if err != nil {
		return nil, 0, fmt.Errorf("listing the records of %q: %w", stream, err)
	}
	for _, r := range stored {
		users, aggregated, err := kpl.Deaggregate(r.Data)
		if err != nil {
			return nil, 0, fmt.Errorf("record %s of %s in %q: %w", r.SequenceNumber, r.ShardID, stream, err)
		}
		if !aggregated {
			recs = append(recs, UserRecord{ShardID: r.ShardID, PartitionKey: r.PartitionKey, Data: string(r.Data)})
			continue
		}
		for _, u := range users {
			recs = append(recs, UserRecord{ShardID: r.ShardID, PartitionKey: u.PartitionKey, Data: string(u.Data)})
		}
	}
	return recs, len(stored), nil
}
