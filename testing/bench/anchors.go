package main

// The --anchors mode: the same work done by this connector and by Beam Java's KinesisIO
// (testing/anchors/java-kinesisio, on Beam's Java DirectRunner), against one kinesistest
// server in a child process, with throughput, CPU seconds, peak RSS and exactness side by
// side.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.DoFn2x0[kinesisio.Record, func(int)](&tallyFn{})
}

// AnchorsConfig sizes the --anchors pass.
type AnchorsConfig struct {
	Records        int           // records per read stream and messages per write
	Shards         int           // shards of the read and write streams
	ReshardRecords int           // records in each of the split and merge streams
	Timeout        time.Duration // per JVM run; a run past it is stopped and reported incomplete
	ReshardTimeout time.Duration // the same for the reads after a split and a merge
	// JavaRead is the Beam Java read's configuration: arguments for ReadAnchor.java
	// (--experiments, KinesisIO knobs). The default, JavaReadArgs, is the fastest of the set-ups
	// tried (see testing/README.md, "Side by side with Beam Java KinesisIO").
	JavaRead []string
	// ProbeMaxRecords adds Beam Java reads bounded by withMaxNumRecords: with the stream's
	// record count, which never completes (each split is given an equal share, and a shard
	// holding fewer records than its share never finishes; see ReadAnchor.java), and with the
	// largest bound every shard can meet. The first runs until ReshardTimeout.
	ProbeMaxRecords bool
	// Alternatives adds Beam Java reads on the DirectRunner's default unbounded read (the
	// primitive read, which restarts KinesisIO's reader every ~200 records): the plain stream
	// and the split stream.
	Alternatives bool
	// ProjectDir is testing/anchors/java-kinesisio; empty means found from the working
	// directory upwards.
	ProjectDir string
	Log        io.Writer
}

// AnchorsQuickConfig is --anchors --quick, for CI.
func AnchorsQuickConfig() AnchorsConfig {
	return AnchorsConfig{Records: 5_000, Shards: 4, ReshardRecords: 3_000, Timeout: 90 * time.Second, ReshardTimeout: 40 * time.Second,
		JavaRead: JavaReadArgs()}
}

// AnchorsFullConfig is --anchors.
func AnchorsFullConfig() AnchorsConfig {
	return AnchorsConfig{Records: 50_000, Shards: 4, ReshardRecords: 10_000, Timeout: 5 * time.Minute, ReshardTimeout: 2 * time.Minute,
		JavaRead: JavaReadArgs(), ProbeMaxRecords: true, Alternatives: true}
}

// JavaReadArgs is the Beam Java read's set-up in the table: KinesisIO's defaults, read
// through the splittable-DoFn wrapper of Read.Unbounded (experiment use_sdf_read), which
// keeps each split's reader across the DirectRunner's checkpoints. The DirectRunner's default
// for Read.Unbounded is the primitive read, whose evaluator emits at most 10 records per
// bundle and closes the reader after a bundle with probability 0.05 (Beam's
// UnboundedReadEvaluatorFactory, to exercise checkpoint and resume), so KinesisIO restarts
// its reader about every 200 records: 7–11× slower here, and after a reshard each restart
// can block for 30 s (ShardReadersPool.stop waiting on a reader thread that sleeps in
// waitUntilAllShardRecordsRead).
func JavaReadArgs() []string { return []string{"--experiments=use_sdf_read"} }

func (c AnchorsConfig) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "anchors: "+format+"\n", args...)
	}
}

// multiset is a count and an order-independent checksum of (partition key, data) pairs: the
// sum modulo 2^64 of the first 8 bytes, big-endian, of SHA-256(key, 0x00, data), as
// Anchor.java computes it.
type multiset struct {
	Count int64
	Sum   uint64
}

func recordSum(key string, data []byte) uint64 {
	h := sha256.New()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(data)
	return binary.BigEndian.Uint64(h.Sum(nil))
}

func (m *multiset) add(key string, data []byte) {
	m.Count++
	m.Sum += recordSum(key, data)
}

// expected is the multiset of bench records from..to-1.
func expected(from, to int) multiset {
	var m multiset
	for i := from; i < to; i++ {
		m.add(benchKey(i), benchData(i))
	}
	return m
}

// shardSpan is when a shard's first and last records reached the pipeline's counting step,
// in seconds from the run's start.
type shardSpan struct {
	Records int64   `json:"records"`
	First   float64 `json:"first_seconds"`
	Last    float64 `json:"last_seconds"`
}

// anchorRun is one pipeline's figures, from either side.
type anchorRun struct {
	Got      multiset
	Complete bool          // the pipeline finished (the JVM was not stopped at the timeout)
	Wall     time.Duration // the job, submission to completion
	CPU      time.Duration // the whole process's user + system CPU
	PeakRSS  uint64        // the whole process's peak resident set, bytes
	Shards   map[string]shardSpan
	Java     javaStats // Beam Java runs only
}

