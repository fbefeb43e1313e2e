package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// service is the Kinesis server the soak runs against: in this process (the default), or
// testing/cmd/kinesis-server in a child process (--server=process), so that this process's
// memory is the job's alone. The chaos reshards through the Kinesis API either way; the
// faults, the outages and the ledger's reads go through kinesistest's direct calls or the
// child's admin endpoint.
type service interface {
	URL() string
	Client(optFns ...func(*kinesis.Options)) *kinesis.Client
	CreateStream(name string, shards int) error
	StreamRecords(stream string) ([]kinesistest.StoredRecord, error)
	SetFaults(f kinesistest.Faults) error
	SetOutage(o kinesistest.Outage) error
	// memory measures the server apart from this process; ok is false in process.
	memory() (m serverMemory, ok bool)
	Close() error
}

// serverMemory is the child server's memory, from its admin endpoint.
type serverMemory struct {
	HeapAfterGC uint64 `json:"heap_after_gc"`
	Goroutines  int    `json:"goroutines"`
	RSS         uint64 `json:"rss"`
}

// startService starts the server --server names.
func startService(ctx context.Context, kind string) (service, error) {
	switch kind {
	case "inprocess":
		srv, err := kinesistest.Start()
		if err != nil {
			return nil, fmt.Errorf("starting the Kinesis server: %w", err)
		}
		return inProcess{srv}, nil
	case "process":
		return startChildServer(ctx)
	}
	return nil, fmt.Errorf("--server=%q: want inprocess or process", kind)
}

// inProcess is the server in this process.
type inProcess struct{ *kinesistest.Server }

func (s inProcess) SetFaults(f kinesistest.Faults) error { s.Server.SetFaults(f); return nil }
func (inProcess) memory() (serverMemory, bool)           { return serverMemory{}, false }

// childServer is testing/cmd/kinesis-server in a child process.
type childServer struct {
	cmd        *exec.Cmd
	dir        string
	url, admin string
	http       *http.Client
}

// startChildServer builds kinesis-server (or takes --server_bin) and starts it on free
// ports with its admin endpoint.
func startChildServer(ctx context.Context) (_ *childServer, err error) {
	c := &childServer{http: &http.Client{Timeout: 2 * time.Minute}}
	bin := *serverBin
	if bin == "" {
		if c.dir, err = os.MkdirTemp("", "soak-kinesis-server-"); err != nil {
			return nil, fmt.Errorf("making a directory for kinesis-server: %w", err)
		}
		bin = filepath.Join(c.dir, "kinesis-server")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/beamkinesis/beamkinesis/testing/cmd/kinesis-server")
		if out, err := build.CombinedOutput(); err != nil {
			os.RemoveAll(c.dir)
			return nil, fmt.Errorf("building kinesis-server: %w: %s", err, out)
		}
	}
	c.cmd = exec.Command(bin, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	c.cmd.Stderr = os.Stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("kinesis-server's stdout: %w", err)
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kinesis-server: %w", err)
	}
	defer func() {
		if err != nil {
			c.Close() //nolint:errcheck // the start failed already
		}
	}()
	lines := bufio.NewScanner(stdout)
	for (c.url == "" || c.admin == "") && lines.Scan() {
		line := lines.Text()
		if u, ok := strings.CutPrefix(line, "kinesis-server listening on "); ok && c.url == "" {
			c.url = u
		}
		if u, ok := strings.CutPrefix(line, "kinesis-server admin on "); ok {
			c.admin = u
		}
	}
	if c.url == "" || c.admin == "" {
		return nil, fmt.Errorf("kinesis-server printed no listen and admin lines (%v)", lines.Err())
	}
	go io.Copy(io.Discard, stdout) //nolint:errcheck // nothing more is printed
	return c, nil
}

func (c *childServer) URL() string { return c.url }

func (c *childServer) Client(optFns ...func(*kinesis.Options)) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region:       kinesistest.Region,
		BaseEndpoint: aws.String(c.url),
		Credentials:  credentials.NewStaticCredentialsProvider(kinesistest.TestCredential.AccessKeyID, kinesistest.TestCredential.SecretAccessKey, ""),
		HTTPClient:   kinesistest.HTTPClient(),
	}, optFns...)
}

// CreateStream creates the stream through the Kinesis API and waits until it is ACTIVE.
func (c *childServer) CreateStream(name string, shards int) error {
	ctx := context.Background()
	client := c.Client()
	if _, err := client.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(int32(shards))}); err != nil {
		return fmt.Errorf("creating stream %s: %w", name, err)
	}
	w := kinesis.NewStreamExistsWaiter(client, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, time.Minute); err != nil {
		return fmt.Errorf("waiting for stream %s: %w", name, err)
	}
	return nil
}

func (c *childServer) StreamRecords(stream string) ([]kinesistest.StoredRecord, error) {
	var recs []kinesistest.StoredRecord
	err := c.call(http.MethodGet, "/records?stream="+url.QueryEscape(stream), nil, &recs)
	return recs, err
}

func (c *childServer) SetFaults(f kinesistest.Faults) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encoding the faults: %w", err)
	}
	return c.call(http.MethodPut, "/faults", b, nil)
}

func (c *childServer) SetOutage(o kinesistest.Outage) error {
	return c.call(http.MethodPut, "/outage?mode="+o.String(), nil, nil)
}

func (c *childServer) memory() (serverMemory, bool) {
	var m serverMemory
	return m, c.call(http.MethodGet, "/memory", nil, &m) == nil
}

// call makes one admin request and decodes its JSON answer into out (when not nil).
func (c *childServer) call(method, path string, body []byte, out any) error {
	req, err := http.NewRequest(method, c.admin+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("kinesis-server admin %s %s: %w", method, path, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("kinesis-server admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("kinesis-server admin %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(msg))
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("kinesis-server admin %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// Close stops the child with SIGTERM (it shuts down gracefully), or kills it after 15 s.
func (c *childServer) Close() error {
	defer os.RemoveAll(c.dir)
	if c.cmd.Process == nil {
		return nil
	}
	c.cmd.Process.Signal(os.Interrupt) //nolint:errcheck // it may have ended already
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) && !exit.Exited() {
			return nil // ended by the signal
		}
		return err
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill() //nolint:errcheck // best effort
		return fmt.Errorf("kinesis-server did not stop within 15 s of SIGINT; killed")
	}
}
