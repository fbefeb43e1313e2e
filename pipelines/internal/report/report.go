// Package report makes a pipeline's failed writes visible: each message kinesisio.Write
// could not write is logged with its reason and counted, and the count can be read back
// from the pipeline's result.
package report

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio"
)

func init() {
	register.DoFn2x0[context.Context, kinesisio.FailedMessage](&failureFn{})
}

// FailedMessagesCounter is the name of the counter Failures increments.
const FailedMessagesCounter = "failed_messages"

// Failures logs and counts, in namespace's FailedMessagesCounter, each message of failed,
// the PCollection<kinesisio.FailedMessage> of kinesisio.Write.
func Failures(s beam.Scope, namespace string, failed beam.PCollection) {
	s = s.Scope("report.Failures")
	beam.ParDo0(s, &failureFn{Namespace: namespace}, failed)
}

// failureFn logs and counts one failed message.
type failureFn struct {
	Namespace string
}

func (fn *failureFn) ProcessElement(ctx context.Context, f kinesisio.FailedMessage) {
	beam.NewCounter(fn.Namespace, FailedMessagesCounter).Inc(ctx, 1)
	log.Warnf(ctx, "%s: could not write a %d-byte message with partition key %q after %d attempts: %s (%s)",
		fn.Namespace, len(f.Data), f.PartitionKey, f.Attempts, f.Reason, f.ErrorCode)
}

// FailedCount returns the number of failed messages Failures counted in namespace, as res
// reports it (committed values where the runner has them, else attempted ones).
func FailedCount(res beam.PipelineResult, namespace string) int64 {
	return Counter(res, namespace, FailedMessagesCounter)
}

// Counter returns the sum of the counters named name in namespace in res.
func Counter(res beam.PipelineResult, namespace, name string) int64 {
	if res == nil {
		return 0
	}
	var n int64
	for _, c := range res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == namespace && r.Name() == name
	}).Counters() {
		n += c.Result()
	}
	return n
}
