package pipeflags

import "strings"

// doFnFailed ends the line with which the Go SDK reports a DoFn's error in a failed
// bundle ("DoFn[UID:8, PID:..., Name: ...] failed:"); the DoFn's own error follows on the
// next line. Runners pass the report back as text: Prism as it is, Flink inside a Java
// exception and its stack trace.
const doFnFailed = "] failed:\n"

// Cause returns the one line that says why a run failed. For a job that failed on its
// runner it is the error the failing DoFn returned, without the runner's plan dump and
// stack traces: "the job failed: <the DoFn's error>". Other errors are their own text,
// or its last line that is not a stack frame.
func Cause(err error) string {
	text := err.Error()
	if i := strings.LastIndex(text, doFnFailed); i >= 0 {
		rest := text[i+len(doFnFailed):]
		if line := firstLine(rest); line != "" {
			return "the job failed: " + line
		}
	}
	if !strings.Contains(text, "\n") {
		return text
	}
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && l != "caused by:" && !strings.HasPrefix(l, "at ") {
			return l
		}
	}
	return strings.Join(strings.Fields(text), " ")
}

// firstLine is s's first non-empty line, trimmed.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
