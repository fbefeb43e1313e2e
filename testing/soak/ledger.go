package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/kpl"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// ledger is the account of a run: what the producer stored in the input stream and what
// the output stream holds. Only a message stored in the input and missing from the output
// is lost; one the producer gave up before storing it is counted apart.
type ledger struct {
	produced, stored, notStored, inputDuplicates             int
	delivered, lost, duplicates, orderViolations, unparsable int
	late                                                     int
	latencies                                                []time.Duration
	missing                                                  []string
	elapsed                                                  time.Duration
	chaos                                                    string
	memory                                                   memoryReport
	counters                                                 map[string]int64
	// dupCauses counts the duplicates by what made them.
	dupCauses map[string]int
	// flink is what happened to the job on Flink; nil on other runners.
	flink *flinkReport
	// outage is how the job came back after the outage; nil without one.
	outage *outageReport
	// mode, when not empty, names the read instead of polling or enhanced fan-out.
	mode string
}

// withinRun is the cause of a duplicate whose copies were all written by one run of the
// job: a PutRecords retried after its response was lost, or a bundle retried by the
// runner.
const withinRun = "within one run (a PutRecords retried after a lost response, or a retried bundle)"

// ledgerStreams names the streams a ledger reads. owedBefore, when set, is the earliest
// time the read can have ended: every input record that arrived before it is owed to the
// output, and one that arrived later is the harness's fault (the producer overran its hard
// stop), counted as late.
type ledgerStreams struct {
	in, out    string
	owedBefore time.Time
}

// recordSource reads what a stream holds.
type recordSource interface {
	StreamRecords(stream string) ([]kinesistest.StoredRecord, error)
}

// newLedger reads both streams and accounts for every produced message. A duplicate's
// cause is the latest of events (sorted by time) between the message's first copy and the
// duplicate copy, or withinRun when there is none.
func newLedger(srv recordSource, streams ledgerStreams, produced int, events []event) (*ledger, error) {
	l := &ledger{produced: produced, dupCauses: map[string]int{}}
	input, err := srv.StreamRecords(streams.in)
	if err != nil {
		return nil, fmt.Errorf("reading the input stream: %w", err)
	}
	stored := map[string]bool{}
	forEachMessage(input, func(m message, at time.Time, ok bool) {
		switch {
		case !ok:
			l.unparsable++
		case stored[m.ID]:
			l.inputDuplicates++
		default:
			stored[m.ID] = true
			if !streams.owedBefore.IsZero() && !at.Before(streams.owedBefore) {
				l.late++
			}
		}
	})
	l.stored = len(stored)

	output, err := srv.StreamRecords(streams.out)
	if err != nil {
		return nil, fmt.Errorf("reading the output stream: %w", err)
	}
	seen := map[string]int{}
	copies := map[string][]time.Time{}
	maxSeq := map[string]int{}
	forEachMessage(output, func(m message, at time.Time, ok bool) { // per shard, in sequence order; each key has one output shard
		if !ok {
			l.unparsable++
			return
		}
		seen[m.ID]++
		copies[m.ID] = append(copies[m.ID], at)
		if seen[m.ID] > 1 {
			l.duplicates++
			return
		}
		if m.Seq < maxSeq[m.Key] {
			l.orderViolations++
		}
		maxSeq[m.Key] = max(maxSeq[m.Key], m.Seq)
		l.latencies = append(l.latencies, at.Sub(time.UnixMilli(m.TMs)))
	})
	for _, at := range copies {
		if len(at) < 2 {
			continue
		}
		sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
		for _, dup := range at[1:] {
			l.dupCauses[dupCause(events, at[0], dup)]++
		}
	}
	for i := range produced {
		id := strconv.Itoa(i)
		switch {
		case !stored[id]:
			l.notStored++
		case seen[id] == 0:
			l.lost++
			if len(l.missing) < 10 {
				l.missing = append(l.missing, id)
			}
		}
	}
	l.delivered = len(seen)
	return l, nil
}

// forEachMessage calls f with each producer message in records (deaggregating KPL
// aggregates) and its record's arrival time; ok is false for data that is not one.
func forEachMessage(records []kinesistest.StoredRecord, f func(m message, at time.Time, ok bool)) {
	for _, r := range records {
		users, aggregated, err := kpl.Deaggregate(r.Data)
		if err != nil || !aggregated {
			users = []kpl.UserRecord{{PartitionKey: r.PartitionKey, Data: r.Data}}
		}
		for _, u := range users {
			var m message
			err := json.Unmarshal(u.Data, &m)
			f(m, r.ArrivalTime, err == nil && m.ID != "")
		}
	}
}