// javaStats is what a Beam Java run's log and report say about how it read or wrote.
type javaStats struct {
	First        time.Duration // from Pipeline.run to the first record counted
	ReaderStarts int           // KinesisReader.start calls ("Starting reader using" at INFO)
	StuckCloses  int           // reader closes that waited 30 s for a shard thread (ShardReadersPool.stop)
	Bundles      int64         // bundles that reached the counting step
	MaxBundle    int64         // the largest of them
}

func (r anchorRun) rate() float64 { return float64(r.Got.Count) / r.Wall.Seconds() }

// anchorReport is what the Java programs print as their last stdout line.
type anchorReport struct {
	Program  string               `json:"program"`
	Complete bool                 `json:"complete"`
	Records  int64                `json:"records"`
	Checksum string               `json:"checksum"`
	Seconds  float64              `json:"seconds"`
	First    float64              `json:"first_seconds"`
	Bundles  int64                `json:"bundles"`
	MaxBndl  int64                `json:"max_bundle"`
	Shards   map[string]shardSpan `json:"shards"`
}

// javaAnchor runs the Java programs.
type javaAnchor struct {
	dir       string
	classpath string
	version   string // the Beam Java release in the pom
	Build     time.Duration
	Built     string // "offline", "online" or "up to date"
}

// findAnchorProject finds testing/anchors/java-kinesisio from the working directory upwards.
func findAnchorProject() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		p := filepath.Join(dir, "testing", "anchors", "java-kinesisio")
		if _, err := os.Stat(filepath.Join(p, "pom.xml")); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testing/anchors/java-kinesisio/pom.xml not found above the working directory")
		}
		dir = parent
	}
}

// anchorToolchain reports whether java and mvn are on PATH.
func anchorToolchain() error {
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: %w", tool, err)
		}
	}
	return nil
}

// buildJavaAnchor packages the Maven project unless target/ is newer than its sources:
// offline first (a warm ~/.m2), then online.
func buildJavaAnchor(ctx context.Context, cfg AnchorsConfig) (*javaAnchor, error) {
	if err := anchorToolchain(); err != nil {
		return nil, err
	}
	dir := cfg.ProjectDir
	if dir == "" {
		var err error
		if dir, err = findAnchorProject(); err != nil {
			return nil, err
		}
	}
	pom, err := os.ReadFile(filepath.Join(dir, "pom.xml"))
	if err != nil {
		return nil, fmt.Errorf("reading the pom: %w", err)
	}
	j := &javaAnchor{dir: dir, version: "unknown", Built: "up to date"}
	if _, rest, ok := strings.Cut(string(pom), "<beam.version>"); ok {
		j.version, _, _ = strings.Cut(rest, "<")
	}
	cpFile := filepath.Join(dir, "target", "classpath.txt")
	// Maven leaves classpath.txt alone when it has not changed, so a stamp written after each
	// build says when the last one was.
	stamp := filepath.Join(dir, "target", "anchors-built.stamp")
	if !upToDate(dir, stamp) {
		start := time.Now()
		j.Built = "offline"
		if out, err := mvn(ctx, dir, "-o"); err != nil {
			cfg.logf("offline Maven build failed, building online: %s", lastLines(out, 3))
			j.Built = "online"
			if out, err := mvn(ctx, dir); err != nil {
				return nil, fmt.Errorf("mvn package in %s: %w\n%s", dir, err, lastLines(out, 30))
			}
		}
		j.Build = time.Since(start)
		if err := os.WriteFile(stamp, nil, 0o644); err != nil {
			return nil, fmt.Errorf("writing the build stamp: %w", err)
		}
		cfg.logf("built the Java anchor (%s) in %v", j.Built, j.Build.Round(time.Millisecond))
	}
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		return nil, fmt.Errorf("reading the class path: %w", err)
	}
	j.classpath = filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(cp))
	return j, nil
}

