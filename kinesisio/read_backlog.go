package kinesisio

import "time"

// The backlog estimate: how many bytes of a shard are unread, from what the reader saw of
// it. Dataflow scales streaming jobs on it (RestrictionSize) and the backlog_bytes gauge
// reports it.

const (
	// rateWindow is the span of arrival time over which the byte rate is measured, and
	// rateSamples the most responses it keeps.
	rateWindow  = 30 * time.Second
	rateSamples = 32
)

// rateSample is what one GetRecords response held: its bytes, the bytes of its first
// record, and the arrival times of its first and last record.
type rateSample struct {
	bytes, head   int64
	firstMs, last int64
}

// estimateBacklog is a shard's unread bytes: how far the last record read is behind the tip
// of the shard, in milliseconds of arrival time (MillisBehindLatest), times the rate at
// which bytes arrived in the shard over the most recent span of arrival time read
// (the last rateSamples responses within rateWindow):
//
//	backlog = MillisBehindLatest × (Σ bytes − first record's bytes) / (last arrival − first arrival)
//
// The first record's bytes are left out because they arrived at the start of the span, not
// during it. MillisBehindLatest is how far the first unread record is behind the tip, so
// with a steady producer the bytes that arrived in those last milliseconds are those
// unread. It is 0 when the reader is caught up (MillisBehindLatest 0). Records that all
// arrived within one millisecond count as their whole bytes over one millisecond.
//
// Polling and enhanced fan-out use the same formula. With enhanced fan-out the records are
// those of the SubscribeToShard events read, and a call that stops inside an event adds the
// bytes of the event's records it left unread. An event's MillisBehindLatest is how far it
// was behind when the service sent it, which is 0 for the events a slow reader has not read
// yet (the service pushes them as records arrive, up to the client's HTTP/2 stream window):
// for an event sent caught up whose last record is more than 500 ms old on the worker's
// clock, the record's age stands for MillisBehindLatest (eventLagMs). So a reader less than
// 500 ms behind reports only the rest of the event it stopped inside.
func estimateBacklog(samples []rateSample, millisBehind int64) float64 {
	if millisBehind <= 0 || len(samples) == 0 {
		return 0
	}
	var bytes int64
	first, last := samples[0].firstMs, samples[0].last
	for _, s := range samples {
		bytes += s.bytes
		first, last = min(first, s.firstMs), max(last, s.last)
	}
	span := last - first
	if span <= 0 {
		return float64(millisBehind) * float64(bytes)
	}
	return float64(millisBehind) * float64(bytes-samples[0].head) / float64(span)
}
