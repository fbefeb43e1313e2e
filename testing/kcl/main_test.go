package kcl

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
)

// TestMain runs the package's pipelines on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	ptest.Main(m)
}
