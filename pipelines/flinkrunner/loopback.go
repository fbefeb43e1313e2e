package flinkrunner

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/apache/beam/sdks/v2/go/container/tools"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/harness"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"google.golang.org/grpc"
)

// loopback is the worker pool of --environment_type=LOOPBACK: it runs the job's SDK
// workers in this process when the runner asks for them.
//
// It differs from the SDK's extworker.Loopback in one way that matters on a Flink cluster
// with more than one TaskManager: each TaskManager JVM numbers its workers from the same
// start ("1-1", "2-1", ...), so two TaskManagers ask for workers of the same id. The SDK's
// pool refuses the second ("worker with ID "1-1" already exists") and the job fails and
// restarts until the TaskManagers' counters happen to differ. This pool tells the workers
// apart by id and control endpoint (each TaskManager serves its own), and leaves ending a
// worker to its control stream (see StopWorker).
type loopback struct {
	fnpb.UnimplementedBeamFnExternalWorkerPoolServer

	lis    net.Listener
	srv    *grpc.Server
	root   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	workers map[workerKey]context.CancelFunc // nil once stopped
}

// workerKey identifies a worker of one runner process.
type workerKey struct {
	id, control string
}

// startLoopback serves a loopback worker pool on a free port of localhost.
func startLoopback(ctx context.Context) (*loopback, error) {
	lis, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the loopback worker pool: %w", err)
	}
	root, cancel := context.WithCancel(ctx)
	s := &loopback{lis: lis, srv: grpc.NewServer(), root: root, cancel: cancel, workers: map[workerKey]context.CancelFunc{}}
	fnpb.RegisterBeamFnExternalWorkerPoolServer(s.srv, s)
	go s.srv.Serve(lis)
	log.Infof(ctx, "flinkrunner: loopback worker pool on %v", lis.Addr())
	return s, nil
}

// StartWorker starts an SDK worker in this process for the runner's request.
func (s *loopback) StartWorker(ctx context.Context, req *fnpb.StartWorkerRequest) (*fnpb.StartWorkerResponse, error) {
	id, control, logging := req.GetWorkerId(), req.GetControlEndpoint(), req.GetLoggingEndpoint()
	switch {
	case control == nil || logging == nil:
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("worker %q: the request has no control or logging endpoint", id)}, nil
	case control.GetAuthentication() != nil || logging.GetAuthentication() != nil:
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("worker %q: authenticated endpoints are not supported in loopback mode", id)}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workers == nil {
		return &fnpb.StartWorkerResponse{Error: "the loopback worker pool is shutting down"}, nil
	}
	key := workerKey{id: id, control: control.GetUrl()}
	if _, ok := s.workers[key]; ok {
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("worker %q of %s already runs", id, key.control)}, nil
	}
	wctx, cancel := context.WithCancel(grpcx.WriteWorkerID(s.root, id))
	s.workers[key] = cancel
	opts := harnessOptions(wctx, req.GetProvisionEndpoint().GetUrl())
	go func() {
		if err := harness.MainWithOptions(wctx, logging.GetUrl(), key.control, opts); err != nil {
			log.Debugf(wctx, "flinkrunner: worker %q of %s ended: %v", id, key.control, err)
		}
		s.mu.Lock()
		if s.workers != nil {
			delete(s.workers, key)
		}
		s.mu.Unlock()
		cancel()
	}()
	return &fnpb.StartWorkerResponse{}, nil
}

// harnessOptions asks the runner's provision service for what the worker needs from it.
func harnessOptions(ctx context.Context, endpoint string) harness.Options {
	var opts harness.Options
	if endpoint == "" {
		return opts
	}
	info, err := tools.ProvisionInfo(ctx, endpoint)
	if err != nil {
		log.Debugf(ctx, "flinkrunner: no provision info from %s, using defaults: %v", endpoint, err)
		return opts
	}
	opts.StatusEndpoint = info.GetStatusEndpoint().GetUrl()
	opts.RunnerCapabilities = info.GetRunnerCapabilities()
	return opts
}

// StopWorker acknowledges the runner's request and stops nothing: each worker ends when
// its runner closes its control stream, which Beam Java's runner does before it sends
// StopWorker. The request names only a worker id, which is not unique across
// TaskManagers, so acting on it can stop the wrong worker: by the time the request arrives
// the worker it means has usually ended and left the pool, and the one worker left under
// that id is another TaskManager's, busy with a bundle. Stopping it failed that
// TaskManager's task ("CANCELLED: client cancelled"), and Flink's batch failover then ran
// the stage's inputs again: a ReadBounded at --parallelism=2 or 4 read every record two to
// four times (counted in the job's DoFns; the job's output after the restarts was right).
func (s *loopback) StopWorker(context.Context, *fnpb.StopWorkerRequest) (*fnpb.StopWorkerResponse, error) {
	return &fnpb.StopWorkerResponse{}, nil
}

// stop ends every worker and the pool's server.
func (s *loopback) stop() {
	s.mu.Lock()
	s.workers = nil
	s.cancel()
	s.mu.Unlock()
	s.srv.GracefulStop()
}

// environmentConfig is the pool's address for the job's EXTERNAL environment.
func (s *loopback) environmentConfig(context.Context) string {
	return fmt.Sprintf("localhost:%d", s.lis.Addr().(*net.TCPAddr).Port)
}
