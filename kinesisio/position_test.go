package kinesisio

import (
	"strings"
	"testing"
	"time"
)

func TestRecordPositionsCompareNumericallyWith56DigitSequenceNumbers(t *testing.T) {
	cases := []struct {
		a, b recordPosition
		want int
	}{
		{recordPosition{seqA, 0}, recordPosition{seqB, 0}, -1},
		{recordPosition{seqB, 0}, recordPosition{seqA, 9}, 1},
		{recordPosition{seqA, 3}, recordPosition{seqA, 3}, 0},
		{recordPosition{seqA, 3}, recordPosition{seqA, 4}, -1},
		// 56 digits against 55: lexical order would say the opposite.
		{recordPosition{"9959033827149025660855969253836157109592157598913658889", 7}, recordPosition{seqA, 0}, -1},
		{recordPosition{"10000000000000000000000000000000000000000000000000000000", 0}, recordPosition{"9999999999999999999999999999999999999999999999999999999", 99}, 1},
	}
	for _, c := range cases {
		if got := c.a.compare(c.b); got != c.want {
			t.Errorf("%v.compare(%v) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := c.b.compare(c.a); got != -c.want {
			t.Errorf("%v.compare(%v) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

func TestParseStartingPositionAcceptsTheSparkForms(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		in   string
		want string
	}{
		{"latest", "LATEST"},
		{" LATEST ", "LATEST"},
		{"trim_horizon", "TRIM_HORIZON"},
		{"Earliest", "TRIM_HORIZON"},
		{"AT_TIMESTAMP 2026-01-02T03:04:05Z", AtTimestamp(at).String()},
		{`{"metadata":{"streamName":"s","batchId":"7"},
		   "shardId-000000000001":{"iteratorType":"AFTER_SEQUENCE_NUMBER","iteratorPosition":"` + seqA + `"},
		   "shardId-000000000000":{"iteratorType":"AT_SEQUENCE_NUMBER","iteratorPosition":"` + seqB + `"},
		   "shardId-000000000002":{"iteratorType":"TRIM_HORIZON","iteratorPosition":""},
		   "shardId-000000000003":{"iteratorType":"AT_TIMESTAMP","iteratorPosition":"1767323045000"}}`,
			"SHARD_POSITIONS(shardId-000000000000 AT_SEQUENCE_NUMBER " + seqB + ", shardId-000000000001 AFTER_SEQUENCE_NUMBER " + seqA +
				", shardId-000000000002 TRIM_HORIZON, shardId-000000000003 AT_TIMESTAMP 2026-01-02T03:04:05Z)"},
	}
	for _, c := range cases {
		p, err := ParseStartingPosition(c.in)
		if err != nil {
			t.Errorf("ParseStartingPosition(%q): %v", c.in, err)
			continue
		}
		if p.String() != c.want {
			t.Errorf("ParseStartingPosition(%q) = %s, want %s", c.in, p, c.want)
		}
	}
}

func TestParseStartingPositionRejectsBadInput(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"newest", "not latest"},
		{"AT_TIMESTAMP yesterday", "neither epoch milliseconds nor RFC 3339"},
		{`{"shardId-0":{"iteratorType":"AFTER_SEQUENCE_NUMBER","iteratorPosition":"12a"}}`, "not a decimal"},
		{`{"shardId-0":{"iteratorType":"SHARD_END","iteratorPosition":""}}`, "iterator type"},
		{`{"shardId-0":`, "not valid JSON"},
		{`{}`, "at least one shard"},
	} {
		_, err := ParseStartingPosition(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseStartingPosition(%q) error = %v, want one mentioning %q", c.in, err, c.want)
		}
	}
}

func TestStartSpecResolvesLatestToTheReadStart(t *testing.T) {
	spec := Latest().spec()
	if k, _, ms := spec.forShard("shardId-000000000000", 777); k != startAtTimestamp || ms != 777 {
		t.Errorf("Latest resolved to %s at %d, want AT_TIMESTAMP at 777", startKindName(k), ms)
	}
	spec = ShardPositions(AfterSequenceNumber("shardId-000000000001", seqA)).spec()
	if k, seq, _ := spec.forShard("shardId-000000000001", 777); k != startAfterSequence || seq != seqA {
		t.Errorf("listed shard resolved to %s %s", startKindName(k), seq)
	}
	if k, _, _ := spec.forShard("shardId-000000000009", 777); k != startTrimHorizon {
		t.Errorf("unlisted shard resolved to %s, want TRIM_HORIZON", startKindName(k))
	}
}
