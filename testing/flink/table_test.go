package flink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// tablePositions returns each shard's checkpoint in the lease table (KCL layout: leaseKey,
// checkpoint), or nil while the table does not exist yet.
func tablePositions(t *testing.T, db *dynamodb.Client, table string) map[string]string {
	t.Helper()
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	var missing *ddbtypes.ResourceNotFoundException
	if errors.As(err, &missing) {
		return nil
	}
	if err != nil {
		t.Fatalf("scanning %s: %v", table, err)
	}
	m := map[string]string{}
	for _, item := range out.Items {
		key, _ := item["leaseKey"].(*ddbtypes.AttributeValueMemberS)
		cp, _ := item["checkpoint"].(*ddbtypes.AttributeValueMemberS)
		if key == nil || cp == nil {
			t.Fatalf("an item of %s lacks a leaseKey or checkpoint string: %v", table, item)
		}
		m[key.Value] = cp.Value
	}
	return m
}

// lastSequences returns the sequence number of the last record of each shard of stream
// that holds any.
func lastSequences(t *testing.T, srv *kinesistest.Server, stream string) map[string]string {
	t.Helper()
	stored, err := srv.StreamRecords(stream)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	for _, r := range stored {
		last[r.ShardID] = r.SequenceNumber // StreamRecords lists each shard in order
	}
	return last
}

// TestCheckpointTableResumesTheNextJobOnFlink runs kinesis-to-kinesis as a streaming job
// on the cluster with --checkpoint_table on dynalite. The commit step must write each
// shard's position to the table on Flink (its commit tokens cross a Java runner's
// Reshuffle), up to the last record read. The job is cancelled, more records are put, and
// a second job started on the same table (--checkpoint_takeover, a redeployment) must copy
// only the new records: together the two jobs write each input record exactly once.
func TestCheckpointTableResumesTheNextJobOnFlink(t *testing.T) {
	needCluster(t)
	started := time.Now()
	dynURL := emulators.StartT(t, emulators.Dynalite).URL()
	db := dynamodb.New(dynamodb.Options{
		Region:       emulators.Region,
		BaseEndpoint: aws.String(dynURL),
		Credentials:  credentials.NewStaticCredentialsProvider("flink-e2e", "flink-e2e", ""),
	})
	srv := kinesistest.StartT(t)
	for _, s := range []string{"in", "out"} {
		if err := srv.CreateStream(s, 2); err != nil {
			t.Fatal(err)
		}
	}
	const table = "flink-positions"
	flags := append(append([]string{"--input_stream=in", "--output_stream=out",
		"--transform=passthrough", "--aggregation=false", "--bounded=false", "--starting_position=trim_horizon",
		"--checkpoint_table=" + table, "--checkpoint_table_endpoint=" + dynURL, "--checkpoint_takeover",
		"--parallelism=2"}, kinesisFlags(srv)...), checkpointFlags...)
	batch := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("record-%04d", i))
		}
		return out
	}
	// copyAll waits until the output holds want and the table holds the last position of
	// every shard of the input, then cancels r.
	copyAll := func(r *liveRun, want []string) {
		t.Helper()
		r.awaitCheckpoints(t, 1)
		var got []string
		var positions, last map[string]string
		await(t, 3*time.Minute, func() string {
			return fmt.Sprintf("%s: %d of %d records in the output; table positions %v, want the shards' last records %v", r.name, len(got), len(want), positions, last)
		}, func() bool {
			got, _ = userRecords(t, srv, "out")
			positions, last = tablePositions(t, db, table), lastSequences(t, srv, "in")
			_, missing := duplicates(got, want)
			return len(missing) == 0 && len(positions) == len(last) && func() bool {
				for shard, seq := range last {
					if positions[shard] != seq {
						return false
					}
				}
				return true
			}()
		})
		r.cancel(t)
	}

	for i, data := range [][]string{batch(0, 50), batch(50, 100)} {
		put(t, srv.Client(), "in", entries(fmt.Sprintf("a%d", i), data...)...)
	}
	first := startPipeline(t, "kinesis-to-kinesis", flags...)
	copyAll(first, batch(0, 100))
	firstDone := time.Since(started)

	put(t, srv.Client(), "in", entries("b", batch(100, 160)...)...)
	second := startPipeline(t, "kinesis-to-kinesis", flags...)
	copyAll(second, batch(0, 160))

	got, _ := userRecords(t, srv, "out")
	if want := batch(0, 160); !slices.Equal(got, want) {
		dups, missing := duplicates(got, want)
		t.Errorf("the output holds %d records (%d duplicates, missing %v), want each of the %d input records exactly once: the second job must resume after the positions the first committed", len(got), dups, missing, len(want))
	}
	t.Logf("measured: %v in all; the first job had copied 100 records and committed their positions %v after the start", time.Since(started).Round(time.Millisecond), firstDone.Round(time.Millisecond))
}
