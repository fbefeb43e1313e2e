package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// readerNote says how often Beam Java started KinesisIO's reader, and how many of the closes
// before those starts waited 30 s for a shard's thread.
func readerNote(r anchorRun) string {
	s := fmt.Sprintf("%d reader starts", r.Java.ReaderStarts)
	if r.Got.Count > 0 {
		s = fmt.Sprintf("first record after %.1fs; %s", r.Java.First.Seconds(), s)
	}
	if r.Java.StuckCloses > 0 {
		s += fmt.Sprintf(", %d of the closes blocked 30 s", r.Java.StuckCloses)
	}
	return s
}

// writtenNote describes what a write stored for n messages.
func writtenNote(st storedStats, n int64) string {
	s := fmt.Sprintf("%s Kinesis records", group(st.Records))
	if multi := st.Records - st.Singles; st.Singles > 0 && multi > 0 {
		s += fmt.Sprintf(" (%s carrying one message; the other %s ≈ %s messages each)", group(st.Singles), group(multi), group((n-st.Singles+multi/2)/multi))
	} else if st.Records > 0 {
		s += fmt.Sprintf(" (≈ %s messages each)", group((n+st.Records/2)/st.Records))
	}
	return s
}

func orderNote(c reshardCase, spans map[string]shardSpan) string {
	if v := orderViolations(c, spans); len(v) > 0 {
		return "order: " + strings.Join(v, "; ")
	}
	return "every child after its parents"
}

// exactness says whether got is the expected multiset.
func exactness(r anchorRun, want multiset) string {
	switch {
	case !r.Complete:
		return fmt.Sprintf("✗ not finished at the timeout: %s of %s delivered", group(r.Got.Count), group(want.Count))
	case r.Got == want:
		return "✓ exact"
	case r.Got.Count == want.Count:
		return "✗ same count, different records (duplicates replacing losses)"
	default:
		return fmt.Sprintf("✗ %s of %s records", group(r.Got.Count), group(want.Count))
	}
}

func cellFor(r anchorRun, want multiset, note string) string {
	if r.Wall == 0 {
		if note == "" {
			return "–"
		}
		return note
	}
	s := fmt.Sprintf("%s; %s rec/s (%.2fs); CPU %.2fs; peak RSS %s", exactness(r, want), group(int64(r.rate()+0.5)), r.Wall.Seconds(), r.CPU.Seconds(), mib(float64(r.PeakRSS)))
	if note != "" {
		s += "; " + note
	}
	return s
}

// writeAnchorsTable prints the pass as markdown.
func writeAnchorsTable(w io.Writer, m Machine, mode string, a *anchorsResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "beamkinesis vs Beam Java KinesisIO (%s), %s\n\n", mode, m.Start.Format(time.RFC3339))
	fmt.Fprintf(&b, "Machine: %s, %d cores, %s, load average at start %s. beamkinesis on Prism (Go SDK, in process); "+
		"Beam Java %s KinesisIO (sdks/java/io/amazon-web-services2) on the Java DirectRunner (immutability and encodability checks off; reads with %s unless the case says otherwise), %s. "+
		"One kinesistest server in a child process. Rates are records over the job's wall time (Java: from Pipeline.run; Go: from beam.Run), "+
		"CPU and peak RSS are the whole process's (the JVM's rusage; this process's rusage and VmHWM).\n\n",
		m.CPU, m.Cores, m.GoVersion, m.LoadAvg, a.BeamJava, strings.Join(a.JavaRead, " "), javaVersion())
	b.WriteString("| Case | beamkinesis | Beam Java KinesisIO | beamkinesis ÷ Java |\n|---|---|---|---|\n")
	for _, r := range a.Rows {
		ratio := "–"
		if r.Java.Got.Count > 0 && r.Java.Wall > 0 && r.Ours.Wall > 0 {
			ratio = fmt.Sprintf("CPU %s; peak RSS %s", times(r.Ours.CPU.Seconds()/max(r.Java.CPU.Seconds(), 1e-9)),
				times(float64(r.Ours.PeakRSS)/max(float64(r.Java.PeakRSS), 1)))
			if r.Java.Complete {
				ratio = fmt.Sprintf("rec/s %s; ", times(r.Ours.rate()/r.Java.rate())) + ratio
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(r.Case), cell(cellFor(r.Ours, r.Want, r.OursNote)), cell(cellFor(r.Java, r.Want, r.JavaNote)), ratio)
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(&b, "\nLoad average at the end: %s.\n", strings.Join(strings.Fields(string(load))[:3], " "))
	}
	if a.Built != "up to date" {
		fmt.Fprintf(&b, "\nMaven build of the Java anchor: %s, %v.\n", a.Built, a.Build.Round(time.Second))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// times formats a ratio with three significant digits.
func times(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f×", r)
	}
	return strconv.FormatFloat(r, 'g', 3, 64) + "×"
}
