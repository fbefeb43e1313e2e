package filesink_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/parquet-go/parquet-go"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/transforms/decode"
	"github.com/beamkinesis/beamkinesis/transforms/dedup"
	"github.com/beamkinesis/beamkinesis/transforms/filesink"
)

// Event is the schema of the staged records: {"id": ..., "ts": ..., "v": ...}, with v
// nullable (nil when absent or null). A schema type must be registered so that remote
// workers can decode it.
type Event struct {
	ID string  `json:"id" parquet:"id"`
	TS int64   `json:"ts" parquet:"ts"`
	V  *string `json:"v" parquet:"v,optional"`
}

func init() {
	beam.RegisterType(reflect.TypeOf((*Event)(nil)).Elem())
	register.Function2x0(atArrivalTime)
	register.Emitter2[beam.EventTime, kinesisio.Record]()
}

// atArrivalTime gives a created record the event time kinesisio.Read would give it.
func atArrivalTime(r kinesisio.Record, emit func(beam.EventTime, kinesisio.Record)) {
	emit(beam.EventTime(r.ApproximateArrivalTimestamp.UnixMilli()), r)
}

// Example stages Kinesis records as JSON-lines files, one per minute of arrival time:
// de-duplicate, parse against the schema (malformed records become dead letters),
// encode, write.
func Example() {
	dir, err := os.MkdirTemp("", "staging")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	t0 := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	record := func(seq string, at time.Duration, data string) kinesisio.Record {
		return kinesisio.Record{StreamName: "events", ShardID: "shardId-000000000000",
			SequenceNumber: seq, ApproximateArrivalTimestamp: t0.Add(at), Data: []byte(data)}
	}

	p, s := beam.NewPipelineWithRoot()
	recs := beam.ParDo(s, atArrivalTime, beam.Create(s,
		record("1", 10*time.Second, `{"id":"a","ts":1,"v":"x"}`),
		record("1", 10*time.Second, `{"id":"a","ts":1,"v":"x"}`), // read twice
		record("2", 20*time.Second, `{"id":"b","ts":2`),          // malformed
		record("3", 70*time.Second, `{"id":"c","ts":3,"v":"z"}`),
	))
	recs = beam.WindowInto(s, window.NewFixedWindows(time.Minute), recs)
	events, deadLetters := decode.JSON(s, dedup.Records(s, recs), reflect.TypeOf(Event{}), decode.JSONOptions{Required: []string{"id"}})
	filesink.Write(s, filesink.EncodeJSON(s, events), filesink.Config{Dir: dir})
	filesink.Write(s, filesink.EncodeJSON(s, deadLetters), filesink.Config{Dir: filepath.Join(dir, "dead")})
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		panic(err)
	}

	for _, pattern := range []string{"*", "dead/*"} {
		names, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, name := range names {
			if b, err := os.ReadFile(name); err == nil {
				rel, _ := filepath.Rel(dir, name)
				fmt.Printf("%s\n%s", rel, b)
			}
		}
	}
	// Output:
	// part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001.jsonl
	// {"id":"a","ts":1,"v":"x"}
	// part-20261130T140100.000Z-20261130T140200.000Z-00000-of-00001.jsonl
	// {"id":"c","ts":3,"v":"z"}
	// dead/part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001.jsonl
	// {"record":{"StreamName":"events","ShardID":"shardId-000000000000","PartitionKey":"","ExplicitHashKey":"","SequenceNumber":"2","SubSequenceNumber":0,"ApproximateArrivalTimestamp":"2026-11-30T14:00:20Z","Data":"eyJpZCI6ImIiLCJ0cyI6Mg==","Aggregated":false},"stage":"json","error":"decoding JSON object: unexpected end of JSON input"}
}

// ExampleWriteParquet stages events as one Parquet file per minute of arrival time, in a
// local directory here; an s3://bucket/prefix Dir (with Config.S3) works the same way.
func ExampleWriteParquet() {
	dir, err := os.MkdirTemp("", "staging")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	t0 := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	record := func(seq string, at time.Duration, data string) kinesisio.Record {
		return kinesisio.Record{StreamName: "events", ShardID: "shardId-000000000000",
			SequenceNumber: seq, ApproximateArrivalTimestamp: t0.Add(at), Data: []byte(data)}
	}
	p, s := beam.NewPipelineWithRoot()
	recs := beam.ParDo(s, atArrivalTime, beam.Create(s,
		record("1", 10*time.Second, `{"id":"a","ts":1,"v":"x"}`),
		record("2", 20*time.Second, `{"id":"b","ts":2}`),        // no v: null
		record("3", 30*time.Second, `{"id":"c","ts":3,"v":""}`), // empty, not null
	))
	recs = beam.WindowInto(s, window.NewFixedWindows(time.Minute), recs)
	events, _ := decode.JSON(s, recs, reflect.TypeOf(Event{}), decode.JSONOptions{Required: []string{"id", "ts"}})
	filesink.WriteParquet(s, events, filesink.ParquetConfig{Config: filesink.Config{Dir: dir}, Compression: "zstd"})
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		panic(err)
	}

	names, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
	for _, name := range names {
		rows, err := parquet.ReadFile[Event](name)
		if err != nil {
			panic(err)
		}
		fmt.Println(filepath.Base(name))
		for _, e := range rows {
			v := "null"
			if e.V != nil {
				v = fmt.Sprintf("%q", *e.V)
			}
			fmt.Println(e.ID, e.TS, v)
		}
	}
	// Output:
	// part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001.parquet
	// a 1 "x"
	// b 2 null
	// c 3 ""
}
