package flinkrunner

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/xlangx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal/runnerlib"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/vet"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/grpc"

	// The remote execution hook that workers of a Go binary start through.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/harness/init"
)

// dialTimeout bounds the connection to the job service.
const dialTimeout = 2 * time.Minute // as the SDK's universal runner

// IsFlink reports whether runner names the Flink runner ("flink" or "FlinkRunner", the
// names the SDK registers for it).
func IsFlink(runner string) bool {
	return runner == "flink" || runner == "FlinkRunner"
}

// Run runs p like beamx.RunWithMetrics, on the runner --runner names (Prism by default),
// except that --runner=flink (or FlinkRunner) goes through Execute with the Flink options
// of this package's flags.
func Run(ctx context.Context, p *beam.Pipeline) (beam.PipelineResult, error) {
	if IsFlink(*runners.Runner) {
		return Execute(ctx, p, Flags)
	}
	return beamx.RunWithMetrics(ctx, p)
}

// Execute runs p on the Flink job server at --endpoint, as the SDK's flink runner does
// (the same job flags: --environment_type, --parallelism, --async, --job_name, ...), and
// sends opts as top-level pipeline options that Beam Java's FlinkPipelineOptions reads.
func Execute(ctx context.Context, p *beam.Pipeline, opts Options) (beam.PipelineResult, error) {
	if !beam.Initialized() {
		return nil, fmt.Errorf("flinkrunner: Beam has not been initialized; call beam.Init() before building the pipeline")
	}
	if *jobopts.Strict {
		if _, err := vet.Execute(ctx, p); err != nil {
			return nil, fmt.Errorf("flinkrunner: strictness check failed: %w", err)
		}
	}
	endpoint, err := jobopts.GetEndpoint()
	if err != nil {
		return nil, fmt.Errorf("flinkrunner: %w (the Flink job server's job endpoint, host:port)", err)
	}
	edges, _, err := p.Build()
	if err != nil {
		return nil, fmt.Errorf("flinkrunner: building the pipeline: %w", err)
	}
	envCfg := jobopts.GetEnvironmentConfig
	if jobopts.IsLoopback() {
		pool, err := startLoopback(ctx)
		if err != nil {
			return nil, fmt.Errorf("flinkrunner: %w", err)
		}
		defer pool.stop()
		envCfg = pool.environmentConfig
	}
	xlangx.ResolveArtifacts(ctx, edges, nil)
	env, err := graphx.CreateEnvironment(ctx, jobopts.GetEnvironmentUrn(ctx), envCfg)
	if err != nil {
		return nil, fmt.Errorf("flinkrunner: making the pipeline's environment: %w", err)
	}
	pipeline, err := graphx.Marshal(edges, &graphx.Options{Environment: env, PipelineResourceHints: jobopts.GetPipelineResourceHints()})
	if err != nil {
		return nil, fmt.Errorf("flinkrunner: making the pipeline proto: %w", err)
	}
	job := &runnerlib.JobOptions{
		Name:         jobopts.GetJobName(),
		Experiments:  jobopts.GetExperiments(),
		Worker:       *jobopts.WorkerBinary,
		RetainDocker: *jobopts.RetainDockerContainers,
		Parallelism:  *jobopts.Parallelism,
		Loopback:     jobopts.IsLoopback(),
	}
	return submit(ctx, pipeline, endpoint, job, opts, *jobopts.Async)
}

