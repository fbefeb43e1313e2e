package kcl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

func init() {
	register.DoFn1x0[kinesisio.Record](&collectFn{})
}

// rec is one user record as a reader reports it.
type rec struct {
	Shard, PK, Seq string
	Sub            int64
	Data           []byte
}

func (r rec) String() string {
	return fmt.Sprintf("%s|%s|%s|%d|%s", r.Shard, r.PK, r.Seq, r.Sub, base64.StdEncoding.EncodeToString(r.Data))
}

// after says whether r comes after the checkpoint (seq, sub) of its shard; a symbolic
// checkpoint (TRIM_HORIZON, ...) is before every record, SHARD_END after every one.
func (r rec) after(cp lease) bool {
	switch cp.Checkpoint {
	case "SHARD_END":
		return false
	case "TRIM_HORIZON", "LATEST", "AT_TIMESTAMP", "":
		return true
	}
	if c := compareSeq(r.Seq, cp.Checkpoint); c != 0 {
		return c > 0
	}
	return r.Sub > cp.Sub
}

// compareSeq orders decimal sequence numbers.
func compareSeq(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

func strs(rs []rec) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// put writes plain records and KPL aggregates of perAgg user records, interleaved, and
// returns the aggregates' user records by the aggregate's bytes.
func put(t *testing.T, client *kinesis.Client, stream, prefix string, plain, aggs, perAgg int, into map[string][]kpl.UserRecord) {
	t.Helper()
	var entries []types.PutRecordsRequestEntry
	for i := range plain {
		entries = append(entries, types.PutRecordsRequestEntry{
			PartitionKey: aws.String(fmt.Sprintf("%s-pk-%d", prefix, i)),
			Data:         []byte(fmt.Sprintf("%s plain %d", prefix, i)),
		})
	}
	for i := range aggs {
		a := kpl.NewAggregator(1<<20, perAgg)
		var users []kpl.UserRecord
		for j := range perAgg {
			u := kpl.UserRecord{PartitionKey: fmt.Sprintf("%s-agg-%d", prefix, i), Data: []byte(fmt.Sprintf("%s agg %d/%d", prefix, i, j))}
			if err := a.Add(u); err != nil {
				t.Fatal(err)
			}
			users = append(users, u)
		}
		kr, err := a.Build()
		if err != nil {
			t.Fatal(err)
		}
		into[string(kr.Data)] = users
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(kr.PartitionKey), ExplicitHashKey: aws.String(kr.ExplicitHashKey), Data: kr.Data})
	}
	// Interleave aggregates with plain records, deterministically.
	x := uint64(len(entries))
	for i := len(entries) - 1; i > 0; i-- {
		x = x*6364136223846793005 + 1442695040888963407
		j := int(x>>33) % (i + 1)
		entries[i], entries[j] = entries[j], entries[i]
	}
	for len(entries) > 0 {
		n := min(len(entries), 500)
		out, err := client.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries[:n]})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("PutRecords: %d entries failed", aws.ToInt32(out.FailedRecordCount))
		}
		entries = entries[n:]
	}
}

