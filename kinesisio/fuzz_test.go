package kinesisio

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzParseStartingPosition feeds arbitrary text to ParseStartingPosition, which parses a
// user's --starting_position flag. It must never panic; an error must say what it parsed;
// and an accepted position must be usable: it builds the read's start spec, which places
// every shard (listed or not) and filters ListShards without panicking.
func FuzzParseStartingPosition(f *testing.F) {
	for _, s := range []string{
		"latest", "TRIM_HORIZON", " earliest ", "AT_TIMESTAMP 2026-11-30T14:00:00Z", "at_timestamp 1764511200000",
		`{"shardId-000000000000": {"iteratorType": "AFTER_SEQUENCE_NUMBER", "iteratorPosition": "49590338271490256608559692538361571095921575989136588898"},
		  "shardId-000000000001": {"iteratorType": "TRIM_HORIZON", "iteratorPosition": ""}, "metadata": {"streamName": "s"}}`,
		`{"shardId-000000000002": {"iteratorType": "AT_TIMESTAMP", "iteratorPosition": "2026-11-30T14:00:00.5Z"}}`,
		`{"shardId-000000000003": {"iteratorType": "AT_SEQUENCE_NUMBER", "iteratorPosition": "-1"}}`,
		`{"": {}}`, `{`, "AT_TIMESTAMP", "", "{\"x\": []}",
	} {
		f.Add(s)
	}
	now := time.UnixMilli(1764600000000)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseStartingPosition(s)
		if err != nil {
			if !strings.Contains(err.Error(), "starting position") {
				t.Errorf("ParseStartingPosition(%q) error %q does not say it is about the starting position", s, err)
			}
			return
		}
		spec := p.spec()
		for _, shard := range []string{"shardId-000000000000", "shardId-000000000001", "shardId-999999999999"} {
			kind, _, _ := spec.forShard(shard, now.UnixMilli())
			if kind == startLatest {
				t.Errorf("ParseStartingPosition(%q) places %s at LATEST; the read turns LATEST into AT_TIMESTAMP of its start", s, shard)
			}
		}
		_ = spec.listFilter(now.UnixMilli())
	})
}

// FuzzInternalDecoders feeds arbitrary bytes to the decoders of the values that cross a
// runner (a runner hands them back from checkpoints and savepoints). They must never panic,
// and whatever decodes must encode and decode again to the same value.
func FuzzInternalDecoders(f *testing.F) {
	for _, v := range internalValues() {
		switch x := v.(type) {
		case discoveryRestriction:
			f.Add(encodeDiscoveryRestriction(x))
		case shardRestriction:
			f.Add(encodeShardRestriction(x))
		case shardDescriptor:
			f.Add(encodeShardDescriptor(x))
		case commitToken:
			f.Add(encodeCommitToken(x))
		}
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := decodeShardDescriptor(b); err == nil {
			if again, err := decodeShardDescriptor(encodeShardDescriptor(d)); err != nil || again != d {
				t.Errorf("descriptor %#v re-decoded as %#v, %v", d, again, err)
			}
		}
		if r, err := decodeShardRestriction(b); err == nil {
			if again, err := decodeShardRestriction(encodeShardRestriction(r)); err != nil || again != r {
				t.Errorf("shard restriction %#v re-decoded as %#v, %v", r, again, err)
			}
		}
		if tok, err := decodeCommitToken(b); err == nil {
			if again, err := decodeCommitToken(encodeCommitToken(tok)); err != nil || again != tok {
				t.Errorf("commit token %#v re-decoded as %#v, %v", tok, again, err)
			}
		}
		if r, err := decodeDiscoveryRestriction(b); err == nil {
			if r.Shards == nil {
				t.Errorf("discovery restriction decoded with nil shards")
			}
			if again, err := decodeDiscoveryRestriction(encodeDiscoveryRestriction(r)); err != nil || !reflect.DeepEqual(again, r) {
				t.Errorf("discovery restriction %#v re-decoded as %#v, %v", r, again, err)
			}
		}
	})
}