func mvn(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "mvn", append([]string{"-q", "-B"}, append(args, "package")...)...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// upToDate reports whether out exists and is newer than every file of the project outside
// target/.
func upToDate(dir, out string) bool {
	st, err := os.Stat(out)
	if err != nil {
		return false
	}
	newer := false
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || newer {
			return err
		}
		if d.IsDir() && d.Name() == "target" {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && !d.IsDir() && info.ModTime().After(st.ModTime()) {
			newer = true
		}
		return nil
	})
	return !newer
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// run runs one Java program's main class with args and returns its report, its CPU and peak
// RSS (from the child's rusage). Past timeout the JVM gets SIGTERM; its shutdown hook then
// prints what it saw so far, reported incomplete.
func (j *javaAnchor) run(ctx context.Context, timeout time.Duration, class string, args ...string) (anchorRun, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	args = append(args, "--timeout-s="+strconv.Itoa(int(timeout.Seconds())))
	cmd := exec.CommandContext(ctx, "java", append([]string{
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		// Each start of KinesisIO's reader logs one line at INFO: counted below.
		"-Dorg.slf4j.simpleLogger.log.org.apache.beam.sdk.io.aws2.kinesis.KinesisReader=info",
		"-cp", j.classpath, "dev.beamkinesis.anchors." + class,
	}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var rep *anchorReport
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Bytes(); bytes.HasPrefix(line, []byte(`{"program"`)) {
			rep = new(anchorReport)
			if jerr := json.Unmarshal(line, rep); jerr != nil {
				return anchorRun{}, fmt.Errorf("%s: parsing its report: %w", class, jerr)
			}
		}
	}
	if rep == nil || (err != nil && ctx.Err() == nil) {
		return anchorRun{}, fmt.Errorf("%s %s: %v\n%s", class, strings.Join(args, " "), err, lastLines(stderr.Bytes(), 30))
	}
	sum, perr := strconv.ParseUint(rep.Checksum, 10, 64)
	if perr != nil {
		return anchorRun{}, fmt.Errorf("%s: checksum %q: %w", class, rep.Checksum, perr)
	}
	r := anchorRun{
		Got:      multiset{rep.Records, sum},
		Complete: rep.Complete && err == nil,
		Wall:     time.Duration(rep.Seconds * float64(time.Second)),
		Shards:   rep.Shards,
		Java: javaStats{
			First:        time.Duration(rep.First * float64(time.Second)),
			ReaderStarts: bytes.Count(stderr.Bytes(), []byte("Starting reader using")),
			StuckCloses:  bytes.Count(stderr.Bytes(), []byte("Executor service was not completely terminated")),
			Bundles:      rep.Bundles,
			MaxBundle:    rep.MaxBndl,
		},
	}
	if ps := cmd.ProcessState; ps != nil {
		r.CPU = ps.UserTime() + ps.SystemTime()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.PeakRSS = uint64(ru.Maxrss) * 1024
		}
	}
	return r, nil
}

// The Go pipelines run on Prism in loopback mode: tallyFn reports through these.
var (
	tallyMu    sync.Mutex
	tallySet   multiset
	tallySpans = map[string]shardSpan{}
	tallyStart time.Time
)

// tallyFn adds each record to the run's multiset and notes per shard when its first and
// last records arrived. It emits its count per bundle, to give the read's stage an output
// (see countFn).
type tallyFn struct {
	set   multiset
	spans map[string]shardSpan
}

func (f *tallyFn) StartBundle(func(int)) {
	f.set = multiset{}
	f.spans = map[string]shardSpan{}
}

func (f *tallyFn) ProcessElement(r kinesisio.Record, _ func(int)) {
	f.set.add(r.PartitionKey, r.Data)
	now := time.Since(tallyStart).Seconds()
	s, ok := f.spans[r.ShardID]
	if !ok {
		s.First = now
	}
	s.Records++
	s.Last = now
	f.spans[r.ShardID] = s
}

func (f *tallyFn) FinishBundle(emit func(int)) {
	tallyMu.Lock()
	tallySet.Count += f.set.Count
	tallySet.Sum += f.set.Sum
	for id, s := range f.spans {
		all, ok := tallySpans[id]
		if !ok || s.First < all.First {
			all.First = s.First
		}
		all.Last = max(all.Last, s.Last)
		all.Records += s.Records
		tallySpans[id] = all
	}
	tallyMu.Unlock()
	emit(int(f.set.Count))
}

// processUsage measures this process: CPU since it was made, and peak RSS since it was
// made (the kernel's high-water mark is reset through /proc/self/clear_refs).
type processUsage struct{ cpu time.Duration }

func startUsage() processUsage {
	runtime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	return processUsage{cpu: selfCPU()}
}

func (u processUsage) stop(r *anchorRun) {
	r.CPU = selfCPU() - u.cpu
	r.PeakRSS = vmHWM()
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmHWM reads this process's peak RSS from /proc/self/status.
func vmHWM() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// oursRead reads stream from TRIM_HORIZON with ReadBounded and tallies what it emits.
func oursRead(ctx context.Context, url, stream string, opts ...kinesisio.Option) (anchorRun, error) {
	tallyMu.Lock()
	tallySet, tallySpans = multiset{}, map[string]shardSpan{}
	tallyMu.Unlock()
	p, s := beam.NewPipelineWithRoot()
	recs := kinesisio.ReadBounded(s, stream, connect(url, append([]kinesisio.Option{kinesisio.WithStartingPosition(kinesisio.TrimHorizon())}, opts...)...)...)
	beam.ParDo0(s, discard, stats.Sum(s, beam.ParDo(s, &tallyFn{}, recs)))
	u := startUsage()
	tallyStart = time.Now()
	_, err := run(ctx, p, "anchors-read-"+stream)
	r := anchorRun{Wall: time.Since(tallyStart), Complete: err == nil}
	u.stop(&r)
	if err != nil {
		return r, err
	}
	tallyMu.Lock()
	r.Got, r.Shards = tallySet, tallySpans
	tallyMu.Unlock()
	return r, nil
}

// oursWrite writes messages 0..n-1 to stream with Write and aggregation on.
func oursWrite(ctx context.Context, url, stream string, n int) (anchorRun, error) {
	p, s := beam.NewPipelineWithRoot()
	msgs := beam.ParDo(s, &genMessagesFn{N: n}, beam.Impulse(s))
	failed := kinesisio.Write(s, stream, msgs, connect(url, kinesisio.WithAggregation())...)
	beam.ParDo0(s, discardFailures, stats.CountElms(s, failed))
	u := startUsage()
	start := time.Now()
	_, err := run(ctx, p, "anchors-write-"+stream)
	r := anchorRun{Wall: time.Since(start), Complete: err == nil}
	u.stop(&r)
	return r, err
}

// storedStats describes what a stream holds.
type storedStats struct {
	Records  int64            // Kinesis records
	Singles  int64            // of them, those carrying one user record (plain, or a 1-record aggregate)
	PerShard map[string]int64 // user records per shard
}

// streamContents reads every shard of stream, open and closed, with GetRecords and
// deaggregates what it finds: the multiset of user records the stream holds. With perShard >
// 0 it takes only the first perShard user records of each shard.
func streamContents(ctx context.Context, client *kinesis.Client, stream string, perShard int64) (multiset, storedStats, error) {
	st := storedStats{PerShard: map[string]int64{}}
	out, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return multiset{}, st, fmt.Errorf("listing shards: %w", err)
	}
	var m multiset
	for _, sh := range out.Shards {
		id := aws.ToString(sh.ShardId)
		it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName: aws.String(stream), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return m, st, fmt.Errorf("GetShardIterator: %w", err)
		}
		add := func(key string, data []byte) {
			if perShard <= 0 || st.PerShard[id] < perShard {
				m.add(key, data)
			}
			st.PerShard[id]++
		}
		for iter := it.ShardIterator; iter != nil; {
			res, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
			if err != nil {
				return m, st, fmt.Errorf("GetRecords: %w", err)
			}
			for _, r := range res.Records {
				st.Records++
				users, ok, err := kpl.Deaggregate(r.Data)
				if err != nil {
					return m, st, fmt.Errorf("deaggregating: %w", err)
				}
				if !ok {
					st.Singles++
					add(aws.ToString(r.PartitionKey), r.Data)
					continue
				}
				if len(users) == 1 {
					st.Singles++
				}
				for _, u := range users {
					add(u.PartitionKey, u.Data)
				}
			}
			if len(res.Records) == 0 && aws.ToInt64(res.MillisBehindLatest) == 0 {
				break
			}
			iter = res.NextShardIterator
		}
	}
	return m, st, nil
}

