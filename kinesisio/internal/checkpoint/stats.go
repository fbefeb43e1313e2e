package checkpoint

import (
	"sync"
	"sync/atomic"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// maxSamples bounds the latency and lag samples a Checkpointer keeps until they are taken.
const maxSamples = 10000

// Stats counts what a Checkpointer did: commits written, DynamoDB calls (retries
// included), SHARD_END commits, leases lost to another owner, lease renewals, and commits
// (and SHARD_END preparations) held because the table was unreachable.
type Stats struct {
	Commits, Calls, ShardEnds, LeasesLost, Renewals, Unavailable int64
	// Records counts, per shard id, the user records the committed positions cover.
	Records map[string]int64
	// LatencyMs and LagMs are commits' write latencies and lags (from the end of the
	// reader call that reached the position to the written item), in milliseconds.
	LatencyMs, LagMs []int64
}

// stats are counted on any goroutine.
type stats struct {
	commits, calls, shardEnds, lost, renewals, unavailable atomic.Int64

	mu sync.Mutex
	// records, latency and lag are what was counted since the last TakeStats.
	records      map[string]int64
	latency, lag []int64
}

// committed counts a commit of tok that took latencyMs and came lagMs after its reader call.
func (s *stats) committed(tok Token, latencyMs, lagMs int64) {
	s.commits.Add(1)
	if tok.Seq == leasetable.ShardEnd {
		s.shardEnds.Add(1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records == nil {
		s.records = map[string]int64{}
	}
	s.records[tok.ShardID] += tok.Records
	s.latency = appendBounded(s.latency, latencyMs)
	s.lag = appendBounded(s.lag, lagMs)
}

// appendBounded appends v unless q holds maxSamples already.
func appendBounded(q []int64, v int64) []int64 {
	if len(q) >= maxSamples {
		return q
	}
	return append(q, v)
}

// TakeStats returns what was counted since the last TakeStats and starts again from zero,
// for the caller to report as metrics: every count is returned once.
func (c *Checkpointer) TakeStats() Stats {
	s := &c.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{
		Commits: s.commits.Swap(0), Calls: s.calls.Swap(0), ShardEnds: s.shardEnds.Swap(0),
		LeasesLost: s.lost.Swap(0), Renewals: s.renewals.Swap(0), Unavailable: s.unavailable.Swap(0),
		Records: s.records, LatencyMs: s.latency, LagMs: s.lag,
	}
	s.records, s.latency, s.lag = nil, nil, nil
	return out
}
