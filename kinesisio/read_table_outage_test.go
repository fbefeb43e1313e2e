package kinesisio

import (
	"context"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// diskDynalite is dynalite on a data directory and port of its own, so that it can be
// stopped and started again on the same data: an outage of the checkpoint table.
type diskDynalite struct {
	t         *testing.T
	node, cli string
	dir       string
	port      int
	cmd       *exec.Cmd
	done      chan struct{}
}

func startDiskDynalite(t *testing.T) *diskDynalite {
	t.Helper()
	node, err := emulators.Node()
	if err != nil {
		emulators.Unavailable(t, err)
	}
	pkg, err := emulators.PackageDir(string(emulators.Dynalite))
	if err != nil {
		emulators.Unavailable(t, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &diskDynalite{t: t, node: node, cli: filepath.Join(pkg, "cli.js"), dir: t.TempDir(), port: ln.Addr().(*net.TCPAddr).Port}
	ln.Close()
	d.start()
	t.Cleanup(d.stop)
	return d
}

func (d *diskDynalite) url() string { return "http://127.0.0.1:" + strconv.Itoa(d.port) }

// start runs dynalite and waits until it accepts connections.
func (d *diskDynalite) start() {
	d.t.Helper()
	d.cmd = exec.Command(d.node, d.cli, "--port", strconv.Itoa(d.port), "--path", d.dir,
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	d.cmd.Stderr = os.Stderr
	if err := d.cmd.Start(); err != nil {
		d.t.Fatalf("starting dynalite: %v", err)
	}
	d.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(d.cmd, d.done) //nolint:errcheck // stop waits for the end
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(d.port), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-d.done:
			d.t.Fatalf("dynalite exited before it listened on port %d", d.port)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("dynalite does not listen on port %d: %v", d.port, err)
		}
	}
}

// stop ends dynalite (SIGINT, then SIGKILL) and waits for it.
func (d *diskDynalite) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	d.cmd.Process.Signal(os.Interrupt) //nolint:errcheck // it may have ended already
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		d.cmd.Process.Kill() //nolint:errcheck // best effort
		<-d.done
	}
	d.cmd = nil
}

// The checkpoint table's DynamoDB goes away mid-stream (dynalite stopped) and comes back on
// the same data and port, and a shard splits while it is away. The streaming job goes on
// reading: it delivers every record exactly once, the table ends at the stream's last
// positions (the split parent at SHARD_END), and a second job on the table reads nothing.
func TestReadRidesOutAnUnreachableCheckpointTable(t *testing.T) {
	testRidesOutAnUnreachableTable(t, func(t *testing.T, name, stream string, opts []ReadOption) ([]string, error) {
		p, s := beam.NewPipelineWithRoot()
		out := collect(s, name, Read(s, stream, opts...))
		err := ptest.Run(p)
		return out.get(), err
	})
}

// The same with WithCommitAfterSinks: the commits come after a windowed sink (windows of
// heldTestWindow, a GroupByKey, a file written per window), through the held commit's
// timers, while the table is away.
func TestCommitAfterSinksRidesOutAnUnreachableCheckpointTable(t *testing.T) {
	testRidesOutAnUnreachableTable(t, func(t *testing.T, name, stream string, opts []ReadOption) ([]string, error) {
		path := filepath.Join(t.TempDir(), "windows")
		p, s := beam.NewPipelineWithRoot()
		windowedJob(s, stream, heldTestWindow, path, opts...)
		if err := ptest.Run(p); err != nil {
			return nil, err
		}
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return nil, nil
		}
		return windowFileRecords(t, path), nil
	})
}

// testRidesOutAnUnreachableTable runs the outage of the table around job, which runs a
// streaming read of stream with opts and returns what it delivered.
func testRidesOutAnUnreachableTable(t *testing.T, job func(t *testing.T, name, stream string, opts []ReadOption) ([]string, error)) {
	const stream, table = "tableoutage", "positions"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 2))
	dyn := startDiskDynalite(t)
	client := srv.Client()
	aggs := map[string][]kpl.UserRecord{}
	var aggsMu sync.Mutex
	write := func(prefix string) {
		w := newWorkload(t, prefix, 20, 2, 4)
		aggsMu.Lock()
		for k, v := range w.aggregates {
			aggs[k] = v
		}
		aggsMu.Unlock()
		putAll(t, client, stream, w.entries)
	}
	write("before")
	opts := func(readTime time.Duration) []ReadOption {
		return connect(srv, WithStartingPosition(TrimHorizon()), WithMaxReadTime(readTime),
			WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn.url()), WithCheckpointLeaseDuration(time.Second),
			WithDescribeShardInterval(200*time.Millisecond), WithPollInterval(50*time.Millisecond))
	}

	// The outage: from 2 s to 9 s of the job; the split at 3 s.
	outage := make(chan time.Duration, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		for i := 0; time.Since(start) < 11*time.Second; i++ {
			write(fmt.Sprintf("during%d", i))
			switch {
			case dyn.cmd != nil && time.Since(start) > 2*time.Second && time.Since(start) < 3*time.Second:
				dyn.stop()
				t.Logf("dynalite stopped at %v", time.Since(start).Round(time.Millisecond))
				down := time.Now()
				go func() {
					time.Sleep(time.Second)
					split(t, client, stream, "shardId-000000000000")
				}()
				defer func() { outage <- time.Since(down) }()
			case dyn.cmd == nil && time.Since(start) > 9*time.Second:
				dyn.start()
				t.Logf("dynalite started again at %v", time.Since(start).Round(time.Millisecond))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	first, err := job(t, t.Name()+"/1", stream, opts(14*time.Second))
	wg.Wait()
	if err != nil {
		t.Fatalf("the job failed while its checkpoint table was unreachable: %v", err)
	}
	select {
	case d := <-outage:
		t.Logf("outage of the table: %v", d.Round(time.Millisecond))
	default:
		t.Fatal("dynalite was not stopped")
	}

	all := expected(t, srv, stream, aggs, nil)
	assertSameRecords(t, first, all)

	// The held positions reach the table once it answers: each shard's last record, the
	// split parent's SHARD_END.
	stored, _ := srv.StreamRecords(stream)
	want := map[string]string{"shardId-000000000000": leasetable.ShardEnd}
	for _, r := range stored {
		if r.ShardID != "shardId-000000000000" {
			want[r.ShardID] = r.SequenceNumber
		}
	}
	if len(want) != 4 {
		t.Fatalf("records in %d shards, want 4 (2, then 0 split into 2 and 3): %v", len(want), want)
	}
	deadline := time.Now().Add(45 * time.Second)
	for shard, seq := range want {
		for {
			l := leaseOf(t, dyn.url(), table, shard)
			if l.Checkpoint == seq {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: checkpoint %s/%d, want %s", shard, l.Checkpoint, l.Sub, seq)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	got, err := job(t, t.Name()+"/2", stream, opts(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("the second job read %d records again (first %q); the table was at the stream's end", len(got), got[0])
	}
	t.Logf("%d records read once; the table at the last positions; the second job read none", len(all))
}

// split splits shard at the middle of its hash range. Failures are reported with t.Errorf,
// so it may run in a goroutine.
func split(t *testing.T, client *kinesis.Client, stream, shard string) {
	sh := listShards(t, client, stream)[shard]
	lo, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.EndingHashKey), 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if _, err := client.SplitShard(context.Background(), &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		t.Errorf("SplitShard: %v", err)
	}
}
