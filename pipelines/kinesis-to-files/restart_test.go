package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/embedded"
	"github.com/beamkinesis/beamkinesis/pipelines/internal/producer"
	"github.com/beamkinesis/beamkinesis/testing/childjob"
	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// killedJobEnv names the environment of TestKilledStagingJobChild: the job's flags,
// separated by spaces.
const killedJobEnv = "BEAMKINESIS_K2F_KILLED_JOB"

// restartWindow is the window of the restart test: long enough that a kill lands inside
// one, short enough for a quick test.
const restartWindow = 2 * time.Second

// TestKilledStagingJobChild is the first job of TestStagingIsExactlyOnceAcrossAKill, run in
// a child process of the test binary so that it can be killed mid-window. A normal run
// skips it.
func TestKilledStagingJobChild(t *testing.T) {
	runStaging(t, childjob.Args(t, killedJobEnv)...)
}

// runStaging runs kinesis-to-files with args on Prism until it ends.
func runStaging(t *testing.T, args ...string) {
	t.Helper()
	j, err := prepare(context.Background(), parse(t, args...), environment{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.stop()
	p, s := beam.NewPipelineWithRoot()
	j.build(s)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// TestStagingIsExactlyOnceAcrossAKill is issue 23's restart case for the seed's ingestion
// job on Prism: kinesis-to-files streams JSON events into 2 s windows of Parquet files with
// --checkpoint_table on dynalite while a producer puts events. The job is killed (SIGKILL,
// no drain) a quarter into a window, after it staged windows and committed positions; a
// second job on the same table and staging directory reads what the first had not
// committed. DuckDB must then read every event put exactly once: the second job re-reads
// at most the windows staged after the last commit, and rewrites their files with the same
// events.
//
// The stream has one shard, because of Prism v2.77.0's SDF output watermark (see
// kinesisio's TestWindowedJobLosesNothingWhenKilled); the files per Kinesis shard that a
// restart of several shards needs are exercised on Flink (testing/flink).
func TestStagingIsExactlyOnceAcrossAKill(t *testing.T) {
	components.PythonT(t)
	const stream, table = "events", "staging-positions"
	dyn := emulators.StartT(t, emulators.Dynalite).URL()
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	t.Setenv("AWS_ACCESS_KEY_ID", "k2f-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "k2f-test")
	dir := t.TempDir()
	args := []string{"--stream=" + stream, "--kinesis_endpoint=" + srv.URL(), "--kinesis_region=" + kinesistest.Region,
		"--aws_credentials_from_env", "--bounded=false", "--starting_position=trim_horizon", "--window=" + restartWindow.String(),
		"--staging_dir=" + dir, "--checkpoint_table=" + table, "--checkpoint_table_endpoint=" + dyn, "--checkpoint_lease_duration=1s"}

	events := producer.Start(srv, stream, 20)

	child := childjob.Start(t, "TestKilledStagingJobChild", killedJobEnv, strings.Join(args, " "))

	events.Steady()
	db := dynamodb.New(dynamodb.Options{Region: emulators.Region, BaseEndpoint: aws.String(dyn),
		Credentials: credentials.NewStaticCredentialsProvider("k2f-test", "k2f-test", "")})
	// Wait until the job staged three windows and committed a position, then kill it a
	// quarter into a window: events of the open window are read and not staged.
	child.Await(t, 90*time.Second, "stage three windows and commit", func() bool {
		return committedCheckpoint(db, table, "shardId-000000000000") != "" && len(stagedFiles(t, dir)) >= 3
	})
	now := time.Now()
	time.Sleep(now.Truncate(restartWindow).Add(restartWindow + restartWindow/4).Sub(now))
	child.Kill(t)
	events.Finish(t)
	atKill := committedCheckpoint(db, table, "shardId-000000000000")
	staged1 := len(stagedFiles(t, dir))

	runStaging(t, append(args, "--max_read_time=4s")...)

	counts := components.DuckDBT(t, "SELECT id, count(*) AS n FROM read_parquet('"+dir+"/events/*.parquet') GROUP BY id")
	seen := map[string]bool{}
	dups := 0
	for _, r := range counts.Rows {
		id := r[0].(string)
		seen[id] = true
		if c := fmt.Sprint(r[1]); c != "1" {
			dups++
			t.Errorf("DuckDB reads event %s %s times, want once", id, c)
		}
	}
	lost := events.Missing(func(id string) bool { return seen[id] })
	for _, id := range lost[:min(len(lost), 5)] {
		t.Errorf("event %s was put and is in no file", id)
	}
	t.Logf("%d events put; the killed job had staged %d files and committed up to %s; after the second job DuckDB reads %d distinct events from %d files: %d lost, %d read more than once",
		events.N(), staged1, atKill, len(seen), len(stagedFiles(t, dir)), len(lost), dups)
	if int64(len(seen)) != events.N() || len(seen) != len(counts.Rows) {
		t.Fatalf("DuckDB reads %d distinct events, want the %d put", len(seen), events.N())
	}
}

// committedCheckpoint is the checkpoint of shard in the lease table, or "" when it has no
// sequence number yet (no item, TRIM_HORIZON, or the table unreadable).
func committedCheckpoint(db *dynamodb.Client, table, shard string) string {
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]dynamotypes.AttributeValue{"leaseKey": &dynamotypes.AttributeValueMemberS{Value: shard}}})
	if err != nil || out.Item == nil {
		return ""
	}
	cp, ok := out.Item["checkpoint"].(*dynamotypes.AttributeValueMemberS)
	if !ok || cp.Value == "" || cp.Value[0] < '0' || cp.Value[0] > '9' {
		return ""
	}
	return cp.Value
}

// stagedFiles lists the event files staged under dir.
func stagedFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "events", "part-*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestARestartThatRereadsOneShardRewritesTheSameFiles stages two minutes of events over
// two shards with a bounded read and --checkpoint_table, then moves one shard's checkpoint
// back to TRIM_HORIZON, as when a job died after one shard's commit of a window and before
// the other's, and stages again on the same table and directory. The second job reads that
// shard's two windows again; DuckDB must still read every event exactly once, from the
// same four files. With files named per window only (not per Kinesis shard), the second
// job's files of the two windows hold only the re-read shard's events and overwrite the
// first job's, so the other shard's events are lost: the test fails.
func TestARestartThatRereadsOneShardRewritesTheSameFiles(t *testing.T) {
	components.PythonT(t)
	const stream, table, reread = "events", "reread-positions", "shardId-000000000001"
	dyn := emulators.StartT(t, emulators.Dynalite).URL()
	t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Minute)
	clock := kinesistest.NewManualClock(t0.Add(5 * time.Second))
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2), kinesistest.WithClock(clock))
	const perMinute = 40
	for minute := range 2 {
		var entries []embedded.Entry
		for i := range perMinute {
			id := fmt.Sprintf("m%d-%02d", minute, i)
			entries = append(entries, embedded.Entry{PartitionKey: id, Data: fmt.Appendf(nil, `{"id":%q,"ts":%d}`, id, i)})
		}
		if err := embedded.Put(context.Background(), srv.Client(), stream, entries); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "k2f-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "k2f-test")
	dir := t.TempDir()
	args := []string{"--stream=" + stream, "--kinesis_endpoint=" + srv.URL(), "--kinesis_region=" + kinesistest.Region,
		"--aws_credentials_from_env", "--bounded", "--staging_dir=" + dir,
		"--checkpoint_table=" + table, "--checkpoint_table_endpoint=" + dyn, "--checkpoint_lease_duration=1s", "--checkpoint_takeover"}
	runStaging(t, args...)
	first := stagedFiles(t, dir)
	db := dynamodb.New(dynamodb.Options{Region: emulators.Region, BaseEndpoint: aws.String(dyn),
		Credentials: credentials.NewStaticCredentialsProvider("k2f-test", "k2f-test", "")})
	if committedCheckpoint(db, table, "shardId-000000000000") == "" || committedCheckpoint(db, table, reread) == "" {
		t.Fatalf("after the first job the table holds no position of one of the shards")
	}
	if _, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key:              map[string]dynamotypes.AttributeValue{"leaseKey": &dynamotypes.AttributeValueMemberS{Value: reread}},
		UpdateExpression: aws.String("SET checkpoint = :th, checkpointSubSequenceNumber = :zero"),
		ExpressionAttributeValues: map[string]dynamotypes.AttributeValue{
			":th": &dynamotypes.AttributeValueMemberS{Value: "TRIM_HORIZON"}, ":zero": &dynamotypes.AttributeValueMemberN{Value: "0"}},
	}); err != nil {
		t.Fatalf("moving %s's checkpoint back: %v", reread, err)
	}

	runStaging(t, args...)
	if committedCheckpoint(db, table, reread) == "" {
		t.Fatalf("the second job did not read %s again: its checkpoint is not a position", reread)
	}
	if second := stagedFiles(t, dir); !slices.Equal(second, first) || len(first) != 4 {
		t.Errorf("the jobs staged %q, then %q; want the same four files (two windows, two shards)", first, second)
	}
	counts := components.DuckDBT(t, "SELECT id, count(*) AS n FROM read_parquet('"+dir+"/events/*.parquet') GROUP BY id")
	seen := map[string]string{}
	for _, r := range counts.Rows {
		seen[fmt.Sprint(r[0])] = fmt.Sprint(r[1])
	}
	for minute := range 2 {
		for i := range perMinute {
			if id := fmt.Sprintf("m%d-%02d", minute, i); seen[id] != "1" {
				t.Errorf("DuckDB reads event %s %q times, want once", id, seen[id])
			}
		}
	}
	if len(seen) != 2*perMinute {
		t.Errorf("DuckDB reads %d distinct events, want %d", len(seen), 2*perMinute)
	}
}
