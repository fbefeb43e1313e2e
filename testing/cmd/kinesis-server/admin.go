package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The admin endpoint (--admin-addr) lets a test harness in another process do what a test
// in the server's own process does with kinesistest's direct calls: read what a stream
// holds, change the faults, start and end an outage, and measure the server's memory apart
// from its clients'. It is plain HTTP on its own port, so an outage of the Kinesis port
// leaves it up.
//
//	GET  /records?stream=NAME   every record the stream retains, as JSON (kinesistest.StoredRecord)
//	PUT  /faults                the body, a JSON kinesistest.Faults, replaces the faults ({} turns them off)
//	PUT  /outage?mode=MODE      none, refuse or unavailable (see kinesistest.Outage)
//	GET  /memory                the live heap after a GC, goroutines and RSS, as JSON (memoryStats)
//	GET  /queues                every queue with its stats, as JSON (queueState)
//	POST /queues/expire?arn=ARN end the visibility of every record in flight on the queue now
//	                            (kinesistest.Server.ExpireQueueInFlight), as JSON {"expired": n}

// memoryStats is the server process's memory, as GET /memory reports it.
type memoryStats struct {
	HeapAfterGC uint64 `json:"heap_after_gc"`
	Goroutines  int    `json:"goroutines"`
	RSS         uint64 `json:"rss"`
}

// queueState is one queue as GET /queues reports it.
type queueState struct {
	kinesistest.QueueInfo
	Stats kinesistest.QueueStats
}

// adminHandler serves the admin endpoint for srv.
func adminHandler(srv *kinesistest.Server) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /records", func(w http.ResponseWriter, r *http.Request) {
		recs, err := srv.StreamRecords(r.URL.Query().Get("stream"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if recs == nil {
			recs = []kinesistest.StoredRecord{}
		}
		writeJSON(w, recs)
	})
	mux.HandleFunc("PUT /faults", func(w http.ResponseWriter, r *http.Request) {
		var f kinesistest.Faults
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			http.Error(w, "decoding the faults: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := setFaults(srv, f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PUT /outage", func(w http.ResponseWriter, r *http.Request) {
		o, err := kinesistest.ParseOutage(r.URL.Query().Get("mode"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := srv.SetOutage(o); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /queues", func(w http.ResponseWriter, r *http.Request) {
		out := []queueState{}
		for _, q := range srv.Queues() {
			st, err := srv.QueueStats(q.ARN)
			if err != nil {
				continue // deleted meanwhile
			}
			out = append(out, queueState{QueueInfo: q, Stats: st})
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("POST /queues/expire", func(w http.ResponseWriter, r *http.Request) {
		n, err := srv.ExpireQueueInFlight(r.URL.Query().Get("arn"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		writeJSON(w, map[string]int{"expired": n})
	})
	mux.HandleFunc("GET /memory", func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		writeJSON(w, memoryStats{HeapAfterGC: ms.HeapAlloc, Goroutines: runtime.NumGoroutine(), RSS: selfRSS()})
	})
	return mux
}

// setFaults is srv.SetFaults with its panic on a bad rate turned into an error.
func setFaults(srv *kinesistest.Server, f kinesistest.Faults) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	srv.SetFaults(f)
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v) //nolint:errcheck // a client that hung up is not the server's problem
}

// selfRSS is this process's resident set size from /proc, 0 where there is none.
func selfRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// startAdmin serves the admin endpoint on addr and returns its URL and a function that stops it.
func startAdmin(addr string, srv *kinesistest.Server) (url string, stop func() error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--admin-addr: listening on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: adminHandler(srv)}
	go hs.Serve(ln) //nolint:errcheck // returns ErrServerClosed on Close
	return "http://" + ln.Addr().String(), hs.Close, nil
}
