package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// queueSpec is one --queues entry: a queue on a stream, with the queue's
// visibility timeout (0: the service's 30 s).
type queueSpec struct {
	name       string
	stream     string
	visibility time.Duration
}

// parseQueues reads "name:stream[:visibility],..."; visibility is whole
// seconds, as a number ("60") or a duration ("1m").
func parseQueues(s string) ([]queueSpec, error) {
	var specs []queueSpec
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := strings.Split(part, ":")
		if len(fields) < 2 || len(fields) > 3 || fields[0] == "" || fields[1] == "" {
			return nil, fmt.Errorf("--queues: %q: want name:stream[:visibility]", part)
		}
		sp := queueSpec{name: fields[0], stream: fields[1]}
		if len(fields) == 3 {
			d, err := parseSeconds(fields[2])
			if err != nil {
				return nil, fmt.Errorf("--queues: %q: visibility %w", part, err)
			}
			sp.visibility = d
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

// parseSeconds reads a whole number of seconds in 0..43200, bare or as a
// duration.
func parseSeconds(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if n, nerr := strconv.Atoi(s); nerr == nil {
		d, err = time.Duration(n)*time.Second, nil
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is neither seconds nor a duration", s)
	case d < 0 || d > 43200*time.Second || d%time.Second != 0:
		return 0, fmt.Errorf("%q must be whole seconds between 0 and 43200", s)
	}
	return d, nil
}

// createQueues creates the queues of specs, each on its stream: a stream that
// --streams did not create is created ON_DEMAND (4 shards); one it created
// PROVISIONED is refused, since queues need ON_DEMAND. It returns the lines to
// print: each stream it created and each queue's ARN.
func createQueues(srv *kinesistest.Server, specs []queueSpec, streams []streamSpec) ([]string, error) {
	var lines []string
	modes := map[string]string{}
	for _, st := range streams {
		modes[st.name] = st.mode
	}
	for _, q := range specs {
		switch mode, ok := modes[q.stream]; {
		case !ok:
			if err := srv.CreateOnDemandStream(q.stream, 4, types.RecordDistributionStrategyUserPartitionKey); err != nil {
				return nil, fmt.Errorf("--queues: creating stream %s for queue %s: %w", q.stream, q.name, err)
			}
			modes[q.stream] = modeOnDemand
			lines = append(lines, fmt.Sprintf("kinesis-server created stream %s (on-demand, 4 shards) for queue %s", q.stream, q.name))
		case mode == modeProvisioned:
			return nil, fmt.Errorf("--queues: queue %s: stream %s is provisioned, and queues need an on-demand stream; give it as %s:N:on-demand (or auto) in --streams",
				q.name, q.stream, q.stream)
		}
		arn, err := srv.CreateQueue(q.name, q.stream, kinesistest.QueueConfig{VisibilityTimeout: q.visibility})
		if err != nil {
			return nil, fmt.Errorf("--queues: %w", err)
		}
		lines = append(lines, fmt.Sprintf("kinesis-server queue %s on stream %s: %s", q.name, q.stream, arn))
	}
	return lines, nil
}
