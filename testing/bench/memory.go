package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.Function1x0(discardFailures)
}

func discardFailures(int) {}

// heapPeak is the heap's growth above its level (after a GC) when sampling started.
type heapPeak struct {
	Base      uint64 // heap objects bytes after the GC that started sampling
	PeakAlloc uint64 // largest heap objects bytes seen, above Base (garbage included)
	PeakLive  uint64 // largest live heap after a GC, above Base
}

// heapSampler reads runtime/metrics every 2ms. Sampling the live heap (what the last GC
// marked) measures what the code retains; heap objects bytes adds the garbage GOGC lets
// accumulate between collections.
type heapSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak heapPeak
	name string
	// prof is the heap profile taken at the live heap's peak, when profiling.
	prof bytes.Buffer
}

// peakProfilePrefix, when set (--heapprofile), makes each heap sampler write a heap profile
// taken at its live heap's peak to peakProfilePrefix.<name>.
var peakProfilePrefix string

const (
	metricHeapObjects = "/memory/classes/heap/objects:bytes"
	metricHeapLive    = "/gc/heap/live:bytes"
)

func startHeapSampler(name string) *heapSampler {
	runtime.GC()
	s := &heapSampler{name: name, done: make(chan struct{})}
	samples := []metrics.Sample{{Name: metricHeapObjects}, {Name: metricHeapLive}}
	metrics.Read(samples)
	base := samples[0].Value.Uint64()
	s.peak.Base = base
	over := func(v uint64) uint64 {
		if v > base {
			return v - base
		}
		return 0
	}
	var profiled uint64
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(samples)
			s.peak.PeakAlloc = max(s.peak.PeakAlloc, over(samples[0].Value.Uint64()))
			s.peak.PeakLive = max(s.peak.PeakLive, over(samples[1].Value.Uint64()))
			if peakProfilePrefix != "" && s.peak.PeakLive > profiled+(1<<20) {
				// The heap profile's in-use figures are those of the last GC: the live heap
				// just sampled.
				profiled = s.peak.PeakLive
				s.prof.Reset()
				_ = pprof.Lookup("heap").WriteTo(&s.prof, 0)
			}
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) stop() heapPeak {
	close(s.done)
	s.wg.Wait()
	if peakProfilePrefix != "" && s.prof.Len() > 0 && s.name != "" {
		_ = os.WriteFile(peakProfilePrefix+"."+s.name, s.prof.Bytes(), 0o644)
	}
	return s.peak
}

// ServeEnv names the environment variable that makes the bench binary serve a Kinesis
// server instead of benchmarking (see Serve). Row 5 runs its server in such a child process
// so that the records the server stores are not in the heap it measures.
const ServeEnv = "BEAMKINESIS_BENCH_SERVE"

// Serve runs a kinesistest server, writes its URL as one line to out and serves until in is
// closed.
func Serve(in io.Reader, out io.Writer) error {
	srv, err := kinesistest.Start()
	if err != nil {
		return fmt.Errorf("starting the Kinesis server: %w", err)
	}
	defer srv.Close()
	if _, err := fmt.Fprintln(out, srv.URL()); err != nil {
		return fmt.Errorf("writing the server URL: %w", err)
	}
	_, _ = io.Copy(io.Discard, in)
	return nil
}

// childServer is a kinesistest server in a child process.
type childServer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

func startChildServer() (*childServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), ServeEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("server stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("server stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the server process: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("reading the server URL: %w", err)
	}
	return &childServer{cmd: cmd, stdin: stdin, url: strings.TrimSpace(line)}, nil
}

func (c *childServer) Close() error {
	_ = c.stdin.Close()
	return c.cmd.Wait()
}

func (c *childServer) client() *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region: kinesistest.Region, BaseEndpoint: aws.String(c.url), HTTPClient: kinesistest.HTTPClient(),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// createStream creates a stream through the API and waits until it is active.
func createStream(ctx context.Context, client *kinesis.Client, name string, shards int) error {
	if _, err := client.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(int32(shards))}); err != nil {
		return fmt.Errorf("creating stream %s: %w", name, err)
	}
	for range 500 {
		out, err := client.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("describing stream %s: %w", name, err)
		}
		if out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("stream %s did not become active", name)
}