// putRange stores records from..to-1 plainly; with ehk set, each goes to ehk(i)'s shard.
func putRange(ctx context.Context, client *kinesis.Client, stream string, from, to int, ehk func(int) string) error {
	var batches [][]types.PutRecordsRequestEntry
	for lo := from; lo < to; lo += 500 {
		var b []types.PutRecordsRequestEntry
		for i := lo; i < min(to, lo+500); i++ {
			e := types.PutRecordsRequestEntry{PartitionKey: aws.String(benchKey(i)), Data: benchData(i)}
			if ehk != nil {
				e.ExplicitHashKey = aws.String(ehk(i))
			}
			b = append(b, e)
		}
		batches = append(batches, b)
	}
	return putBatches(ctx, client, stream, batches)
}

// waitActive waits until stream is ACTIVE again after a reshard.
func waitActive(ctx context.Context, client *kinesis.Client, stream string) error {
	for range 2000 {
		out, err := client.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			return fmt.Errorf("describing stream %s: %w", stream, err)
		}
		if out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("stream %s did not become active", stream)
}

// Hash keys: the middle and the quarter points of the 128-bit hash key space.
var (
	hashHalf    = new(big.Int).Lsh(big.NewInt(1), 127)
	hashQuarter = new(big.Int).Lsh(big.NewInt(1), 126)
)

func hashKey(v *big.Int, plus int) string {
	return new(big.Int).Add(v, big.NewInt(int64(plus))).String()
}

// reshardCase is a stream resharded between puts, with the parent → child pairs whose order a
// reader should keep.
type reshardCase struct {
	name  string
	want  multiset
	edges [][2]string // parent, child
	desc  string
}

// fillSplit makes stream "split": 2 shards, a third of the records, shard 0 split in
// the middle of its range, the rest.
func fillSplit(ctx context.Context, client *kinesis.Client, n int) (reshardCase, error) {
	c := reshardCase{name: "split", want: expected(0, n)}
	if err := createStream(ctx, client, c.name, 2); err != nil {
		return c, err
	}
	if err := putRange(ctx, client, c.name, 0, n/3, nil); err != nil {
		return c, err
	}
	if _, err := client.SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName: aws.String(c.name), ShardToSplit: aws.String("shardId-000000000000"),
		NewStartingHashKey: aws.String(hashKey(hashQuarter, 0)),
	}); err != nil {
		return c, fmt.Errorf("splitting: %w", err)
	}
	if err := waitActive(ctx, client, c.name); err != nil {
		return c, err
	}
	if err := putRange(ctx, client, c.name, n/3, n, nil); err != nil {
		return c, err
	}
	c.edges = [][2]string{{"shardId-000000000000", "shardId-000000000002"}, {"shardId-000000000000", "shardId-000000000003"}}
	c.desc = fmt.Sprintf("2 shards, %s records, shard 0 split in two, %s more", group(int64(n/3)), group(int64(n-n/3)))
	return c, nil
}

