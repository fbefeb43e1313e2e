package javacoder

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/exec"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
)

// Crossing is one value's trip through a Java runner.
type Crossing struct {
	// Value is the value sent; Coder the Go coder Beam infers for its type, as a pipeline does.
	Value any
	Coder *coder.Coder
	// Go is what the Go SDK encoded; Java what Beam Java encoded after decoding it (nil if it
	// failed: JavaErr says why); Back is Java's bytes decoded by the Go SDK (nil if they did
	// not decode: BackErr says why).
	Go, Java []byte
	JavaOut  string
	JavaErr  string
	Back     any
	BackErr  error
}

// Cross sends every value through Beam Java's coders, each under the coder Beam's Go SDK
// infers for its type (a registered custom coder, the schema row coder, ...), and decodes
// what Java encoded again with the Go SDK. It is the trip a value makes when a Java runner
// transcodes it between two Go stages.
func Cross(t testing.TB, values ...any) []Crossing {
	t.Helper()
	comps, ids := pipelineCoders(t, values)
	crossings := make([]Crossing, len(values))
	requests := make([]Value, len(values))
	for i, v := range values {
		cs, err := graphx.UnmarshalCoders([]string{ids[i]}, comps.GetCoders())
		if err != nil {
			t.Fatalf("unmarshalling the coder of %T: %v", v, err)
		}
		var buf bytes.Buffer
		if err := exec.MakeElementEncoder(cs[0]).Encode(&exec.FullValue{Elm: v}, &buf); err != nil {
			t.Fatalf("encoding %#v with %v: %v", v, cs[0], err)
		}
		crossings[i] = Crossing{Value: v, Coder: cs[0], Go: buf.Bytes()}
		requests[i] = Value{CoderID: ids[i], Bytes: buf.Bytes()}
	}
	results := TranscodeT(t, comps, requests)
	for i, r := range results {
		c := &crossings[i]
		c.Java, c.JavaOut, c.JavaErr = r.Bytes, r.Java, r.Err
		if r.Err != "" {
			continue
		}
		fv, err := exec.MakeElementDecoder(c.Coder).Decode(bytes.NewReader(r.Bytes))
		if err != nil {
			c.BackErr = fmt.Errorf("decoding Java's bytes with %v: %w", c.Coder, err)
			continue
		}
		c.Back = fv.Elm
	}
	return crossings
}

// pipelineCoders builds a pipeline holding one PCollection per value, of the value's type,
// marshals it as a runner receives it, and returns its components and, per value, the id of
// its PCollection's element coder.
func pipelineCoders(t testing.TB, values []any) (*pipepb.Components, []string) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	for i, v := range values {
		beam.Create(s.Scope(fmt.Sprintf("value-%d", i)), v)
	}
	edges, _, err := p.Build()
	if err != nil {
		t.Fatalf("building the pipeline: %v", err)
	}
	pipe, err := graphx.Marshal(edges, &graphx.Options{Environment: &pipepb.Environment{Urn: "beam:env:external:v1"}})
	if err != nil {
		t.Fatalf("marshalling the pipeline: %v", err)
	}
	comps := pipe.GetComponents()
	ids := make([]string, len(values))
	for _, tr := range comps.GetTransforms() {
		var i int
		if _, err := fmt.Sscanf(tr.GetUniqueName(), "value-%d", &i); err != nil || tr.GetUniqueName() != fmt.Sprintf("value-%d", i) {
			continue
		}
		for _, pc := range tr.GetOutputs() {
			ids[i] = comps.GetPcollections()[pc].GetCoderId()
		}
	}
	for i, id := range ids {
		if id == "" {
			t.Fatalf("no PCollection of %T in the marshalled pipeline", values[i])
		}
	}
	return comps, ids
}

// Check fails t for every crossing whose bytes Java changed or could not decode: after
// such a trip a Go stage would read another value, or fail.
func (c Crossing) Check(t testing.TB) {
	t.Helper()
	switch {
	case c.JavaErr != "":
		t.Errorf("Beam Java could not decode %#v (Go coder %v, bytes %x): %s", c.Value, c.Coder, c.Go, c.JavaErr)
	case !bytes.Equal(c.Go, c.Java):
		t.Errorf("Beam Java re-encoded %#v (Go coder %v) differently:\n  Go   %x\n  Java %x (it decoded %s)\n  which Go decodes as %#v (%v)", c.Value, c.Coder, c.Go, c.Java, c.JavaOut, c.Back, c.BackErr)
	case c.BackErr != nil:
		t.Errorf("%#v: %v", c.Value, c.BackErr)
	}
}
