// Package dryrun translates a pipeline for Google Cloud Dataflow without submitting it
// (the Go SDK's --runner=dataflow --dry_run) and reads back the job the runner would
// have submitted: the job's type and experiments and the pipeline proto its workers
// would get. Then it decodes that proto the way a Dataflow worker does, with the
// worker's fallback to its binary's symbol table turned off, so that a function or type
// that is not registered is an error here instead of on a worker.
//
// The dry run needs no network and no credentials: the project, region and staging
// location are placeholders, nothing is staged, and the one GCS call the runner makes
// (a check of the staging bucket's soft-delete policy, which only logs) is made to fail
// at once by pointing GOOGLE_APPLICATION_CREDENTIALS at a file that does not exist.
package dryrun

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	v1pb "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/protox"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Placeholders for the Dataflow flags a dry run needs; nothing is sent to them.
const (
	Project         = "placeholder-project"
	Region          = "us-central1"
	StagingLocation = "gs://placeholder/staging"
)

// Job types of a Dataflow job (the v1b3 API's Job.type).
const (
	Streaming = "JOB_TYPE_STREAMING"
	Batch     = "JOB_TYPE_BATCH"
)

// Job is what the Dataflow runner would have submitted.
type Job struct {
	// Type is Streaming for a pipeline with an unbounded PCollection, Batch otherwise.
	Type string
	// Experiments are the job's experiments (enable_streaming_engine for streaming).
	Experiments []string
	// Pipeline is the pipeline proto staged for the workers.
	Pipeline *pipepb.Pipeline
}

// dryRunFlags are the flags a dry run sets, and restores afterwards.
var dryRunFlags = map[string]string{
	"runner":           "dataflow",
	"dry_run":          "true",
	"project":          Project,
	"region":           Region,
	"staging_location": StagingLocation,
	// Dataflow's default, a container; a Prism run earlier in the process leaves it at
	// loopback, which the Dataflow runner refuses with a panic.
	"environment_type": "",
}

// Run runs run, which builds a pipeline and runs it on the runner Beam's flags select
// (a pipeline command's run function), with --runner=dataflow --dry_run and placeholder
// GCP flags, and returns the job the runner printed. Beam must have been initialized
// (ptest.Main). Run changes process-wide state (flags, Beam's logger), so the tests
// calling it must not run in parallel.
func Run(t testing.TB, run func(context.Context) error) Job {
	t.Helper()
	for name, value := range dryRunFlags {
		f := flag.Lookup(name)
		if f == nil {
			t.Fatalf("flag --%s is not defined: is the Dataflow runner linked in (beamx)?", name)
		}
		old := f.Value.String()
		if err := f.Value.Set(value); err != nil {
			t.Fatalf("--%s=%s: %v", name, value, err)
		}
		t.Cleanup(func() { _ = f.Value.Set(old) })
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "no-credentials.json"))

	logs := &capture{}
	log.SetLogger(logs)
	err := run(t.Context())
	log.SetLogger(&log.Structural{}) // Beam's default
	if err != nil {
		t.Fatalf("dry run on Dataflow: %v", err)
	}
	job, err := logs.job()
	if err != nil {
		t.Fatalf("reading the job the dry run printed: %v", err)
	}
	return job
}

// capture is a Beam logger that keeps the messages logged at info level.
type capture struct {
	mu   sync.Mutex
	msgs []string
}

// Log implements log.Logger.
func (c *capture) Log(_ context.Context, sev log.Severity, _ int, msg string) {
	if sev != log.SevInfo {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, msg)
}

// dryRunMarker is what the Dataflow runner logs before it logs the pipeline proto (as
// text) and then the job (as JSON).
const dryRunMarker = "Dry-run: not submitting job!"

// job parses the pipeline proto and the job from the captured messages.
func (c *capture) job() (Job, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i < len(c.msgs) && c.msgs[i] != dryRunMarker {
		i++
	}
	if i+2 >= len(c.msgs) {
		return Job{}, fmt.Errorf("no dry-run output (%q followed by the pipeline and the job) among the %d messages logged: did the pipeline run on another runner?", dryRunMarker, len(c.msgs))
	}
	var p pipepb.Pipeline
	if err := prototext.Unmarshal([]byte(c.msgs[i+1]), &p); err != nil {
		return Job{}, fmt.Errorf("parsing the pipeline proto: %w", err)
	}
	var j struct {
		Type        string `json:"type"`
		Environment struct {
			Experiments []string `json:"experiments"`
		} `json:"environment"`
	}
	if err := json.Unmarshal([]byte(c.msgs[i+2]), &j); err != nil {
		return Job{}, fmt.Errorf("parsing the job: %w", err)
	}
	return Job{Type: j.Type, Experiments: j.Environment.Experiments, Pipeline: &p}, nil
}

// TransformNames returns the unique names of the job's transforms, sorted.
func (j Job) TransformNames() []string {
	var names []string
	for _, t := range j.Pipeline.GetComponents().GetTransforms() {
		names = append(names, t.GetUniqueName())
	}
	sort.Strings(names)
	return names
}

// SplittableDoFns returns the unique names of the ParDos that are splittable DoFns (they
// have a restriction coder), sorted.
func (j Job) SplittableDoFns() ([]string, error) {
	var names []string
	for _, t := range j.Pipeline.GetComponents().GetTransforms() {
		if t.GetSpec().GetUrn() != "beam:transform:pardo:v1" {
			continue
		}
		var pardo pipepb.ParDoPayload
		if err := proto.Unmarshal(t.GetSpec().GetPayload(), &pardo); err != nil {
			return nil, fmt.Errorf("transform %s: decoding its ParDo payload: %w", t.GetUniqueName(), err)
		}
		if pardo.GetRestrictionCoderId() != "" {
			names = append(names, t.GetUniqueName())
		}
	}
	sort.Strings(names)
	return names, nil
}