// stored is every user record the stream holds, aggregates split into their user records.
func stored(t *testing.T, srv *kinesistest.Server, stream string, aggs map[string][]kpl.UserRecord) []rec {
	t.Helper()
	all, err := srv.StreamRecords(stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []rec
	for _, s := range all {
		if users, ok := aggs[string(s.Data)]; ok {
			for i, u := range users {
				out = append(out, rec{Shard: s.ShardID, PK: u.PartitionKey, Seq: s.SequenceNumber, Sub: int64(i), Data: u.Data})
			}
			continue
		}
		out = append(out, rec{Shard: s.ShardID, PK: s.PartitionKey, Seq: s.SequenceNumber, Data: s.Data})
	}
	return out
}

// lease is a lease item as the test reads it, with its attribute types.
type lease struct {
	Checkpoint string
	Sub        int64
	Owner      string
	Counter    int64
	Item       map[string]ddbtypes.AttributeValue
}

func dynamo(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       emulators.Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// createLeaseTable makes a KCL 3 lease table with its LeaseOwnerToLeaseKeyIndex index up
// front: dynalite refuses the UpdateTable KCL 3 adds the index with.
func createLeaseTable(t *testing.T, db *dynamodb.Client, table string) {
	t.Helper()
	s := func(name string) *string { return aws.String(name) }
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:   s(table),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: s("leaseKey"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: s("leaseOwner"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: s("leaseKey"), KeyType: ddbtypes.KeyTypeHash}},
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{
			IndexName: s("LeaseOwnerToLeaseKeyIndex"),
			KeySchema: []ddbtypes.KeySchemaElement{
				{AttributeName: s("leaseOwner"), KeyType: ddbtypes.KeyTypeHash},
				{AttributeName: s("leaseKey"), KeyType: ddbtypes.KeyTypeRange},
			},
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// dynalite answers CreateTable before the table takes writes, even with --createTableMs 0.
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := w.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// seedLeases writes the items KCL's shard sync writes for the open shards of a new
// application at TRIM_HORIZON, so KCL starts at once: on an empty table it waits a random
// 1-30 s before syncing shards itself.
func seedLeases(t *testing.T, db *dynamodb.Client, client *kinesis.Client, table, stream string) {
	t.Helper()
	out, err := client.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range out.Shards {
		item := map[string]ddbtypes.AttributeValue{
			"leaseKey":                     &ddbtypes.AttributeValueMemberS{Value: aws.ToString(sh.ShardId)},
			"checkpoint":                   &ddbtypes.AttributeValueMemberS{Value: "TRIM_HORIZON"},
			"checkpointSubSequenceNumber":  &ddbtypes.AttributeValueMemberN{Value: "0"},
			"leaseCounter":                 &ddbtypes.AttributeValueMemberN{Value: "0"},
			"ownerSwitchesSinceCheckpoint": &ddbtypes.AttributeValueMemberN{Value: "0"},
			"startingHashKey":              &ddbtypes.AttributeValueMemberS{Value: aws.ToString(sh.HashKeyRange.StartingHashKey)},
			"endingHashKey":                &ddbtypes.AttributeValueMemberS{Value: aws.ToString(sh.HashKeyRange.EndingHashKey)},
		}
		if p := aws.ToString(sh.ParentShardId); p != "" {
			item["parentShardId"] = &ddbtypes.AttributeValueMemberSS{Value: []string{p}}
		}
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
}

// items reads every item of table. The tables here are small: one Scan page holds them.
func items(t *testing.T, db *dynamodb.Client, table string) []map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if out.LastEvaluatedKey != nil {
		t.Fatalf("table %s has more items than one Scan page", table)
	}
	return out.Items
}

// entityType is an item's entityType: KCL 3.5 marks the items of its lease table that are
// not leases (worker metrics, coordinator state) with one other than LEASE. A lease has
// LEASE (KCL 3.5 created it) or none (KCL 3.1 or beamkinesis did).
func entityType(item map[string]ddbtypes.AttributeValue) string {
	if v, ok := item["entityType"].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func isLease(item map[string]ddbtypes.AttributeValue) bool {
	e := entityType(item)
	return e == "" || e == "LEASE"
}

// otherItems reads KCL 3.5's items of table that are not leases, by leaseKey.
func otherItems(t *testing.T, db *dynamodb.Client, table string) map[string]map[string]ddbtypes.AttributeValue {
	t.Helper()
	m := map[string]map[string]ddbtypes.AttributeValue{}
	for _, item := range items(t, db, table) {
		if !isLease(item) {
			key, _ := item["leaseKey"].(*ddbtypes.AttributeValueMemberS)
			if key == nil {
				t.Fatalf("an item of %s has no leaseKey string: %v", table, item)
			}
			m[key.Value] = item
		}
	}
	return m
}

// leases reads every lease item of table, by shard, leaving out KCL 3.5's other items.
func leases(t *testing.T, db *dynamodb.Client, table string) map[string]lease {
	t.Helper()
	m := map[string]lease{}
	for _, item := range items(t, db, table) {
		if !isLease(item) {
			continue
		}
		l := lease{Item: item}
		key, _ := item["leaseKey"].(*ddbtypes.AttributeValueMemberS)
		if v, ok := item["checkpoint"].(*ddbtypes.AttributeValueMemberS); ok {
			l.Checkpoint = v.Value
		}
		if v, ok := item["leaseOwner"].(*ddbtypes.AttributeValueMemberS); ok {
			l.Owner = v.Value
		}
		if v, ok := item["checkpointSubSequenceNumber"].(*ddbtypes.AttributeValueMemberN); ok {
			l.Sub, _ = strconv.ParseInt(v.Value, 10, 64)
		}
		if v, ok := item["leaseCounter"].(*ddbtypes.AttributeValueMemberN); ok {
			l.Counter, _ = strconv.ParseInt(v.Value, 10, 64)
		}
		if key == nil {
			t.Fatalf("an item of %s has no leaseKey string: %v", table, item)
		}
		m[key.Value] = l
	}
	return m
}

// describe renders an item's attributes with their DynamoDB types, sorted.
func describe(item map[string]ddbtypes.AttributeValue) string {
	var parts []string
	for k, v := range item {
		switch v := v.(type) {
		case *ddbtypes.AttributeValueMemberS:
			parts = append(parts, fmt.Sprintf("%s{S}=%s", k, v.Value))
		case *ddbtypes.AttributeValueMemberN:
			parts = append(parts, fmt.Sprintf("%s{N}=%s", k, v.Value))
		case *ddbtypes.AttributeValueMemberSS:
			parts = append(parts, fmt.Sprintf("%s{SS}=%v", k, v.Value))
		default:
			parts = append(parts, fmt.Sprintf("%s{%T}", k, v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// kclRun is what one run of the KCL consumer did.
type kclRun struct {
	Records []rec
	Log     string
	Took    time.Duration
}

// kclBuild is the KCL consumer (testing/kcl) built on one version of KCL: deps.sh kcl builds
// it on KCL 3.1 (the pom's kcl.version) and on KCL 3.5 (the pom's profile kcl-3.5).
type kclBuild struct {
	// Version is the amazon-kinesis-client version on the class path.
	Version         string
	java, classPath string
}

// kcl31 is the consumer on KCL 3.1 (components.KCL: BEAMKINESIS_KCL, else <cache>/kcl), which
// every scenario runs on. Pointing BEAMKINESIS_KCL at the KCL 3.5 build runs them on 3.5.
func kcl31(t *testing.T) kclBuild {
	t.Helper()
	java, cp := components.KCLT(t)
	return kclBuild{Version: kclVersion(t, cp), java: java, classPath: cp}
}

// kcl35Env names the environment variable holding the directory where deps.sh built the
// consumer on KCL 3.5 (classes/ and classpath.txt); without it, <cache>/kcl-3.5.
const kcl35Env = "BEAMKINESIS_KCL35"

// kcl35 is the consumer on KCL 3.5, or skips or fails t (components.Unavailable) when it is
// not built.
func kcl35(t *testing.T) kclBuild {
	t.Helper()
	dir := os.Getenv(kcl35Env)
	if dir == "" {
		dir = filepath.Join(components.Cache(), "kcl-3.5")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		components.Unavailable(t, fmt.Errorf("%w: java is not on PATH", components.ErrUnavailable))
	}
	deps, err := os.ReadFile(filepath.Join(dir, "classpath.txt"))
	if err != nil {
		components.Unavailable(t, fmt.Errorf("%w: no KCL consumer on KCL 3.5 built in %s (testing/deps/deps.sh kcl)", components.ErrUnavailable, dir))
	}
	cp := filepath.Join(dir, "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(deps))
	b := kclBuild{Version: kclVersion(t, cp), java: java, classPath: cp}
	if !strings.HasPrefix(b.Version, "3.5.") {
		t.Fatalf("%s holds the consumer on KCL %s, want 3.5.x (testing/deps/deps.sh kcl)", dir, b.Version)
	}
	return b
}

var kclJar = regexp.MustCompile(`amazon-kinesis-client-([0-9][^/` + string(os.PathListSeparator) + `]*)\.jar`)

// kclVersion is the version of the amazon-kinesis-client jar on the class path cp.
func kclVersion(t *testing.T, cp string) string {
	t.Helper()
	m := kclJar.FindStringSubmatch(cp)
	if m == nil {
		t.Fatalf("no amazon-kinesis-client jar on the KCL consumer's class path %s", cp)
	}
	return m[1]
}

// runKCL runs the KCL consumer k as worker on the lease table app until it wrote maxRecords
// records, and returns what it wrote. flags are more of the consumer's flags.
func runKCL(t *testing.T, k kclBuild, kinesisURL, dynamoURL, stream, app, worker string, maxRecords, checkpointEvery int, flags ...string) kclRun {
	t.Helper()
	return startKCL(t, k, kinesisURL, dynamoURL, stream, app, worker, maxRecords, checkpointEvery, flags...).wait(t)
}

// kclProcess is a running KCL consumer.
type kclProcess struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	logs    *bytes.Buffer
	out     string
	worker  string
	version string
	max     int
	start   time.Time
}

// startKCL starts the KCL consumer k; wait collects what it wrote. maxRecords 0 runs it
// until stop.
func startKCL(t *testing.T, k kclBuild, kinesisURL, dynamoURL, stream, app, worker string, maxRecords, checkpointEvery int, flags ...string) *kclProcess {
	t.Helper()
	p := &kclProcess{logs: &bytes.Buffer{}, out: filepath.Join(t.TempDir(), worker+".tsv"), worker: worker, version: k.Version, max: maxRecords}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	p.cancel = cancel
	args := []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=" + logLevel(), "-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-cp", k.classPath, "dev.beamkinesis.kcl.Consumer",
		"--kinesis-endpoint", kinesisURL, "--dynamodb-endpoint", dynamoURL,
		"--stream", stream, "--app", app, "--worker", worker, "--out", p.out,
		"--max-records", strconv.Itoa(maxRecords), "--checkpoint-every", strconv.Itoa(checkpointEvery),
		"--failover-ms", "2000", "--max-seconds", "60", "--protocol", kclProtocol()}
	p.cmd = exec.CommandContext(ctx, k.java, append(args, flags...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting the KCL consumer on KCL %s: %v", k.Version, err)
	}
	t.Cleanup(func() { // a test that failed early: end the process
		if p.cmd.ProcessState == nil {
			p.cancel()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// stop asks the consumer to shut down gracefully (SIGTERM), as an operator would.
func (p *kclProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signalling the KCL consumer: %v", err)
	}
}

// wait waits for the consumer to exit and returns what it wrote.
func (p *kclProcess) wait(t *testing.T) kclRun {
	t.Helper()
	defer p.cancel()
	err := p.cmd.Wait()
	run := kclRun{Log: p.logs.String(), Took: time.Since(p.start)}
	if dir := os.Getenv("BEAMKINESIS_KCL_LOG_DIR"); dir != "" { // for debugging: keep the log
		_ = os.WriteFile(filepath.Join(dir, p.worker+".log"), p.logs.Bytes(), 0o644)
	}
	if err != nil {
		var exit *exec.ExitError
		// A signal ends the JVM through its shutdown hook with exit code 143.
		if !(errors.As(err, &exit) && exit.ExitCode() == 143 && p.max == 0) {
			if errors.As(err, &exit) && exit.ExitCode() == 3 {
				t.Fatalf("the KCL consumer on KCL %s did not reach %d records in time; its log:\n%s", p.version, p.max, tail(run.Log, 60))
			}
			t.Fatalf("the KCL consumer on KCL %s: %v; its log:\n%s", p.version, err, tail(run.Log, 60))
		}
	}
	f, err := os.Open(p.out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 5 {
			t.Fatalf("the KCL consumer wrote %q; want 5 tab-separated columns", sc.Text())
		}
		sub, err := strconv.ParseInt(cols[3], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		data, err := base64.StdEncoding.DecodeString(cols[4])
		if err != nil {
			t.Fatal(err)
		}
		run.Records = append(run.Records, rec{Shard: cols[0], PK: cols[1], Seq: cols[2], Sub: sub, Data: data})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return run
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// sinks hold what collectFn saw, per key; the pipelines run in this process (Prism with
// loopback workers).
var (
	sinksMu sync.Mutex
	sinks   = map[string]*sink{}
)

type sink struct {
	mu   sync.Mutex
	recs []rec
}

func (s *sink) get() []rec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rec(nil), s.recs...)
}

// collectFn appends each record to the sink named Key.
type collectFn struct{ Key string }

func (fn *collectFn) ProcessElement(r kinesisio.Record) {
	sinksMu.Lock()
	s := sinks[fn.Key]
	sinksMu.Unlock()
	s.mu.Lock()
	s.recs = append(s.recs, rec{Shard: r.ShardID, PK: r.PartitionKey, Seq: r.SequenceNumber, Sub: r.SubSequenceNumber, Data: r.Data})
	s.mu.Unlock()
}

// collect sends recs to a new sink named key.
func collect(s beam.Scope, key string, recs beam.PCollection) *sink {
	sk := &sink{}
	sinksMu.Lock()
	sinks[key] = sk
	sinksMu.Unlock()
	beam.ParDo0(s, &collectFn{Key: key}, recs)
	return sk
}

// assertSame compares two multisets of records exactly.
func assertSame(t *testing.T, what string, got, want []rec) {
	t.Helper()
	count := map[string]int{}
	for _, w := range strs(want) {
		count[w]++
	}
	for _, g := range strs(got) {
		count[g]--
	}
	var missing, extra int
	for k, c := range count {
		switch {
		case c > 0:
			if missing < 5 {
				t.Errorf("%s: missing %d× %s", what, c, k)
			}
			missing += c
		case c < 0:
			if extra < 5 {
				t.Errorf("%s: unexpected or duplicated %d× %s", what, -c, k)
			}
			extra -= c
		}
	}
	if missing > 0 || extra > 0 || len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d: %d missing, %d unexpected or duplicated", what, len(got), len(want), missing, extra)
	}
}

// split partitions rs by whether each comes after its shard's checkpoint in ls.
func split(t *testing.T, rs []rec, ls map[string]lease) (before, after []rec) {
	t.Helper()
	for _, r := range rs {
		l, ok := ls[r.Shard]
		if !ok {
			t.Fatalf("no lease for shard %s", r.Shard)
		}
		if r.after(l) {
			after = append(after, r)
		} else {
			before = append(before, r)
		}
	}
	return before, after
}

// splitShard splits shard at the middle of its hash key range.
func splitShard(t *testing.T, client *kinesis.Client, stream, shard string) {
	t.Helper()
	out, err := client.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range out.Shards {
		if aws.ToString(sh.ShardId) != shard {
			continue
		}
		lo, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.StartingHashKey), 10)
		hi, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.EndingHashKey), 10)
		mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
		_, err := client.SplitShard(context.Background(), &kinesis.SplitShardInput{
			StreamName: aws.String(stream), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(mid.String()),
		})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("stream %s has no shard %s", stream, shard)
}

// stringSet returns the sorted members of a string set attribute, or nil for another type.
func stringSet(v ddbtypes.AttributeValue) []string {
	ss, ok := v.(*ddbtypes.AttributeValueMemberSS)
	if !ok {
		return nil
	}
	out := append([]string(nil), ss.Value...)
	sort.Strings(out)
	return out
}

// logLevel is the KCL consumer's log level: BEAMKINESIS_KCL_LOG_LEVEL, else warn.
func logLevel() string {
	if l := os.Getenv("BEAMKINESIS_KCL_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}

// kclProtocol is the KCL consumer's HTTP protocol to Kinesis: BEAMKINESIS_KCL_PROTOCOL (h2 or
// http1.1), else http1.1.
func kclProtocol() string {
	if p := os.Getenv("BEAMKINESIS_KCL_PROTOCOL"); p != "" {
		return p
	}
	return "http1.1"
}
