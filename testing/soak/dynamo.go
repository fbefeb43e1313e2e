package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/beamkinesis/beamkinesis/testing/emulators"
)

var checkpointTable = flag.Bool("checkpoint_table", false, "read with a checkpoint table (WithCheckpointTable) on dynalite, which the soak runs on a data directory and port of its own; --outage=dynamodb stops it and starts it again on the same data and port")

// dynamo is dynalite, the checkpoint table's DynamoDB, kept on disk so that it can be
// stopped and started again on the same data and port (--outage=dynamodb).
type dynamo struct {
	node, cli, dir string
	port           int
	cmd            *exec.Cmd
	done           chan struct{}
}

// startDynamo starts dynalite on a new data directory and a free port.
func startDynamo() (*dynamo, error) {
	node, err := emulators.Node()
	if err != nil {
		return nil, fmt.Errorf("--checkpoint_table needs dynalite (testing/deps/deps.sh installs it): %w", err)
	}
	pkg, err := emulators.PackageDir(string(emulators.Dynalite))
	if err != nil {
		return nil, fmt.Errorf("--checkpoint_table needs dynalite (testing/deps/deps.sh installs it): %w", err)
	}
	d := &dynamo{node: node, cli: filepath.Join(pkg, "cli.js")}
	if d.dir, err = os.MkdirTemp("", "soak-dynalite-"); err != nil {
		return nil, fmt.Errorf("making dynalite's data directory: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("finding a port for dynalite: %w", err)
	}
	d.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return d, d.start()
}

// url is dynalite's endpoint.
func (d *dynamo) url() string { return "http://127.0.0.1:" + strconv.Itoa(d.port) }

// start runs dynalite on the data directory and port, and waits until it accepts
// connections.
func (d *dynamo) start() error {
	d.cmd = exec.Command(d.node, d.cli, "--port", strconv.Itoa(d.port), "--path", d.dir,
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	d.cmd.Stderr = os.Stderr
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("starting dynalite: %w", err)
	}
	d.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(d.cmd, d.done) //nolint:errcheck // stop reports the end
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(d.port), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("dynalite exited before it listened on port %d", d.port)
		case <-ctx.Done():
			return fmt.Errorf("dynalite does not listen on port %d after a minute: %v", d.port, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends dynalite (SIGTERM; SIGKILL after 10 s) and waits for it.
func (d *dynamo) stop() error {
	if d.cmd == nil || d.cmd.Process == nil {
		return nil
	}
	d.cmd.Process.Signal(os.Interrupt) //nolint:errcheck // it may have ended already
	select {
	case <-d.done:
		return nil
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill() //nolint:errcheck // best effort
		<-d.done
		return errors.New("dynalite did not stop within 10 s of SIGINT; killed")
	}
}

// close stops dynalite and removes its data.
func (d *dynamo) close() error {
	err := d.stop()
	return errors.Join(err, os.RemoveAll(d.dir))
}