// fillMerge makes stream "merge": 2 shards, the adjacent parent (shard 0, lower half) given
// most of the first records and the primary parent (shard 1) a few, shards 1 and 0 merged
// (ShardToMerge shard 1, AdjacentShardToMerge shard 0), then records into the child.
func fillMerge(ctx context.Context, client *kinesis.Client, n int) (reshardCase, error) {
	c := reshardCase{name: "merge", want: expected(0, n)}
	if err := createStream(ctx, client, c.name, 2); err != nil {
		return c, err
	}
	big0, small1 := n*2/3, n/30
	if err := putRange(ctx, client, c.name, 0, big0, func(int) string { return hashKey(hashQuarter, 0) }); err != nil {
		return c, err
	}
	if err := putRange(ctx, client, c.name, big0, big0+small1, func(int) string { return hashKey(hashHalf, 1) }); err != nil {
		return c, err
	}
	if _, err := client.MergeShards(ctx, &kinesis.MergeShardsInput{
		StreamName: aws.String(c.name), ShardToMerge: aws.String("shardId-000000000001"),
		AdjacentShardToMerge: aws.String("shardId-000000000000"),
	}); err != nil {
		return c, fmt.Errorf("merging: %w", err)
	}
	if err := waitActive(ctx, client, c.name); err != nil {
		return c, err
	}
	if err := putRange(ctx, client, c.name, big0+small1, n, nil); err != nil {
		return c, err
	}
	c.edges = [][2]string{{"shardId-000000000001", "shardId-000000000002"}, {"shardId-000000000000", "shardId-000000000002"}}
	c.desc = fmt.Sprintf("2 shards, %s records in shard 0 and %s in shard 1, merged (primary parent shard 1, adjacent parent shard 0), %s more in the child",
		group(int64(big0)), group(int64(small1)), group(int64(n-big0-small1)))
	return c, nil
}

// orderViolations lists the parent → child pairs whose child reached the counting step
// before its parent's last record did, and the shards of which nothing arrived.
func orderViolations(c reshardCase, spans map[string]shardSpan) []string {
	var out []string
	for _, e := range c.edges {
		p, okp := spans[e[0]]
		ch, okc := spans[e[1]]
		switch {
		case !okp || !okc:
			continue
		case ch.First < p.Last:
			out = append(out, fmt.Sprintf("%s's first record %.0f ms before %s's last", short(e[1]), (p.Last-ch.First)*1000, short(e[0])))
		}
	}
	for _, e := range c.edges {
		for _, id := range e {
			if _, ok := spans[id]; !ok && !slices.Contains(out, short(id)+": nothing delivered") {
				out = append(out, short(id)+": nothing delivered")
			}
		}
	}
	return out
}

func short(shard string) string {
	s := strings.TrimLeft(strings.TrimPrefix(shard, "shardId-"), "0")
	if s == "" {
		s = "0"
	}
	return "shard " + s
}

// anchorRow is one line of the anchors table.
type anchorRow struct {
	Case       string
	Ours, Java anchorRun
	Want       multiset
	Read       bool // a read (exactness of what the pipeline emitted) or a write (of what the stream holds)
	OursNote   string
	JavaNote   string
}

// Anchors holds the pass's rows and its set-up facts.
type Anchors struct {
	Rows        []anchorRow
	BeamJava    string
	JavaRead    []string // the Beam Java read's arguments in the main rows
	Build       time.Duration
	Built       string
	Records     int
	Shards      int
	Aggregates  int64
	JavaWritten storedStats // what Beam Java's write stored
	OursWritten storedStats
}

