package kinesisio

import (
	"flag"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/testing/emulators"
)

// TestMain runs the package's pipeline tests on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	flag.Parse()
	skipTableExamples()
	ptest.Main(m)
}

// tableExamples are the examples that need DynamoDB (dynalite) for their checkpoint table.
const tableExamples = "ExampleWithCheckpointTable"

// skipTableExamples skips tableExamples when dynalite is not installed, as the package's
// tests skip themselves then (an example cannot), through go test's -skip flag, and says
// why. With emulators required (BEAMKINESIS_REQUIRE_EMULATORS=1) it leaves them to run and
// fail, as those tests fail.
func skipTableExamples() {
	_, err := emulators.PackageDir(string(emulators.Dynalite))
	if err == nil || emulators.Required() {
		return
	}
	skip := "^" + tableExamples + "$"
	if prev := flag.Lookup("test.skip").Value.String(); prev != "" {
		skip = prev + "|" + skip
	}
	if err := flag.Set("test.skip", skip); err != nil {
		panic(err)
	}
	// Say so only when -run would have run them.
	run := strings.Split(flag.Lookup("test.run").Value.String(), "/")[0]
	if ok, _ := regexp.MatchString(run, tableExamples); ok {
		fmt.Printf("skipping %s: %v; %s\n", tableExamples, err, emulators.InstallHint)
	}
}
