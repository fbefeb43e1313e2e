package dedup

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/vet"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func TestTransformsAreRegisteredForTheVetRunner(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	recs := beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.Create(s, kinesisio.Record{}))
	Records(s, recs)
	if _, err := vet.Execute(context.Background(), p); err != nil {
		t.Errorf("vet runner: %v", err)
	}
}