// RunAnchors runs the --anchors pass.
func RunAnchors(ctx context.Context, cfg AnchorsConfig) (*Anchors, error) {
	j, err := buildJavaAnchor(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a := &Anchors{BeamJava: j.version, JavaRead: cfg.JavaRead, Build: j.Build, Built: j.Built, Records: cfg.Records, Shards: cfg.Shards}
	cs, err := startChildServer()
	if err != nil {
		return a, err
	}
	defer cs.Close()
	client := cs.client()
	n := cfg.Records
	want := expected(0, n)
	for _, st := range []string{"plain", "agg"} {
		if err := createStream(ctx, client, st, cfg.Shards); err != nil {
			return a, err
		}
	}
	if err := putPlain(ctx, client, "plain", n); err != nil {
		return a, err
	}
	if err := putAggregated(ctx, client, "agg", n); err != nil {
		return a, err
	}
	var aggStored storedStats
	if _, aggStored, err = streamContents(ctx, client, "agg", 0); err != nil {
		return a, err
	}
	a.Aggregates = aggStored.Records
	javaRead := func(stream string, want multiset, grace, timeout time.Duration, extra ...string) (anchorRun, error) {
		args := append([]string{"--endpoint=" + cs.url, "--stream=" + stream,
			"--records=" + strconv.FormatInt(want.Count, 10), "--grace-ms=" + strconv.FormatInt(grace.Milliseconds(), 10)}, extra...)
		r, err := j.run(ctx, timeout, "ReadAnchor", args...)
		if err == nil {
			cfg.logf("Beam Java read %s %s: %d records in %v, complete %v, %d reader starts, %d blocked closes",
				stream, strings.Join(extra, " "), r.Got.Count, r.Wall.Round(time.Millisecond), r.Complete, r.Java.ReaderStarts, r.Java.StuckCloses)
		}
		return r, err
	}
	readBoth := func(name, stream string, want multiset, grace, timeout time.Duration) (anchorRow, error) {
		row := anchorRow{Case: name, Want: want, Read: true}
		var err error
		if row.Java, err = javaRead(stream, want, grace, timeout, cfg.JavaRead...); err != nil {
			return row, err
		}
		row.JavaNote = readerNote(row.Java)
		row.Ours, err = oursRead(ctx, cs.url, stream)
		if err != nil {
			return row, err
		}
		cfg.logf("ReadBounded %s: %d records in %v", stream, row.Ours.Got.Count, row.Ours.Wall.Round(time.Millisecond))
		return row, nil
	}
	plainCase := fmt.Sprintf("Read, %d shards, %s × 100 B plain records", cfg.Shards, group(int64(n)))
	for _, c := range []struct{ name, stream string }{
		{plainCase, "plain"},
		{fmt.Sprintf("Read, %d shards, %s user records in KPL aggregates", cfg.Shards, group(int64(n))), "agg"},
	} {
		row, err := readBoth(c.name, c.stream, want, 0, cfg.Timeout)
		if err != nil {
			return a, err
		}
		a.Rows = append(a.Rows, row)
	}
	// Enhanced fan-out: Beam Java's withConsumerArn (SubscribeToShard over HTTP/2, h2c on the
	// server's plain port) beside WithEnhancedFanOut.
	efo, err := client.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(fmt.Sprintf("arn:aws:kinesis:us-east-1:%s:stream/plain", kinesistest.AccountID)), ConsumerName: aws.String("beam-java-efo")})
	if err != nil {
		return a, fmt.Errorf("registering Beam Java's consumer: %w", err)
	}
	efoRow := anchorRow{Case: "Read with enhanced fan-out (Beam Java `withConsumerArn`, beamkinesis `WithEnhancedFanOut`), plain stream as above", Want: want, Read: true}
	if efoRow.Java, err = javaRead("plain", want, 0, cfg.Timeout, append(slices.Clone(cfg.JavaRead), "--consumer-arn="+aws.ToString(efo.Consumer.ConsumerARN))...); err != nil {
		return a, err
	}
	// KinesisIO's enhanced fan-out reader does not log the reader starts readerNote counts.
	efoRow.JavaNote = fmt.Sprintf("first record after %.1fs; SubscribeToShard over HTTP/2 (h2c), CBOR", efoRow.Java.Java.First.Seconds())
	if efoRow.Ours, err = oursRead(ctx, cs.url, "plain", kinesisio.WithEnhancedFanOut("beamkinesis-efo")); err != nil {
		return a, err
	}
	cfg.logf("ReadBounded plain with enhanced fan-out: %d records in %v", efoRow.Ours.Got.Count, efoRow.Ours.Wall.Round(time.Millisecond))
	a.Rows = append(a.Rows, efoRow)
	if cfg.Alternatives {
		row := anchorRow{Case: "Alternative: " + plainCase + ", on the DirectRunner's default (primitive) unbounded read", Want: want, Read: true,
			OursNote: "as above"}
		if row.Java, err = javaRead("plain", want, 0, cfg.Timeout); err != nil {
			return a, err
		}
		row.JavaNote = readerNote(row.Java)
		a.Rows = append(a.Rows, row)
	}
	if cfg.ProbeMaxRecords {
		row := anchorRow{Case: fmt.Sprintf("Read bounded by withMaxNumRecords(%s), plain stream as above", group(int64(n))), Want: want, Read: true,
			OursNote: "ReadBounded needs no bound: it stops at the end of every shard"}
		if row.Java, err = javaRead("plain", want, 0, cfg.ReshardTimeout, append([]string{"--bound=max-records"}, cfg.JavaRead...)...); err != nil {
			return a, err
		}
		row.JavaNote = fmt.Sprintf("each of the %d splits (one per shard) must read %s; shards holding fewer never finish; %s", cfg.Shards, group(int64(n/cfg.Shards)), readerNote(row.Java))
		a.Rows = append(a.Rows, row)

		// The largest bound every split can meet: shards × the smallest shard's count; each split
		// then delivers the first share of its shard.
		_, st, err := streamContents(ctx, client, "plain", 0)
		if err != nil {
			return a, err
		}
		least := int64(n)
		for _, c := range st.PerShard {
			least = min(least, c)
		}
		bound := least * int64(len(st.PerShard))
		prefix, _, err := streamContents(ctx, client, "plain", least)
		if err != nil {
			return a, err
		}
		row = anchorRow{Case: fmt.Sprintf("Read bounded by withMaxNumRecords(%s) (%d × the smallest shard's %s records), plain stream as above",
			group(bound), len(st.PerShard), group(least)), Want: prefix, Read: true, OursNote: "as above"}
		if row.Java, err = javaRead("plain", prefix, 0, cfg.ReshardTimeout, append([]string{"--bound=max-records"}, cfg.JavaRead...)...); err != nil {
			return a, err
		}
		row.JavaNote = "the first " + group(least) + " records of each shard; " + readerNote(row.Java)
		a.Rows = append(a.Rows, row)
	}

	// Writes: the same messages, aggregation on, to fresh streams; what each stream holds.
	w := anchorRow{Case: fmt.Sprintf("Write with KPL aggregation, %d shards, %s × 100 B messages, no server limits", cfg.Shards, group(int64(n))), Want: want}
	for _, st := range []string{"jout", "gout"} {
		if err := createStream(ctx, client, st, cfg.Shards); err != nil {
			return a, err
		}
	}
	if w.Java, err = j.run(ctx, cfg.Timeout, "WriteAnchor", "--endpoint="+cs.url, "--stream=jout", "--records="+strconv.Itoa(n)); err != nil {
		return a, err
	}
	if w.Java.Got, a.JavaWritten, err = streamContents(ctx, client, "jout", 0); err != nil {
		return a, err
	}
	cfg.logf("Beam Java write: %v, %d Kinesis records (%d single), %d bundles (largest %d)", w.Java.Wall.Round(time.Millisecond),
		a.JavaWritten.Records, a.JavaWritten.Singles, w.Java.Java.Bundles, w.Java.Java.MaxBundle)
	if w.Ours, err = oursWrite(ctx, cs.url, "gout", n); err != nil {
		return a, err
	}
	if w.Ours.Got, a.OursWritten, err = streamContents(ctx, client, "gout", 0); err != nil {
		return a, err
	}
	cfg.logf("Write: %v, %d Kinesis records", w.Ours.Wall.Round(time.Millisecond), a.OursWritten.Records)
	w.JavaNote = writtenNote(a.JavaWritten, int64(n)) + fmt.Sprintf("; %d input bundles, the largest %s messages", w.Java.Java.Bundles, group(w.Java.Java.MaxBundle))
	w.OursNote = writtenNote(a.OursWritten, int64(n))
	a.Rows = append(a.Rows, w)

	// Resharding: what each read delivers, and in which order, after a split and a merge.
	for _, fill := range []func(context.Context, *kinesis.Client, int) (reshardCase, error){fillSplit, fillMerge} {
		c, err := fill(ctx, client, cfg.ReshardRecords)
		if err != nil {
			return a, fmt.Errorf("filling a reshard stream: %w", err)
		}
		row, err := readBoth("Read after a "+c.name+": "+c.desc, c.name, c.want, 2*time.Second, cfg.ReshardTimeout)
		if err != nil {
			return a, err
		}
		row.OursNote = orderNote(c, row.Ours.Shards)
		row.JavaNote = orderNote(c, row.Java.Shards) + "; " + row.JavaNote
		a.Rows = append(a.Rows, row)
		if cfg.Alternatives && c.name == "split" {
			alt := anchorRow{Case: "Alternative: the read after a split, on the DirectRunner's default (primitive) unbounded read", Want: c.want, Read: true,
				OursNote: "as above"}
			if alt.Java, err = javaRead(c.name, c.want, 2*time.Second, cfg.ReshardTimeout); err != nil {
				return a, err
			}
			alt.JavaNote = orderNote(c, alt.Java.Shards) + "; " + readerNote(alt.Java)
			a.Rows = append(a.Rows, alt)
		}
	}
	return a, nil
}

