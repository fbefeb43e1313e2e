package components

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// motoStartTimeout bounds how long moto_server may take to answer its first request.
const motoStartTimeout = 60 * time.Second

// Moto is a running moto_server (PyPI moto[server]): real AWS service implementations
// (S3, DynamoDB, ...) on a loopback port, path-style addressed for S3.
type Moto struct {
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:41234.
	Endpoint string

	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan error
}

// StartMotoT starts moto_server from the virtualenv on a free loopback port, waits until
// it answers, and stops it when t ends. Without the virtualenv it skips or fails t (see
// Unavailable). Any access key, secret and region are accepted by it.
func StartMotoT(t testing.TB) *Moto {
	t.Helper()
	python := PythonT(t)
	m, err := StartMoto(context.Background(), python)
	if err != nil {
		t.Fatalf("starting moto_server: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("stopping moto_server: %v", err)
		}
	})
	return m
}

// StartMoto starts the moto_server beside python (the virtualenv's interpreter) and waits
// until it answers. Stop ends it.
func StartMoto(ctx context.Context, python string) (*Moto, error) {
	server := filepath.Join(filepath.Dir(python), "moto_server")
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	m := &Moto{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), out: &lockedBuffer{}, done: make(chan error, 1)}
	m.cmd = exec.Command(server, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: running %s: %v", ErrUnavailable, server, err)
	}
	go func() { m.done <- m.cmd.Wait() }()
	if err := m.waitReady(ctx); err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

// waitReady polls the server until it answers an HTTP request, it exits, or the start
// timeout passes.
func (m *Moto) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, motoStartTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.Endpoint+"/moto-api/reset-auth", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case err := <-m.done:
			m.done <- err
			return fmt.Errorf("moto_server exited before answering (%v); its output:\n%s", err, m.out.String())
		case <-ctx.Done():
			return fmt.Errorf("moto_server did not answer on %s within %v; its output:\n%s", m.Endpoint, motoStartTimeout, m.out.String())
		case <-tick.C:
		}
	}
}

// Stop ends the server and waits for it to exit.
func (m *Moto) Stop() error {
	if m.cmd.Process == nil {
		return nil
	}
	m.cmd.Process.Kill()
	<-m.done
	return nil
}

// Output is what the server printed so far (its request log).
func (m *Moto) Output() string { return m.out.String() }

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer is a bytes.Buffer that a process writes while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
