package flink

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// wordcountEmbeddedTablePath holds what `wordcount` prints with no stream flag: the
// embedded server's seed words and sample text, counted in the global window. The wordcount
// package's own test expects the same file.
const wordcountEmbeddedTablePath = "../../pipelines/wordcount/testdata/embedded-table.txt"

// TestWordcountBoundedEmbedded runs pipelines/README.md's Flink command for wordcount's
// embedded mode, a bounded read of the in-process server, and checks the exact table.
func TestWordcountBoundedEmbedded(t *testing.T) {
	needFlink(t)
	out := runPipeline(t, "wordcount")
	want, err := os.ReadFile(wordcountEmbeddedTablePath)
	if err != nil {
		t.Fatalf("reading the expected table: %v", err)
	}
	if got := strings.Join(tables(out), ""); got != string(want) {
		t.Errorf("wordcount printed\n%s\nwant\n%s", out, want)
	}
}

// userRecords returns the data of every user record stream holds, KPL aggregates unpacked,
// sorted, and how many of the stream's Kinesis records are aggregates.
func userRecords(t *testing.T, srv *kinesistest.Server, stream string) (data []string, aggregates int) {
	t.Helper()
	stored, err := srv.StreamRecords(stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range stored {
		users, aggregated, err := kpl.Deaggregate(r.Data)
		if err != nil {
			t.Fatalf("record %s of %s: %v", r.SequenceNumber, r.ShardID, err)
		}
		if !aggregated {
			data = append(data, string(r.Data))
			continue
		}
		aggregates++
		for _, u := range users {
			data = append(data, string(u.Data))
		}
	}
	sort.Strings(data)
	return data, aggregates
}

// entries makes one record per datum, each under its own partition key prefix-<i>, so
// that the records spread over the shards.
func entries(prefix string, data ...string) []types.PutRecordsRequestEntry {
	out := make([]types.PutRecordsRequestEntry, len(data))
	for i, d := range data {
		out[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("%s-%d", prefix, i)), Data: []byte(d)}
	}
	return out
}

// put writes batch to stream in one PutRecords call; the test server fails no entry unless
// asked to, so any failure fails t.
func put(t *testing.T, client *kinesis.Client, stream string, batch ...types.PutRecordsRequestEntry) {
	t.Helper()
	out, err := client.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: batch})
	if err != nil {
		t.Fatalf("putting %d records to %s: %v", len(batch), stream, err)
	}
	if c := aws.ToInt32(out.FailedRecordCount); c != 0 {
		t.Fatalf("putting %d records to %s: %d failed", len(batch), stream, c)
	}
}

// tables returns the tables wordcount printed to out, each from its "Window:" title line
// through its closing rule, in the order printed.
func tables(out string) []string {
	var (
		got []string
		cur strings.Builder
	)
	in := false
	rules := 0
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(line, "Window: ") {
			in, rules = true, 0
			cur.Reset()
		}
		if !in {
			continue
		}
		cur.WriteString(line)
		if strings.HasPrefix(line, "+") {
			if rules++; rules == 3 { // top rule, header rule, bottom rule
				got = append(got, cur.String())
				in = false
			}
		}
	}
	return got
}
