package pipeflags

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
)

// usage returns the -help text of a pipeline: its own flags first, in groups (how to reach
// Kinesis, the read, the pipeline's, Flink's), then the Beam runner flags apart. Beam
// defines its flags on the same command line, so without this they are interleaved
// alphabetically with the pipeline's.
func usage[C any](name string, register func(*C, *flag.FlagSet)) func() {
	return func() {
		out := flag.CommandLine.Output()
		fmt.Fprintf(out, "Usage of %s (flags are --name=value):\n", name)
		seen := map[string]bool{}
		group := func(title string, names []string) {
			var fs []*flag.Flag
			for _, n := range names {
				if f := flag.Lookup(n); f != nil && !seen[n] {
					seen[n] = true
					fs = append(fs, f)
				}
			}
			if len(fs) == 0 {
				return
			}
			fmt.Fprintf(out, "\n%s:\n", title)
			for _, f := range fs {
				printFlag(out, f)
			}
		}
		var k Kinesis
		var s Source
		var l launch
		var c C
		var fl flinkrunner.Options
		group("Kinesis", append(namesOf(k.Register), "skip_preflight"))
		group("The read", namesOf(func(fs *flag.FlagSet) { s.Register(fs, time.Minute) }))
		group(name, append(namesOf(func(fs *flag.FlagSet) { register(&c, fs) }), namesOf(l.register)...))
		group("Flink (--runner=flink)", namesOf(fl.Register))
		var beam []string
		flag.VisitAll(func(f *flag.Flag) {
			if !seen[f.Name] {
				beam = append(beam, f.Name)
			}
		})
		group("Beam runner flags", beam)
	}
}

// namesOf returns the names of the flags register defines, in the order of flag.VisitAll.
func namesOf(register func(*flag.FlagSet)) []string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	register(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// printFlag prints one flag as flag.PrintDefaults does.
func printFlag(out interface{ Write([]byte) (int, error) }, f *flag.Flag) {
	var b strings.Builder
	fmt.Fprintf(&b, "  --%s", f.Name)
	typ, use := flag.UnquoteUsage(f)
	if typ != "" {
		b.WriteString(" " + typ)
	}
	b.WriteString("\n    \t")
	b.WriteString(strings.ReplaceAll(use, "\n", "\n    \t"))
	if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "[]" {
		if typ == "string" {
			fmt.Fprintf(&b, " (default %q)", f.DefValue)
		} else {
			fmt.Fprintf(&b, " (default %v)", f.DefValue)
		}
	}
	b.WriteString("\n")
	fmt.Fprint(out, b.String())
}
