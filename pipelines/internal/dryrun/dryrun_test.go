package dryrun

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
)

func init() {
	register.Function1x1(upper)
}

func TestMain(m *testing.M) {
	ptest.Main(m)
}

func upper(s string) string { return strings.ToUpper(s) }

// point is not registered as a type. A function registered with the register package
// registers the types of its parameters; toPoint is not registered, so neither is point.
type point struct{ X, Y int }

// toPoint is deliberately not registered.
func toPoint(s string) point { return point{X: len(s)} }

// dryRun translates the pipeline build makes for Dataflow.
func dryRun(t *testing.T, build func(s beam.Scope)) Job {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	build(s)
	return Run(t, func(ctx context.Context) error {
		return beamx.Run(ctx, p)
	})
}

func TestRegisteredBatchJobPasses(t *testing.T) {
	job := dryRun(t, func(s beam.Scope) {
		beam.ParDo(s, upper, beam.Create(s, "a", "b"))
	})
	Check(t, job, Want{Type: Batch, Transforms: []string{"dryrun.upper"}})
}

func TestUnregisteredFunctionAndTypeAreReported(t *testing.T) {
	job := dryRun(t, func(s beam.Scope) {
		beam.ParDo(s, toPoint, beam.Create(s, "a"))
	})
	err := job.CheckRegistration()
	for _, want := range []string{"dryrun.toPoint is not registered", "a type with fields {X, Y} is not registered"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckRegistration: %v, want an error saying %q", err, want)
		}
	}
}
