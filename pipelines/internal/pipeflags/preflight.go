package pipeflags

import (
	"os"

	"github.com/beamkinesis/beamkinesis/pipelines/internal/preflight"
)

// Plan returns what a pipeline's launch checks (package preflight): Kinesis as k reaches
// it, the streams given, and src's queue (--queue) and checkpoint table when src is not
// nil. No streams and no queue (the embedded demo) check nothing. demo says how to run the
// pipeline without AWS.
func Plan(k Kinesis, src *Source, demo string, streams ...preflight.Stream) (preflight.Plan, error) {
	var p preflight.Plan
	for _, s := range streams {
		if s.Name != "" {
			p.Streams = append(p.Streams, s)
		}
	}
	if src != nil && src.Queue != "" && src.Queue != EmbeddedQueue {
		p.Queues = append(p.Queues, preflight.Queue{ARN: src.Queue, Flag: "--queue"})
	}
	if len(p.Streams) == 0 && len(p.Queues) == 0 {
		return preflight.Plan{}, nil
	}
	settings, err := k.Settings(os.Getenv)
	if err != nil {
		return preflight.Plan{}, err
	}
	p.Kinesis, p.Demo = settings, demo
	if src != nil {
		p.Table = preflight.Table{Name: src.Table.Name, Endpoint: src.Table.Endpoint}
	}
	return p, nil
}
