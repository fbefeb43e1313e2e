package main

import (
	"testing"
	"time"
)

func TestDupCauseIsTheLatestRestartBetweenTheCopies(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	events := []event{{at: at(10), cause: "kill"}, {at: at(20), cause: "savepoint"}}
	for _, c := range []struct {
		first, dup int
		want       string
	}{
		{first: 1, dup: 5, want: withinRun},    // both copies before any restart
		{first: 9, dup: 12, want: "kill"},      // the kill's replay
		{first: 9, dup: 10, want: "kill"},      // a copy stored at the event's millisecond
		{first: 10, dup: 12, want: withinRun},  // first copy at the kill: not before it
		{first: 12, dup: 15, want: withinRun},  // both within the restored run
		{first: 5, dup: 25, want: "savepoint"}, // the latest restart between the copies
		{first: 21, dup: 30, want: withinRun},
	} {
		if got := dupCause(events, at(c.first), at(c.dup)); got != c.want {
			t.Errorf("dupCause(first %ds, dup %ds) = %q, want %q", c.first, c.dup, got, c.want)
		}
	}
}

// The counters read from Flink's REST API get the names the ledger shows on Prism.
func TestCounterNameFromFlink(t *testing.T) {
	for flinkName, want := range map[string]string{
		"kinesisio_throttles":             "kinesisio/throttles",
		"kinesisio_Write_retries":         "kinesisio.Write/retries",
		"kinesisio_Write_failed_messages": "kinesisio.Write/failed_messages",
		"soak_failed_messages":            "soak/failed_messages",
		"other_x":                         "other_x",
	} {
		if got := counterName(flinkName); got != want {
			t.Errorf("counterName(%q) = %q, want %q", flinkName, got, want)
		}
	}
}
