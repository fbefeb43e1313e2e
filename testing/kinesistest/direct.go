package kinesistest

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Calls a test makes on the server directly, without HTTP, to set up a case or
// to check what the server holds.

// CreateStream creates a PROVISIONED stream with shardCount shards that split
// the hash key space evenly. The stream is ACTIVE at once, whatever the
// transition delay.
func (s *Server) CreateStream(name string, shardCount int) error {
	var v violations
	validateStreamName(name, "streamName", &v)
	if shardCount < 1 {
		v.add(fmt.Sprint(shardCount), "shardCount", "have value greater than or equal to 1")
	}
	err := v.err()
	if err == nil {
		err = s.addStream(name, modeProvisioned, shardCount, s.clock.Now().UnixMilli(), nil)
	}
	if err != nil {
		return fmt.Errorf("kinesistest: creating stream %q: %w", name, err)
	}
	return nil
}

// CreateOnDemandStream creates an ON_DEMAND stream with shardCount shards
// that split the hash key space evenly (the service picks an on-demand
// stream's shards itself; over HTTP this server gives it 4) and the given
// record distribution strategy, USER_PARTITION_KEY when empty. The stream is
// ACTIVE at once, whatever the transition delay.
func (s *Server) CreateOnDemandStream(name string, shardCount int, strategy types.RecordDistributionStrategy) error {
	var v violations
	validateStreamName(name, "streamName", &v)
	if shardCount < 1 {
		v.add(fmt.Sprint(shardCount), "shardCount", "have value greater than or equal to 1")
	}
	if strategy == "" {
		strategy = distributionUserKey
	}
	d := string(strategy)
	checkDistribution(&d, "recordDistributionStrategy", &v)
	err := v.err()
	if err == nil {
		err = s.addStream(name, modeOnDemand, shardCount, s.clock.Now().UnixMilli(), func(st *stream) { st.strategy = d })
	}
	if err != nil {
		return fmt.Errorf("kinesistest: creating stream %q: %w", name, err)
	}
	return nil
}

// StreamARN returns the ARN of stream name as the server reports it to a
// client in region us-east-1.
func (s *Server) StreamARN(name string) string { return streamARN(Region, name) }

// StoredRecord is a record as the server stores it.
type StoredRecord struct {
	ShardID         string
	SequenceNumber  string
	PartitionKey    string // empty when the producer sent none (AUTO streams only)
	ExplicitHashKey string // as the producer sent it; empty when it sent none
	Data            []byte
	ArrivalTime     time.Time // millisecond precision, on the server clock
}

// StreamRecords returns every record the stream retains, shard by shard in
// shard-number order, each shard's records in sequence-number order. Records
// past the retention period are gone, as they are for GetRecords.
func (s *Server) StreamRecords(stream string) ([]StoredRecord, error) {
	st, err := s.directStream(stream)
	if err != nil {
		return nil, err
	}
	nowMs := s.clock.Now().UnixMilli()
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []StoredRecord
	for _, sh := range st.liveShardsLocked(nowMs) {
		out = sh.appendStored(out, st.cutoffMsLocked(nowMs))
	}
	return out, nil
}

// ShardRecords returns the records one shard retains in sequence-number order.
func (s *Server) ShardRecords(stream, shardID string) ([]StoredRecord, error) {
	st, err := s.directStream(stream)
	if err != nil {
		return nil, err
	}
	nowMs := s.clock.Now().UnixMilli()
	st.mu.RLock()
	defer st.mu.RUnlock()
	sh := st.shardLocked(shardID, nowMs)
	if sh == nil {
		return nil, fmt.Errorf("kinesistest: records of %s/%s: %w", stream, shardID, errShardNotFound(shardID, stream))
	}
	return sh.appendStored(nil, st.cutoffMsLocked(nowMs)), nil
}

func (s *Server) directStream(name string) (*stream, error) {
	s.mu.RLock()
	st := s.streams[name]
	s.mu.RUnlock()
	if st == nil {
		return nil, fmt.Errorf("kinesistest: records of %q: %w", name, errStreamNotFound(name))
	}
	return st, nil
}

// appendStored appends copies of the shard's retained records to out.
func (sh *shard) appendStored(out []StoredRecord, cutoffMs int64) []StoredRecord {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.trimLocked(cutoffMs)
	for i := range sh.records {
		r := &sh.records[i]
		out = append(out, StoredRecord{
			ShardID:         sh.id,
			SequenceNumber:  r.seq,
			PartitionKey:    r.pk,
			ExplicitHashKey: r.ehk,
			Data:            append([]byte(nil), r.data...),
			ArrivalTime:     time.UnixMilli(r.arrivalMs),
		})
	}
	return out
}
