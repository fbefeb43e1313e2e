package pipeflags

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// Main is a pipeline command's main: it registers the command's flags on the command
// line, parses it, initializes Beam and runs the command with the configuration the flags
// filled in. If run fails, it prints "name: error" to standard error and exits with
// status 1.
func Main[C any](name string, register func(*C, *flag.FlagSet), run func(context.Context, C) error) {
	var cfg C
	register(&cfg, flag.CommandLine)
	flag.Parse()
	beam.Init()

	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
