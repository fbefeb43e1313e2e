// Package prismtest starts a Prism job server for a test and points the Go SDK's
// universal runner at it, as --runner=universal --endpoint=localhost:PORT
// --environment_type=LOOPBACK would: the portable submission path that Flink's job
// server also takes, without a cluster.
package prismtest

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
)

// UseJobServer starts a Prism job server that lives until the test ends and sets the
// --endpoint and --environment_type flags for it; both flags get their old values back
// when the test ends. Run the pipeline with beam.Run(ctx, "universal", p).
func UseJobServer(t testing.TB) {
	t.Helper()
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := prism.CreateJobServer(ctx, prism.Options{Port: port}); err != nil {
		t.Fatalf("starting the Prism job server: %v", err)
	}
	oldEndpoint, oldEnv := *jobopts.Endpoint, *jobopts.EnvironmentType
	*jobopts.Endpoint, *jobopts.EnvironmentType = fmt.Sprintf("localhost:%d", port), "LOOPBACK"
	t.Cleanup(func() { *jobopts.Endpoint, *jobopts.EnvironmentType = oldEndpoint, oldEnv })
}

// freePort returns a TCP port nothing listens on now. prism.Options takes a port number,
// not a listener, so there is a small window in which something else could take it.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		t.Fatalf("finding a free port for the Prism job server: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
