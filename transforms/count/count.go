// Package count counts strings per window and renders each window's counts as a console
// table like Spark's (the word-count seed's output), for pipelines that report counts.
package count

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*KeyCount)(nil)).Elem())
	register.Function3x1(withWindow)
	register.DoFn3x1[beam.Window, int, func(*KeyCount) bool, string](&tableFn{})
	register.Iter1[KeyCount]()
}

// KeyCount is how many times Key occurred in the window [WindowStart, WindowEnd). Both
// times are zero for the global window.
type KeyCount struct {
	Key         string
	Count       int64
	WindowStart time.Time
	WindowEnd   time.Time
}

// PerWindow counts the occurrences of each distinct string in each window of keys, a
// PCollection<string>, and returns a PCollection<KeyCount>, one per key and window, each in
// its window. With the default trigger a window's counts appear when the watermark passes
// its end.
func PerWindow(s beam.Scope, keys beam.PCollection) beam.PCollection {
	s = s.Scope("count.PerWindow")
	return beam.ParDo(s, withWindow, stats.Count(s, keys))
}

func withWindow(w beam.Window, key string, n int) KeyCount {
	kc := KeyCount{Key: key, Count: int64(n)}
	if iw, ok := w.(window.IntervalWindow); ok {
		kc.WindowStart = iw.Start.ToTime().UTC()
		kc.WindowEnd = iw.End.ToTime().UTC()
	}
	return kc
}

// Tables renders the KeyCounts of each window of counts, a PCollection<KeyCount>, as one
// table (see FormatTable; header names the key column) and returns a PCollection<string>,
// one per window. All of a window's counts go to one worker.
func Tables(s beam.Scope, counts beam.PCollection, header string) beam.PCollection {
	s = s.Scope("count.Tables")
	grouped := beam.GroupByKey(s, beam.AddFixedKey(s, counts))
	return beam.ParDo(s, &tableFn{Header: header}, grouped)
}

// tableFn formats one window's counts.
type tableFn struct {
	Header string
}

func (fn *tableFn) ProcessElement(w beam.Window, _ int, iter func(*KeyCount) bool) string {
	var rows []KeyCount
	var kc KeyCount
	for iter(&kc) {
		rows = append(rows, kc)
	}
	title := "Window: global"
	if iw, ok := w.(window.IntervalWindow); ok {
		title = fmt.Sprintf("Window: %s to %s", iw.Start.ToTime().UTC().Format(time.RFC3339Nano), iw.End.ToTime().UTC().Format(time.RFC3339Nano))
	}
	return title + "\n" + FormatTable(fn.Header, rows)
}

// FormatTable renders rows as a table in the style of Spark's console sink, with columns
// header and "count", right-aligned, most frequent key first and ties in key order:
//
//	+-------+-----+
//	|   data|count|
//	+-------+-----+
//	|Kinesis|    2|
//	|    for|    1|
//	+-------+-----+
//
// The result ends with a newline. Window fields are ignored.
func FormatTable(header string, rows []KeyCount) string {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b KeyCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	keyWidth, countWidth := utf8.RuneCountInString(header), len("count")
	for _, r := range rows {
		keyWidth = max(keyWidth, utf8.RuneCountInString(r.Key))
		countWidth = max(countWidth, len(fmt.Sprint(r.Count)))
	}
	border := "+" + strings.Repeat("-", keyWidth) + "+" + strings.Repeat("-", countWidth) + "+\n"
	var b strings.Builder
	b.WriteString(border)
	fmt.Fprintf(&b, "|%*s|%*s|\n", keyWidth, header, countWidth, "count")
	b.WriteString(border)
	for _, r := range rows {
		// %*s pads by runes, matching the rune-based widths above.
		fmt.Fprintf(&b, "|%*s|%*d|\n", keyWidth, r.Key, countWidth, r.Count)
	}
	b.WriteString(border)
	return b.String()
}
