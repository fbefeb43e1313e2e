package pipeflags

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/preflight"
)

// launch holds the flags of the launch itself, which Main defines for every pipeline.
type launch struct {
	// skipPreflight skips the checks before the launch (preflight).
	skipPreflight bool
	// verbose prints the runner's whole log, and a failed job's whole error before its cause.
	verbose bool
}

func (l *launch) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.skipPreflight, "skip_preflight", false, "launch without first checking, from this machine, that the streams, the checkpoint table and the S3 bucket answer with these credentials (for workers whose credentials or network the launcher lacks)")
	fs.BoolVar(&l.verbose, "verbose", false, "print the runner's whole log to standard error (Prism's job log, every log line of the workers) and a failed job's whole error; without it only warnings and errors are printed, and a failed job's cause is the last line")
}

// Main is a pipeline command's main: it registers the command's flags on the command
// line, parses it, initializes Beam, checks that the pipeline can reach what it uses (the
// plan cfg gives, unless --skip_preflight, --dry_run or --runner=vet) and runs the command
// with the configuration the flags filled in. A failed check, or a failed run, prints one
// line "name: what went wrong" to standard error, the last line the command prints, and
// exits with status 1; with --verbose a failed run's whole error comes before it.
func Main[C any](name string, register func(*C, *flag.FlagSet), plan func(C) (preflight.Plan, error), run func(context.Context, C) error) {
	var cfg C
	var l launch
	register(&cfg, flag.CommandLine)
	l.register(flag.CommandLine)
	flag.Usage = usage(name, register)
	flag.Parse()
	beam.Init() // a worker runs here and never returns

	logs := newLogFilter(slog.Default().Handler(), l.verbose)
	slog.SetDefault(slog.New(logs))
	ctx := context.Background()
	if !l.skipPreflight && preflightApplies() {
		p, err := plan(cfg)
		if err == nil {
			var notes []string
			notes, err = preflight.Run(ctx, p)
			for _, n := range notes {
				fmt.Fprintln(os.Stderr, name+":", n)
			}
		}
		if err != nil {
			exit(name, err.Error())
		}
	}
	err := run(ctx, cfg)
	logs.close() // a runner's goroutines may still log; the cause stays the last line
	if err != nil {
		if l.verbose {
			fmt.Fprintln(os.Stderr, name+":", err)
		}
		exit(name, Cause(err))
	}
}

// exit prints "name: line" to standard error and exits with status 1.
func exit(name, line string) {
	fmt.Fprintln(os.Stderr, name+":", line)
	os.Exit(1)
}

// preflightApplies reports whether the launch runs the pipeline: not for --runner=vet,
// which only checks the graph, nor for a Dataflow --dry_run, which only translates it.
func preflightApplies() bool {
	if f := flag.Lookup("runner"); f != nil && f.Value.String() == "vet" {
		return false
	}
	if f := flag.Lookup("dry_run"); f != nil && f.Value.String() == "true" {
		return false
	}
	return true
}
