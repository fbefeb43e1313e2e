package main

import (
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The outage flags: Kinesis unreachable for a while in the middle of the run.
var (
	outageMode = flag.String("outage", "none", "an outage mid-run: none, refuse (the Kinesis server stops listening, then listens again on the same port), unavailable (503 to every request) write-throttle (every entry written to the output stream is throttled) or dynamodb (with --checkpoint_table: dynalite is stopped, then started again on the same data and port)")
	outageAt   = flag.Duration("outage_at", 0, "when, from the producer's start, the outage begins (0: a third of --duration)")
	outageFor  = flag.Duration("outage_for", 2*time.Minute, "how long the outage lasts")
)

// writeThrottle is the --outage that throttles every entry written to the job's output
// stream (and none of the producer's), then puts the chaos's faults back.
const writeThrottle = "write-throttle"

// outage is one scheduled outage of the server.
type outage struct {
	mode       string
	done       chan struct{}
	start, end time.Time
	err        error
}

// startOutage schedules the outage the flags ask for, from started; nil when there is none.
// faults are the run's own: the write-throttle outage adds to them and puts them back.
func startOutage(srv service, started time.Time, faults kinesistest.Faults) (*outage, error) {
	var begin, end func() error
	switch *outageMode {
	case "none":
		return nil, nil
	case "dynamodb":
		if dyn == nil {
			return nil, fmt.Errorf("--outage=dynamodb needs --checkpoint_table")
		}
		begin, end = dyn.stop, dyn.start
	case writeThrottle:
		begin = func() error {
			f := faults
			f.PutEntryThrottleRate, f.PutEntryStreams = 1, []string{"soak-out"}
			return srv.SetFaults(f)
		}
		end = func() error { return srv.SetFaults(faults) }
	default:
		mode, err := kinesistest.ParseOutage(*outageMode)
		if err != nil {
			return nil, fmt.Errorf("--outage: want none, %s or a server outage: %w", writeThrottle, err)
		}
		begin = func() error { return srv.SetOutage(mode) }
		end = func() error { return srv.SetOutage(kinesistest.NoOutage) }
	}
	o := &outage{mode: *outageMode, done: make(chan struct{})}
	at := started.Add(when(*outageAt, *duration/3))
	go func() {
		defer close(o.done)
		time.Sleep(time.Until(at))
		o.start = time.Now()
		if o.err = begin(); o.err != nil {
			return
		}
		log.Printf("soak outage: %q begins, for %v", o.mode, *outageFor)
		time.Sleep(*outageFor)
		o.err = end()
		o.end = time.Now()
		log.Printf("soak outage: %q ends; the Kinesis server serves again", o.mode)
	}()
	return o, nil
}

// outageReport is what the ledger says about the outage.
type outageReport struct {
	o *outage
	// recovered is how long after the outage's end the output first held a message the
	// producer sent after it: the job reads fresh data again. Negative when it never did.
	recovered time.Duration
	// catchUp is how long after the outage's end the output held the last message sent
	// before it ended: the backlog is gone.
	catchUp time.Duration
	err     error
}

// wait waits for the outage to end (nil-safe).
func (o *outage) wait() *outage {
	if o != nil {
		<-o.done
	}
	return o
}

// recovery measures, from the output stream, how the job came back after the outage.
func (o *outage) recovery(srv service) *outageReport {
	if o == nil {
		return nil
	}
	r := &outageReport{o: o, recovered: -1, err: o.err}
	if o.err != nil || o.end.IsZero() {
		return r
	}
	out, err := srv.StreamRecords("soak-out")
	if err != nil {
		r.err = err
		return r
	}
	var first, lastOld time.Time
	forEachMessage(out, func(m message, at time.Time, ok bool) {
		if !ok {
			return
		}
		sent := time.UnixMilli(m.TMs)
		if !sent.Before(o.end) {
			if first.IsZero() || at.Before(first) {
				first = at
			}
		} else if at.After(lastOld) {
			lastOld = at
		}
	})
	if !first.IsZero() {
		r.recovered = first.Sub(o.end)
	}
	r.catchUp = lastOld.Sub(o.end)
	return r
}

func (r *outageReport) String() string {
	if r.err != nil {
		return fmt.Sprintf("%q: failed: %v", r.o.mode, r.err)
	}
	rec := "never: no message sent after it was delivered"
	if r.recovered >= 0 {
		rec = fmt.Sprintf("%v after its end the first message sent after it was delivered", r.recovered.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("%q for %v from %s: %s; the last message sent before its end was delivered %v after it",
		r.o.mode, r.o.end.Sub(r.o.start).Round(time.Second), r.o.start.Format("15:04:05"), rec, r.catchUp.Round(100*time.Millisecond))
}