// submit stages the worker binary, submits the job with opts added to its options and,
// unless async, waits until it ends. It follows runnerlib.Execute, with the job service
// client wrapped so that Prepare carries opts.
func submit(ctx context.Context, p *pipepb.Pipeline, endpoint string, job *runnerlib.JobOptions, opts Options, async bool) (beam.PipelineResult, error) {
	bin, cleanup, err := workerBinary(ctx, job)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if err := runnerlib.UpdateGoEnvironmentWorker(bin, p); err != nil {
		return nil, fmt.Errorf("flinkrunner: pointing the environment at the worker binary %s: %w", bin, err)
	}
	cc, err := grpcx.Dial(ctx, endpoint, dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("flinkrunner: connecting to the job service at %s: %w", endpoint, err)
	}
	defer cc.Close()
	client := jobpb.NewJobServiceClient(cc)
	prepID, artifacts, token, err := runnerlib.Prepare(ctx, withOptions{client, opts}, p, job)
	if err != nil {
		return nil, fmt.Errorf("flinkrunner: preparing the job: %w", err)
	}
	retrieval, err := runnerlib.Stage(ctx, prepID, artifacts, bin, token)
	if err != nil {
		return nil, fmt.Errorf("flinkrunner: staging the worker binary: %w", err)
	}
	jobID, err := runnerlib.Submit(ctx, client, prepID, retrieval)
	if err != nil {
		return nil, fmt.Errorf("flinkrunner: submitting the job: %w", err)
	}
	log.Infof(ctx, "Submitted job: %v", jobID)
	if async {
		return &result{jobID: jobID, metrics: &metrics.Results{}}, nil
	}
	waitErr := runnerlib.WaitForCompletion(ctx, client, jobID)
	res := &result{jobID: jobID, metrics: &metrics.Results{}}
	m, err := client.GetJobMetrics(ctx, &jobpb.GetJobMetricsRequest{JobId: jobID})
	switch {
	case err == nil:
		res.metrics = metricsx.FromMonitoringInfos(p, m.GetMetrics().GetAttempted(), m.GetMetrics().GetCommitted())
	case waitErr == nil:
		return res, fmt.Errorf("flinkrunner: job %s: reading its metrics: %w", jobID, err)
	}
	if waitErr != nil {
		return res, fmt.Errorf("flinkrunner: %w", waitErr)
	}
	return res, nil
}

// workerBinary returns the binary the job's workers run, as runnerlib.Execute chooses it:
// the --worker_binary flag, a placeholder in loopback mode (the workers run in this
// process), this binary when it can run on the workers, or else a cross-compiled one.
func workerBinary(ctx context.Context, job *runnerlib.JobOptions) (bin string, cleanup func(), err error) {
	switch {
	case job.Worker != "":
		return job.Worker, func() {}, nil
	case job.Loopback:
		f, err := os.CreateTemp("", "beamloopbackworker-*")
		if err != nil {
			return "", nil, fmt.Errorf("flinkrunner: making the loopback placeholder binary: %w", err)
		}
		f.Close()
		return f.Name(), func() { os.Remove(f.Name()) }, nil
	}
	if self, ok := runnerlib.IsWorkerCompatibleBinary(); ok {
		return self, func() {}, nil
	}
	worker, err := runnerlib.BuildTempWorkerBinary(ctx, runnerlib.CompileOpts{})
	if err != nil {
		return "", nil, fmt.Errorf("flinkrunner: compiling the worker binary: %w", err)
	}
	return worker, func() { os.Remove(worker) }, nil
}

// withOptions is a job service client whose Prepare adds opts to the pipeline options.
type withOptions struct {
	jobpb.JobServiceClient
	opts Options
}

// Prepare adds the Flink options to the request's pipeline options and prepares the job.
func (c withOptions) Prepare(ctx context.Context, req *jobpb.PrepareJobRequest, callOpts ...grpc.CallOption) (*jobpb.PrepareJobResponse, error) {
	if req.GetPipelineOptions() == nil {
		return nil, fmt.Errorf("the job request carries no pipeline options to add the Flink options to")
	}
	c.opts.Apply(req.GetPipelineOptions())
	return c.JobServiceClient.Prepare(ctx, req, callOpts...)
}

// result is the beam.PipelineResult of a job run with Execute.
type result struct {
	jobID   string
	metrics *metrics.Results
}

// Metrics returns the job's metrics (empty for an async job).
func (r *result) Metrics() metrics.Results { return *r.metrics }

// JobID returns the job service's id of the job.
func (r *result) JobID() string { return r.jobID }
