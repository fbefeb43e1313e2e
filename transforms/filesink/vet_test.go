package filesink

import (
	"context"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/vet"
)

func TestTransformsAreRegisteredForTheVetRunner(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	events := beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.Create(s, event{ID: "a"}))
	Write(s, EncodeJSON(s, events), Config{Dir: t.TempDir(), Shards: 2})
	WriteParquet(s, events, ParquetConfig{Config: Config{Dir: "s3://bucket/staging", Shards: 2}, Compression: "zstd"})
	if _, err := vet.Execute(context.Background(), p); err != nil {
		t.Errorf("vet runner: %v", err)
	}
}