// rowMemory is row 5: peak heap reading and writing Records records, with the server in a
// child process.
//
// What the heap profile of the write showed (1,000,000 messages; the writer's own rate
// limiter, 1 MiB/s per shard, holds messages back, so its buffer fills to its bound): the
// live heap grows by ≈ 125 MiB although WithMaxBufferedBytes is 32 MiB, because the bound
// counts key + data bytes (108 per message) while a buffered message costs ≈ 4× that: the
// producer's batch.Item and its meta (Producer.Put), the message's own data and key, and its
// copy inside the aggregate being built (kpl.Aggregator.Build). Reading stays flat
// (≈ 15 MiB live whatever the record count).
//
// The read's peak depends on how many shards Prism happens to read at once, not on the
// record count: each shard being read holds the GetRecords page it emits, the page fetched
// ahead and the SDK's buffer of the response being decoded (a 10,000-record page of 100 B
// records is ≈ 3 MB of JSON, read whole into one bytes.Buffer, and ≈ 3.3 MB decoded: 330 B
// per record for types.Record, its time, strings and data). Heap profiles at the live peak (--heapprofile, go tool pprof
// -sample_index=inuse_space) of 5 runs each of 4d646c2 and 448c614 (+ the kinesis v1.58.0
// bump) gave the same heap at the same overlap: +36.0 and +35.8 MiB (16.4 MiB live) with one
// shard read at a time, +47 to +58 MiB with two, +78.5 MiB with four; the profiles' -base
// difference between one and four shards is all bytes.Buffer (the SDK's body buffer) and
// deserializeRecordList. The row notes the overlap so that runs compare like with like.
func (b *Bench) rowMemory(ctx context.Context) (Row, error) {
	cs, err := startChildServer()
	if err != nil {
		return Row{}, err
	}
	defer cs.Close()
	client := cs.client()
	n := b.cfg.Records
	raw := float64(n * recordSize)
	if err := createStream(ctx, client, "plain", b.cfg.Shards); err != nil {
		return Row{}, err
	}
	if err := putPlain(ctx, client, "plain", n); err != nil {
		return Row{}, err
	}
	rd, err := readBounded(ctx, cs.url, "plain")
	if err != nil {
		return Row{}, err
	}
	if rd.Records != int64(n) {
		return Row{}, fmt.Errorf("ReadBounded read %d records, want %d", rd.Records, n)
	}
	b.cfg.logf("memory, read: peak heap +%s, live +%s, %d of %d shards read at once", mib(float64(rd.Heap.PeakAlloc)), mib(float64(rd.Heap.PeakLive)), rd.Overlap, b.cfg.Shards)

	if err := createStream(ctx, client, "out", b.cfg.Shards); err != nil {
		return Row{}, err
	}
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.ParDo(s, &genMessagesFn{N: n}, beam.Impulse(s))
	failed := kinesisio.Write(s, "out", msgs, connect[kinesisio.WriteOption](cs.url)...)
	beam.ParDo0(s, discardFailures, stats.CountElms(s, failed))
	sampler := startHeapSampler("memory-write")
	start := time.Now()
	pr, err := run(ctx, p, "memory-write")
	wrTime := time.Since(start)
	wr := sampler.stop()
	if err != nil {
		return Row{}, err
	}
	written := counter(pr, "kinesisio.Write", "user_records")
	if written != int64(n) {
		return Row{}, fmt.Errorf("Write wrote %d messages, want %d", written, n)
	}
	b.cfg.logf("memory, write: %d messages in %v, peak heap +%s, live +%s", written, wrTime.Round(time.Millisecond), mib(float64(wr.PeakAlloc)), mib(float64(wr.PeakLive)))
	return Row{
		ID:   "5",
		Name: fmt.Sprintf("Memory: peak heap above idle, reading and writing %s × 100 B (server in a child process)", group(int64(n))),
		Measured: fmt.Sprintf("read: +%s heap, +%s live; write: +%s heap, +%s live",
			mib(float64(rd.Heap.PeakAlloc)), mib(float64(rd.Heap.PeakLive)), mib(float64(wr.PeakAlloc)), mib(float64(wr.PeakLive))),
		Baseline: mib(raw) + " raw data",
		Ratio:    float64(max(rd.Heap.PeakAlloc, wr.PeakAlloc)) / raw,
		Target:   "flat (≪ 1×)",
		Notes: fmt.Sprintf("ratio: larger peak heap / raw; read %.2f× with at most %d of %d shards read at once (each holds its page, the page fetched ahead and the response being decoded: the peak grows with the shards Prism reads at once), write %.2f× (the writer holds up to WithMaxBufferedBytes, 32 MiB by default); write rate %s, no limits",
			float64(rd.Heap.PeakAlloc)/raw, rd.Overlap, b.cfg.Shards, float64(wr.PeakAlloc)/raw, rate(float64(n)/wrTime.Seconds(), "msg/s")),
		Rate:   float64(n) / wrTime.Seconds(),
		Counts: map[string]int64{"read_records": rd.Records, "written_records": written},
	}, nil
}
