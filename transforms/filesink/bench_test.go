package filesink

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// processFn is the ProcessElement of a writing DoFn.
type processFn = func(context.Context, beam.PaneInfo, beam.Window, int, func(*string) bool) (string, error)

// benchEvents are IoT readings like the seed's: 1,000 devices, millisecond timestamps and
// a reading as text, absent for one event in ten.
func benchEvents(n int) []event {
	events := make([]event, n)
	for i := range events {
		events[i] = event{ID: fmt.Sprintf("sensor-%04d", i%1000), TS: 1_796_140_800_000 + int64(i)}
		if i%10 != 0 {
			events[i].V = str(fmt.Sprintf("%d.%02d", (i*7919)%500, i%100))
		}
	}
	return events
}

// BenchmarkSinks measures the two sinks on the same events in one run: each operation
// stages one window of 1,000,000 events as one local file, from the values to the renamed
// file (JSON encoding and the sort included, the shuffle between them excluded). It
// reports rows/s, rows per CPU-second of the process (steadier than wall time on a shared
// machine; GC included) and the file's size:
//
//	go test -run '^$' -bench Sinks -benchtime 3x ./transforms/filesink
func BenchmarkSinks(b *testing.B) {
	const rows = 1_000_000
	events := benchEvents(rows)
	for _, sink := range []struct {
		name string
		fn   func(dir string) (processFn, error)
	}{
		{"jsonl", func(dir string) (processFn, error) {
			return (&writeFn{files{Dir: dir, Prefix: "part", Suffix: ".jsonl", Shards: 1}}).ProcessElement, nil
		}},
		{"parquet-snappy", parquetSink("snappy")},
		{"parquet-zstd", parquetSink("zstd")},
	} {
		b.Run(sink.name, func(b *testing.B) {
			write, err := sink.fn(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			var size int64
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				lines := eventLines(b, events...)
				path, err := write(context.Background(), beam.PaneInfo{}, interval(base), 0, iterOver(lines...))
				if err != nil {
					b.Fatal(err)
				}
				info, err := os.Stat(path)
				if err != nil {
					b.Fatal(err)
				}
				size = info.Size()
			}
			cpu := cpuTime(b) - cpu0
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(rows)*float64(b.N)/cpu.Seconds(), "rows/CPU-s")
			b.ReportMetric(float64(size), "file-bytes")
		})
	}
}

func parquetSink(codec string) func(dir string) (processFn, error) {
	return func(dir string) (processFn, error) {
		fn, err := newParquetFn(reflect.TypeOf(event{}), ParquetConfig{Config: Config{Dir: dir}, Compression: codec})
		if err != nil {
			return nil, err
		}
		return fn.ProcessElement, nil
	}
}

// cpuTime is the user and system CPU time the process used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
