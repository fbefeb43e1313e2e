package checkpoint

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// maxSamples bounds the latency and lag samples a Checkpointer keeps.
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
	// records holds the committed records per shard since the Checkpointer was opened.
	records map[string]int64
	// latency and lag are the samples not taken yet; recentLatency and recentLag the last
	// maxSamples of each.
	latency, lag, recentLatency, recentLag []int64
	// taken is what TakeStats returned so far.
	taken Stats
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
	s.recentLatency = appendRecent(s.recentLatency, latencyMs)
	s.recentLag = appendRecent(s.recentLag, lagMs)
}

// appendBounded appends v unless q holds maxSamples already.
func appendBounded(q []int64, v int64) []int64 {
	if len(q) >= maxSamples {
		return q
	}
	return append(q, v)
}

// appendRecent appends v, dropping the oldest sample once q holds maxSamples.
func appendRecent(q []int64, v int64) []int64 {
	if len(q) >= maxSamples {
		q = q[1:]
	}
	return append(q, v)
}

// Stats returns everything counted since c was opened, with the last 10,000 latency and
// lag samples.
func (c *Checkpointer) Stats() Stats {
	s := &c.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Commits: s.commits.Load(), Calls: s.calls.Load(), ShardEnds: s.shardEnds.Load(),
		LeasesLost: s.lost.Load(), Renewals: s.renewals.Load(), Unavailable: s.unavailable.Load(),
		Records:   maps.Clone(s.records),
		LatencyMs: slices.Clone(s.recentLatency),
		LagMs:     slices.Clone(s.recentLag),
	}
}

// TakeStats returns what was counted since the last TakeStats, with the samples taken
// since, for the caller to report as metrics. Every caller sees each count once.
func (c *Checkpointer) TakeStats() Stats {
	s := &c.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	now := Stats{
		Commits: s.commits.Load(), Calls: s.calls.Load(), ShardEnds: s.shardEnds.Load(),
		LeasesLost: s.lost.Load(), Renewals: s.renewals.Load(), Unavailable: s.unavailable.Load(),
		Records: maps.Clone(s.records),
	}
	last := s.taken
	s.taken = now
	out := Stats{
		Commits: now.Commits - last.Commits, Calls: now.Calls - last.Calls, ShardEnds: now.ShardEnds - last.ShardEnds,
		LeasesLost: now.LeasesLost - last.LeasesLost, Renewals: now.Renewals - last.Renewals, Unavailable: now.Unavailable - last.Unavailable,
		LatencyMs: s.latency, LagMs: s.lag,
	}
	for shard, n := range now.Records {
		if d := n - last.Records[shard]; d > 0 {
			if out.Records == nil {
				out.Records = map[string]int64{}
			}
			out.Records[shard] = d
		}
	}
	s.latency, s.lag = nil, nil
	return out
}
