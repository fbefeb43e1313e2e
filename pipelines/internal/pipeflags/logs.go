package pipeflags

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
)

// sdkPrefix starts the lines Prism logs for the workers: the log lines of the pipeline's
// own code and of kinesisio, and the workers' reports of failed bundles.
const sdkPrefix = "[SDK] "

// prismInternal is the path of Prism's packages, whose own log lines are the runner's
// bookkeeping: jobs prepared and staged, stages and bundles, and the failures they report
// with the plan of the failed stage.
const prismInternal = "/runners/prism/internal"

// logFilter is the launcher's log handler. Verbose, it passes everything to next (Beam's
// text handler on standard error, at INFO). Otherwise it passes warnings and errors, but not
// Prism's own lines nor a worker's report of a failed bundle (which spans lines with the
// stage's plan): the job's failure is reported once, as the last line, by Main. After
// close it drops everything, so that no late line of a runner's goroutines follows that
// last line.
type logFilter struct {
	next    slog.Handler
	verbose bool
	closed  *atomic.Bool
}

func newLogFilter(next slog.Handler, verbose bool) *logFilter {
	return &logFilter{next: next, verbose: verbose, closed: new(atomic.Bool)}
}

// close drops every later record.
func (f *logFilter) close() { f.closed.Store(true) }

// Enabled implements slog.Handler.
func (f *logFilter) Enabled(ctx context.Context, level slog.Level) bool {
	if f.closed.Load() || !f.verbose && level < slog.LevelWarn {
		return false
	}
	return f.next.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (f *logFilter) Handle(ctx context.Context, r slog.Record) error {
	if f.closed.Load() || !f.verbose && !shown(r) {
		return nil
	}
	return f.next.Handle(ctx, r)
}

// shown reports whether a record is printed without --verbose.
func shown(r slog.Record) bool {
	if r.Level < slog.LevelWarn {
		return false
	}
	if strings.HasPrefix(r.Message, sdkPrefix) {
		return !strings.Contains(r.Message, "\n")
	}
	return !fromPrism(r.PC)
}

// fromPrism reports whether the code at pc is Prism's.
func fromPrism(pc uintptr) bool {
	if pc == 0 {
		return false
	}
	frame, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return strings.Contains(frame.Function, prismInternal)
}

// WithAttrs implements slog.Handler.
func (f *logFilter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logFilter{next: f.next.WithAttrs(attrs), verbose: f.verbose, closed: f.closed}
}

// WithGroup implements slog.Handler.
func (f *logFilter) WithGroup(name string) slog.Handler {
	return &logFilter{next: f.next.WithGroup(name), verbose: f.verbose, closed: f.closed}
}
