package count

import (
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*timedWord)(nil)).Elem())
	register.Function2x0(emitTimed)
	register.Emitter2[beam.EventTime, string]()
}

// TestMain runs the package's pipeline tests on Prism, ptest's default runner.
func TestMain(m *testing.M) {
	ptest.Main(m)
}

type timedWord struct {
	AtMillis int64
	Word     string
}

func emitTimed(in timedWord, emit func(beam.EventTime, string)) {
	emit(beam.EventTime(in.AtMillis), in.Word)
}

var t0 = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

func at(d time.Duration) int64 { return t0.Add(d).UnixMilli() }

// global re-windows col into the global window, which passert needs to compare it with
// its expected values.
func global(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.WindowInto(s, window.NewGlobalWindows(), col)
}

func TestPerWindowCountsEachKeyInEachWindowAndTablesRenderThem(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	words := beam.ParDo(s, emitTimed, beam.Create(s,
		timedWord{at(1 * time.Second), "Kinesis"},
		timedWord{at(2 * time.Second), "Connector"},
		timedWord{at(3 * time.Second), "Kinesis"},
		timedWord{at(61 * time.Second), "Kinesis"},
	))
	counts := PerWindow(s, beam.WindowInto(s, window.NewFixedWindows(time.Minute), words))
	w0, w1 := t0, t0.Add(time.Minute)
	passert.Equals(s, global(s, counts),
		KeyCount{Key: "Kinesis", Count: 2, WindowStart: w0, WindowEnd: w0.Add(time.Minute)},
		KeyCount{Key: "Connector", Count: 1, WindowStart: w0, WindowEnd: w0.Add(time.Minute)},
		KeyCount{Key: "Kinesis", Count: 1, WindowStart: w1, WindowEnd: w1.Add(time.Minute)},
	)
	passert.Equals(s, global(s, Tables(s, counts, "word")),
		"Window: 2026-11-30T14:00:00Z to 2026-11-30T14:01:00Z\n"+
			"+---------+-----+\n"+
			"|     word|count|\n"+
			"+---------+-----+\n"+
			"|  Kinesis|    2|\n"+
			"|Connector|    1|\n"+
			"+---------+-----+\n",
		"Window: 2026-11-30T14:01:00Z to 2026-11-30T14:02:00Z\n"+
			"+-------+-----+\n"+
			"|   word|count|\n"+
			"+-------+-----+\n"+
			"|Kinesis|    1|\n"+
			"+-------+-----+\n",
	)
	ptest.RunAndValidate(t, p)
}

func TestPerWindowInTheGlobalWindowHasZeroWindowTimes(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	counts := PerWindow(s, beam.Create(s, "a", "b", "a"))
	passert.Equals(s, counts, KeyCount{Key: "a", Count: 2}, KeyCount{Key: "b", Count: 1})
	passert.Equals(s, Tables(s, counts, "data"),
		"Window: global\n+----+-----+\n|data|count|\n+----+-----+\n|   a|    2|\n|   b|    1|\n+----+-----+\n")
	ptest.RunAndValidate(t, p)
}

func TestFormatTableMatchesTheSeedConsoleOutput(t *testing.T) {
	rows := []KeyCount{
		{Key: "for", Count: 1}, {Key: "Apache", Count: 1}, {Key: "Spark", Count: 1},
		{Key: "Kinesis", Count: 1}, {Key: "Connector", Count: 1}, {Key: "Grüße", Count: 12345},
	}
	want := "" +
		"+---------+-----+\n" +
		"|     data|count|\n" +
		"+---------+-----+\n" +
		"|    Grüße|12345|\n" +
		"|   Apache|    1|\n" +
		"|Connector|    1|\n" +
		"|  Kinesis|    1|\n" +
		"|    Spark|    1|\n" +
		"|      for|    1|\n" +
		"+---------+-----+\n"
	if got := FormatTable("data", rows); got != want {
		t.Errorf("FormatTable =\n%s\nwant\n%s", got, want)
	}
	if rows[0].Key != "for" {
		t.Errorf("FormatTable reordered its argument: rows[0] = %+v", rows[0])
	}
}