// readerNote says how often Beam Java started KinesisIO's reader, and how many of the closes
// before those starts waited 30 s for a shard's thread.
func readerNote(r anchorRun) string {
	s := fmt.Sprintf("%d reader starts", r.Java.ReaderStarts)
	if r.Got.Count > 0 {
		s = fmt.Sprintf("first record after %.1fs; %s", r.Java.First.Seconds(), s)
	}
	if r.Java.StuckCloses > 0 {
		s += fmt.Sprintf(", %d of the closes blocked 30 s", r.Java.StuckCloses)
	}
	return s
}

// writtenNote describes what a write stored for n messages.
func writtenNote(st storedStats, n int64) string {
	s := fmt.Sprintf("%s Kinesis records", group(st.Records))
	if multi := st.Records - st.Singles; st.Singles > 0 && multi > 0 {
		s += fmt.Sprintf(" (%s carrying one message; the other %s ≈ %s messages each)", group(st.Singles), group(multi), group((n-st.Singles+multi/2)/multi))
	} else if st.Records > 0 {
		s += fmt.Sprintf(" (≈ %s messages each)", group((n+st.Records/2)/st.Records))
	}
	return s
}

func orderNote(c reshardCase, spans map[string]shardSpan) string {
	if v := orderViolations(c, spans); len(v) > 0 {
		return "order: " + strings.Join(v, "; ")
	}
	return "every child after its parents"
}