// print writes the ledger for people.
func (l *ledger) print(w io.Writer, efo bool) {
	mode := "polling"
	if efo {
		mode = "enhanced fan-out"
	}
	sort.Slice(l.latencies, func(i, j int) bool { return l.latencies[i] < l.latencies[j] })
	pct := func(q float64) time.Duration {
		if len(l.latencies) == 0 {
			return 0
		}
		return l.latencies[min(len(l.latencies)-1, int(q*float64(len(l.latencies))))]
	}
	if l.mode != "" {
		mode = l.mode
	}
	if l.flink != nil {
		mode += ", standalone Flink cluster"
	}
	fmt.Fprintf(w, "soak ledger (%s, %v)\n", mode, l.elapsed.Round(time.Second))
	fmt.Fprintf(w, "  produced         %d\n", l.produced)
	fmt.Fprintf(w, "  stored           %d distinct in the input stream (%d stored twice by a resent PutRecords)\n", l.stored, l.inputDuplicates)
	fmt.Fprintf(w, "  not stored       %d (the producer gave up at its hard stop; not owed by the read)\n", l.notStored)
	if l.late > 0 {
		fmt.Fprintf(w, "  late             %d stored after the read's earliest end (a harness error)\n", l.late)
	}
	fmt.Fprintf(w, "  delivered        %d distinct\n", l.delivered)
	fmt.Fprintf(w, "  lost             %d", l.lost)
	if len(l.missing) > 0 {
		fmt.Fprintf(w, " (e.g. ids %s)", strings.Join(l.missing, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  duplicated       %d (the write is at least once)\n", l.duplicates)
	causes := make([]string, 0, len(l.dupCauses))
	for c := range l.dupCauses {
		causes = append(causes, c)
	}
	sort.Strings(causes)
	for _, c := range causes {
		fmt.Fprintf(w, "    %7d  %s\n", l.dupCauses[c], c)
	}
	fmt.Fprintf(w, "  unparsable       %d\n", l.unparsable)
	fmt.Fprintf(w, "  order violations %d (per key, in the output stream; Beam keeps no order between elements)\n", l.orderViolations)
	fmt.Fprintf(w, "  latency          p50 %v, p99 %v, max %v (put to stored in the output)\n", pct(0.5), pct(0.99), pct(1))
	fmt.Fprintf(w, "  chaos            %s\n", l.chaos)
	var names []string
	for n := range l.counters {
		names = append(names, n)
	}
	sort.Strings(names)
	var cs []string
	for _, n := range names {
		if ledgerCounter(n) {
			cs = append(cs, fmt.Sprintf("%s %d", n, l.counters[n]))
		}
	}
	fmt.Fprintf(w, "  counters         %s\n", strings.Join(cs, ", "))
	if l.outage != nil {
		fmt.Fprintf(w, "  outage           %s\n", l.outage)
	}
	if l.memory.last != nil {
		fmt.Fprintf(w, "  memory           %s\n", l.memory)
	}
	if l.flink != nil {
		for _, line := range l.flink.lines {
			fmt.Fprintf(w, "  flink            %s\n", line)
		}
		names := make([]string, 0, len(l.flink.rss))
		for n := range l.flink.rss {
			names = append(names, n)
		}
		sort.Strings(names)
		var rss []string
		for _, n := range names {
			rss = append(rss, fmt.Sprintf("%s %.0f MiB", n, float64(l.flink.rss[n])/(1<<20)))
		}
		fmt.Fprintf(w, "  flink RSS        %s (at the end)\n", strings.Join(rss, ", "))
	}
	if l.lost == 0 {
		fmt.Fprintln(w, "  result           no message lost")
	} else {
		fmt.Fprintf(w, "  result           %d messages LOST\n", l.lost)
	}
}

// dupCause names what made the copy of a message written at dup when its first copy was
// written at first: the latest event between the two.
func dupCause(events []event, first, dup time.Time) string {
	cause := withinRun
	for _, e := range events {
		if e.at.After(first) && !e.at.After(dup) {
			cause = e.cause
		}
	}
	return cause
}

// ledgerCounter says whether the ledger shows the counter named n: those of retries,
// throttling, failures, subscriptions, discovery and unavailability.
func ledgerCounter(n string) bool {
	for _, part := range []string{"throttle", "retries", "expired", "failed", "subscribe", "shards_discovered", "unavailable"} {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}