// CheckRegistration decodes the Go functions and coders of the pipeline as a Dataflow
// worker does, except that a function is found only if it was registered (a worker would
// look an unregistered one up in its binary's symbol table, which a stripped binary does
// not have, and then call it by reflection). It returns one error per transform or coder
// that does not decode, and per unregistered named type (encoded field by field, it
// decodes as an anonymous struct that the DoFn does not accept).
func (j Job) CheckRegistration() error {
	old := runtime.Resolver
	runtime.Resolver = registeredOnly{}
	defer func() { runtime.Resolver = old }()

	var errs []error
	comps := j.Pipeline.GetComponents()
	for id, t := range comps.GetTransforms() {
		for _, tp := range goPayloads(t) {
			var payload v1pb.TransformPayload
			if err := protox.DecodeBase64(string(tp), &payload); err != nil {
				errs = append(errs, fmt.Errorf("transform %s (%s): decoding its Go payload: %w", t.GetUniqueName(), id, err))
				continue
			}
			if payload.GetEdge() == nil {
				continue
			}
			if _, _, _, _, _, err := graphx.DecodeMultiEdge(payload.GetEdge()); err != nil {
				errs = append(errs, fmt.Errorf("transform %s: %w", t.GetUniqueName(), err))
			}
			for _, s := range anonymousStructs(&payload) {
				errs = append(errs, fmt.Errorf("transform %s: a type with fields %s is not registered (beam.RegisterType)", t.GetUniqueName(), s))
			}
		}
	}
	// A worker decodes the coders of the PCollections it reads and writes; a Go custom
	// coder is decoded with the length prefix that wraps it there.
	var ids []string
	for _, pc := range comps.GetPcollections() {
		ids = append(ids, pc.GetCoderId())
	}
	sort.Strings(ids)
	coders := graphx.NewCoderUnmarshaller(comps.GetCoders())
	for _, id := range slices.Compact(ids) {
		if _, err := coders.Coder(id); err != nil {
			errs = append(errs, fmt.Errorf("coder %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// goPayloads returns the Go SDK payloads of t: its DoFn's, or its CombineFn's.
func goPayloads(t *pipepb.PTransform) [][]byte {
	spec := t.GetSpec()
	switch spec.GetUrn() {
	case "beam:transform:pardo:v1":
		var pardo pipepb.ParDoPayload
		if proto.Unmarshal(spec.GetPayload(), &pardo) == nil && pardo.GetDoFn().GetUrn() == graphx.URNDoFn {
			return [][]byte{pardo.GetDoFn().GetPayload()}
		}
	case graphx.URNCombinePerKey:
		var combine pipepb.CombinePayload
		if proto.Unmarshal(spec.GetPayload(), &combine) == nil && strings.HasPrefix(combine.GetCombineFn().GetUrn(), "beam:") {
			return [][]byte{combine.GetCombineFn().GetPayload()}
		}
	}
	return nil
}

// anonymousStructs returns the field lists of the struct types m encodes field by field:
// named types that were not registered.
func anonymousStructs(m proto.Message) []string {
	var found []string
	var walk func(protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if t, ok := m.Interface().(*v1pb.Type); ok && t.GetKind() == v1pb.Type_STRUCT {
			var fields []string
			for _, f := range t.GetFields() {
				fields = append(fields, f.GetName())
			}
			found = append(found, "{"+strings.Join(fields, ", ")+"}")
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message())
					return true
				})
			case fd.Message() != nil && !fd.IsMap():
				walk(v.Message())
			}
			return true
		})
	}
	walk(m.ProtoReflect())
	return found
}

// registeredOnly is a symbol resolver that finds nothing, so that runtime.ResolveFunction
// finds registered functions only.
type registeredOnly struct{}

// Sym2Addr implements runtime.SymbolResolver.
func (registeredOnly) Sym2Addr(name string) (uintptr, error) {
	return 0, fmt.Errorf("function %s is not registered (register.FunctionXxY or beam.RegisterFunction)", name)
}

// Contains reports whether names holds every one of want; the error lists the missing ones.
func Contains(names []string, want ...string) error {
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	var missing []string
	for _, w := range want {
		if !have[w] {
			missing = append(missing, w)
		}
	}
	if missing != nil {
		return fmt.Errorf("missing %q among %q", missing, names)
	}
	return nil
}

// Want is what a test expects of the job of a dry run.
type Want struct {
	// Type is Streaming or Batch.
	Type string
	// Transforms are unique names of transforms the job must have (it may have more).
	Transforms []string
	// SplittableDoFns are the unique names of all the job's splittable DoFns.
	SplittableDoFns []string
}

// Check reports on t every way job differs from want, and every function, type or coder
// of the job a Dataflow worker could not find registered (CheckRegistration).
func Check(t testing.TB, job Job, want Want) {
	t.Helper()
	if job.Type != want.Type {
		t.Errorf("job type %s, want %s", job.Type, want.Type)
	}
	if want.Type == Streaming {
		if err := Contains(job.Experiments, "enable_streaming_engine", "use_runner_v2"); err != nil {
			t.Errorf("experiments: %v", err)
		}
	}
	if err := Contains(job.TransformNames(), want.Transforms...); err != nil {
		t.Errorf("transforms: %v", err)
	}
	sdfs, err := job.SplittableDoFns()
	if err != nil {
		t.Error(err)
	} else if !slices.Equal(sdfs, want.SplittableDoFns) {
		t.Errorf("splittable DoFns %q, want %q", sdfs, want.SplittableDoFns)
	}
	if err := job.CheckRegistration(); err != nil {
		t.Errorf("registration: %v", err)
	}
}
