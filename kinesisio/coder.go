package kinesisio

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/wire"
)

// The connector's internal values that cross a runner — the shard descriptors between
// discovery and the readers, and the restrictions of both splittable DoFns — have coders of
// their own. Beam sends such coders to the runner length-prefixed under a Go-only URN, so a
// runner moves the bytes without looking inside. With Beam's schema (row) coder instead,
// Java runners decode and re-encode the values between stages, and a nil slice comes back
// misaligned (a discovery restriction with no shards yet decoded on Flink as an end time of
// 112 ms after 1970, so no record could be claimed).
//
// Each encoding starts with a format version; a change of fields gets a new version, and
// the decoder keeps reading the old ones so that a job can be restored from a checkpoint or
// savepoint that an earlier release wrote.
func init() {
	beam.RegisterCoder(reflect.TypeOf((*shardDescriptor)(nil)).Elem(), encodeShardDescriptor, decodeShardDescriptor)
	beam.RegisterCoder(reflect.TypeOf((*shardRestriction)(nil)).Elem(), encodeShardRestriction, decodeShardRestriction)
	beam.RegisterCoder(reflect.TypeOf((*discoveryRestriction)(nil)).Elem(), encodeDiscoveryRestriction, decodeDiscoveryRestriction)
}

// Format versions of the encodings.
const (
	shardDescriptorV2      = 2
	shardRestrictionV1     = 1
	discoveryRestrictionV1 = 1
)

func encodeShardDescriptor(d shardDescriptor) []byte {
	w := wire.NewWriter(shardDescriptorV2)
	w.String(d.Stream)
	w.String(d.ShardID)
	w.String(d.ParentShardID)
	w.String(d.AdjacentParentShardID)
	w.String(d.StartingHashKey)
	w.String(d.EndingHashKey)
	w.Int(d.StartKind)
	w.String(d.StartSeq)
	w.Int(d.StartTimeMs)
	w.Int(d.EndTimeMs)
	w.Int(d.StartSub)
	return w.Bytes()
}

func decodeShardDescriptor(b []byte) (shardDescriptor, error) {
	r := wire.NewReader("shard descriptor", b, shardDescriptorV2)
	d := shardDescriptor{
		Stream:                r.String(),
		ShardID:               r.String(),
		ParentShardID:         r.String(),
		AdjacentParentShardID: r.String(),
		StartingHashKey:       r.String(),
		EndingHashKey:         r.String(),
		StartKind:             r.Int(),
		StartSeq:              r.String(),
		StartTimeMs:           r.Int(),
		EndTimeMs:             r.Int(),
		StartSub:              r.Int(),
	}
	return d, r.Err()
}

func encodeShardRestriction(x shardRestriction) []byte {
	w := wire.NewWriter(shardRestrictionV1)
	w.Int(x.StartKind)
	w.String(x.StartSeq)
	w.Int(x.StartSub)
	w.Int(x.StartTimeMs)
	w.Int(x.VerifiedMs)
	w.String(x.EndSeq)
	w.Int(x.EndSub)
	w.Bool(x.Empty)
	w.Int(x.EndTimeMs)
	w.Int(x.MaxRecords)
	w.Int(x.Claimed)
	return w.Bytes()
}

func decodeShardRestriction(b []byte) (shardRestriction, error) {
	r := wire.NewReader("shard restriction", b, shardRestrictionV1)
	x := shardRestriction{
		StartKind:   r.Int(),
		StartSeq:    r.String(),
		StartSub:    r.Int(),
		StartTimeMs: r.Int(),
		VerifiedMs:  r.Int(),
		EndSeq:      r.String(),
		EndSub:      r.Int(),
		Empty:       r.Bool(),
		EndTimeMs:   r.Int(),
		MaxRecords:  r.Int(),
		Claimed:     r.Int(),
	}
	return x, r.Err()
}

func encodeDiscoveryRestriction(x discoveryRestriction) []byte {
	w := wire.NewWriter(discoveryRestrictionV1)
	w.Strings(x.Shards)
	w.Int(x.LastPollMs)
	w.Int(x.ReadStartMs)
	w.Int(x.EndTimeMs)
	w.Bool(x.Done)
	return w.Bytes()
}

func decodeDiscoveryRestriction(b []byte) (discoveryRestriction, error) {
	r := wire.NewReader("discovery restriction", b, discoveryRestrictionV1)
	x := discoveryRestriction{
		Shards:      r.Strings(),
		LastPollMs:  r.Int(),
		ReadStartMs: r.Int(),
		EndTimeMs:   r.Int(),
		Done:        r.Bool(),
	}
	return x, r.Err()
}
