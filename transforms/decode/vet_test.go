package decode

import (
	"context"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/vet"
)

func TestTransformsAreRegisteredForTheVetRunner(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	recs := beam.Create(s, rec("1", "{}"))
	String(s, recs)
	JSON(s, recs, reflect.TypeOf(event{}), JSONOptions{Required: []string{"id"}})
	if _, err := vet.Execute(context.Background(), p); err != nil {
		t.Errorf("vet runner: %v", err)
	}
}