// exactness says whether got is the expected multiset.
func exactness(r anchorRun, want multiset) string {
	switch {
	case !r.Complete:
		return fmt.Sprintf("✗ not finished at the timeout: %s of %s delivered", group(r.Got.Count), group(want.Count))
	case r.Got == want:
		return "✓ exact"
	case r.Got.Count == want.Count:
		return "✗ same count, different records (duplicates replacing losses)"
	default:
		return fmt.Sprintf("✗ %s of %s records", group(r.Got.Count), group(want.Count))
	}
}

func cellFor(r anchorRun, want multiset, note string) string {
	if r.Wall == 0 {
		if note == "" {
			return "–"
		}
		return note
	}
	s := fmt.Sprintf("%s; %s rec/s (%.2fs); CPU %.2fs; peak RSS %s", exactness(r, want), group(int64(r.rate()+0.5)), r.Wall.Seconds(), r.CPU.Seconds(), mib(float64(r.PeakRSS)))
	if note != "" {
		s += "; " + note
	}
	return s
}

// WriteAnchorsTable prints the pass as markdown.
func WriteAnchorsTable(w io.Writer, m Machine, mode string, a *Anchors) error {
	var b strings.Builder
	fmt.Fprintf(&b, "beamkinesis vs Beam Java KinesisIO (%s), %s\n\n", mode, m.Start.Format(time.RFC3339))
	fmt.Fprintf(&b, "Machine: %s, %d cores, %s, load average at start %s. beamkinesis on Prism (Go SDK, in process); "+
		"Beam Java %s KinesisIO (sdks/java/io/amazon-web-services2) on the Java DirectRunner (immutability and encodability checks off; reads with %s unless the case says otherwise), %s. "+
		"One kinesistest server in a child process. Rates are records over the job's wall time (Java: from Pipeline.run; Go: from beam.Run), "+
		"CPU and peak RSS are the whole process's (the JVM's rusage; this process's rusage and VmHWM).\n\n",
		m.CPU, m.Cores, m.GoVersion, m.LoadAvg, a.BeamJava, strings.Join(a.JavaRead, " "), javaVersion())
	b.WriteString("| Case | beamkinesis | Beam Java KinesisIO | beamkinesis ÷ Java |\n|---|---|---|---|\n")
	for _, r := range a.Rows {
		ratio := "–"
		if r.Java.Got.Count > 0 && r.Java.Wall > 0 && r.Ours.Wall > 0 {
			ratio = fmt.Sprintf("CPU %s; peak RSS %s", times(r.Ours.CPU.Seconds()/max(r.Java.CPU.Seconds(), 1e-9)),
				times(float64(r.Ours.PeakRSS)/max(float64(r.Java.PeakRSS), 1)))
			if r.Java.Complete {
				ratio = fmt.Sprintf("rec/s %s; ", times(r.Ours.rate()/r.Java.rate())) + ratio
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(r.Case), cell(cellFor(r.Ours, r.Want, r.OursNote)), cell(cellFor(r.Java, r.Want, r.JavaNote)), ratio)
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(&b, "\nLoad average at the end: %s.\n", strings.Join(strings.Fields(string(load))[:3], " "))
	}
	if a.Built != "up to date" {
		fmt.Fprintf(&b, "\nMaven build of the Java anchor: %s, %v.\n", a.Built, a.Build.Round(time.Second))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// times formats a ratio with three significant digits.
func times(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f×", r)
	}
	return strconv.FormatFloat(r, 'g', 3, 64) + "×"
}

// javaVersion is the first line of java -version.
func javaVersion() string {
	out, err := exec.Command("java", "-version").CombinedOutput()
	if err != nil {
		return "java unknown"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

// reportAnchors runs the --anchors pass and prints its table.
func reportAnchors(quick bool, log io.Writer) error {
	ctx, stop := signalContext()
	defer stop()
	cfg, mode := AnchorsFullConfig(), "anchors"
	if quick {
		cfg, mode = AnchorsQuickConfig(), "anchors, quick"
	}
	cfg.Log = log
	m := DescribeMachine()
	a, err := RunAnchors(ctx, cfg)
	if a != nil && len(a.Rows) > 0 {
		if werr := WriteAnchorsTable(os.Stdout, m, mode, a); werr != nil && err == nil {
			err = fmt.Errorf("writing the table: %w", werr)
		}
	}
	return err
}
