package kinesisio

import (
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/queue"
	"github.com/beamkinesis/beamkinesis/kinesisio/internal/wire"
)

func init() {
	beam.RegisterCoder(reflect.TypeOf((*queueToken)(nil)).Elem(), encodeQueueToken, decodeQueueToken)
	register.Emitter2[beam.EventTime, queueToken]()
}

// queueToken is what one call of a queue receiver slot emitted: the receipt handles of its
// records (one per queue delivery, whatever a KPL aggregate split into), when each was
// received, and the latest event time of the records, for a commit held until the sinks
// wrote them. It crosses a Reshuffle to the acknowledge step, which the runner reaches only
// once it committed the bundle that emitted the records.
type queueToken struct {
	Slot       int64
	Handles    []string
	ReceivedMs []int64
	MaxEventMs int64
}

// entries are the token's records as the Settler takes them.
func (t queueToken) entries() []queue.Entry {
	out := make([]queue.Entry, len(t.Handles))
	for i, h := range t.Handles {
		out[i] = queue.Entry{Handle: h}
		if i < len(t.ReceivedMs) {
			out[i].Received = time.UnixMilli(t.ReceivedMs[i])
		}
	}
	return out
}

const queueTokenV1 = 1

func encodeQueueToken(t queueToken) []byte {
	w := wire.NewWriter(queueTokenV1)
	w.Int(t.Slot)
	w.Strings(t.Handles)
	w.Int(int64(len(t.ReceivedMs)))
	for _, ms := range t.ReceivedMs {
		w.Int(ms)
	}
	w.Int(t.MaxEventMs)
	return w.Bytes()
}

func decodeQueueToken(b []byte) (queueToken, error) {
	r := wire.NewReader("queue token", b, queueTokenV1)
	t := queueToken{Slot: r.Int(), Handles: r.Strings()}
	n := r.Int()
	if n < 0 || n > int64(len(t.Handles)) {
		n = 0
	}
	t.ReceivedMs = make([]int64, n)
	for i := range t.ReceivedMs {
		t.ReceivedMs[i] = r.Int()
	}
	t.MaxEventMs = r.Int()
	return t, r.Err()
}
