package kinesisio

import (
	"flag"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/checkpoint"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
)

// TestMain runs the package's pipeline tests on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	flag.Parse()
	skipTableExamples()
	tableReported = reported.add
	splitRefused = func() { refusedSplits.Add(1) }
	ptest.Main(m)
}

// refusedSplits counts the fractional splits shard trackers refused since the tests began.
var refusedSplits atomic.Int64

// reported sums, per table name, what the checkpoint tables' handles reported as metrics
// (reportTable) since the tests began.
var reported = &tableReports{sums: map[string]*checkpoint.Stats{}}

type tableReports struct {
	mu   sync.Mutex
	sums map[string]*checkpoint.Stats
}

func (r *tableReports) add(table string, s checkpoint.Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := r.sums[table]
	if sum == nil {
		sum = &checkpoint.Stats{Records: map[string]int64{}}
		r.sums[table] = sum
	}
	sum.Commits += s.Commits
	sum.Calls += s.Calls
	sum.ShardEnds += s.ShardEnds
	sum.LeasesLost += s.LeasesLost
	sum.Renewals += s.Renewals
	sum.Unavailable += s.Unavailable
	for shard, n := range s.Records {
		sum.Records[shard] += n
	}
	sum.LatencyMs = append(sum.LatencyMs, s.LatencyMs...)
	sum.LagMs = append(sum.LagMs, s.LagMs...)
}

// tableStats sums what the handles on checkpoint tables named table (every owner, every
// endpoint) reported since the tests began.
func tableStats(table string) checkpoint.Stats {
	reported.mu.Lock()
	defer reported.mu.Unlock()
	sum, ok := reported.sums[table]
	if !ok {
		return checkpoint.Stats{}
	}
	out := *sum
	out.Records = maps.Clone(sum.Records)
	out.LatencyMs, out.LagMs = slices.Clone(sum.LatencyMs), slices.Clone(sum.LagMs)
	return out
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
