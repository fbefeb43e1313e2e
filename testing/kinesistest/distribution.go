package kinesistest

// Service-managed record distribution: on a stream whose strategy is AUTO the
// service, not the producer, places records. It ignores partition keys and
// explicit hash keys, accepts records without a key and spreads records
// "evenly across shards using service-managed algorithms" (the API
// reference); the algorithm is not documented.
//
// This server deals records to the open shards in turn, in hash key order,
// with one counter per stream shared by every producer and request: of N
// records written to k open shards, each shard gets N/k rounded down or up,
// and a test can tell exactly where each one went. A record that fails
// (throttled in limits mode, or an injected fault) uses up its turn.

// autoShardLocked is the shard of the next record placed by the AUTO
// strategy. Caller holds the stream's read lock, under which the open shards
// do not change.
func (st *stream) autoShardLocked() *shard {
	n := st.autoNext.Add(1) - 1
	return st.open[n%uint64(len(st.open))]
}

// autoDistribution reports whether the stream places records itself now.
func (st *stream) autoDistribution() bool {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.strategy == distributionAuto
}

// checkDistribution adds a violation to v unless s, when given, is a
// RecordDistributionStrategy of the model; member is the request member it
// came from.
func checkDistribution(s *string, member string, v *violations) {
	if s != nil && *s != distributionAuto && *s != distributionUserKey {
		v.add(*s, member, "satisfy enum value set: [AUTO, USER_PARTITION_KEY]")
	}
}
