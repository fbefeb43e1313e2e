package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The memory flags.
var (
	memEvery     = flag.Duration("memory_every", 10*time.Second, "how often to measure this process (live heap after a GC, goroutines, open sockets) and, with --server=process, the server")
	memWarmUp    = flag.Duration("memory_warmup", 5*time.Minute, "the start of the run the heap slope leaves out: clients, caches and the runner's pools fill up then; the report gives the figures at its end and at the run's end")
	memCSV       = flag.String("memory_csv", "", "write every sample to this CSV file, as it is taken")
	heapProfiles = flag.String("heap_profiles", "", "write heap profiles (runtime/pprof, after a GC, one sample per 4 KiB) to this directory at the end of the warm-up (heap-warmup.pprof) and at the end of the run (heap-end.pprof)")
	heapEvery    = flag.Duration("heap_profile_every", 0, "with --heap_profiles, also write one every this long from the start (heap-10m0s.pprof, heap-20m0s.pprof, ... for 10m), to diff several points of a long run; 0 for none")
)

// sample is one measurement of the process (and of the server, with --server=process).
type sample struct {
	at         time.Time
	heap, rss  uint64
	goroutines int
	sockets    int
	server     serverMemory
}

// memorySampler measures the process every interval.
type memorySampler struct {
	srv      service
	stopCh   chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	samples  []sample
	start    time.Time
	stopOnce sync.Once
}

func startMemorySampler(srv service, every time.Duration) (*memorySampler, error) {
	if *heapProfiles != "" {
		if err := os.MkdirAll(*heapProfiles, 0o755); err != nil {
			return nil, fmt.Errorf("--heap_profiles: %w", err)
		}
		// Fine enough to see a megabyte that grows (the default samples every 512 KiB).
		runtime.MemProfileRate = 4096
	}
	m := &memorySampler{srv: srv, stopCh: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	var csv *os.File
	if *memCSV != "" {
		var err error
		if csv, err = os.Create(*memCSV); err != nil {
			return nil, fmt.Errorf("--memory_csv: %w", err)
		}
		fmt.Fprintln(csv, "seconds,heap_after_gc,rss,goroutines,sockets,server_heap_after_gc,server_rss,server_goroutines")
	}
	go func() {
		defer close(m.done)
		if csv != nil {
			defer csv.Close()
		}
		t := time.NewTicker(every)
		defer t.Stop()
		profiled := false
		nextProfile := *heapEvery
		for {
			s := m.measure()
			m.mu.Lock()
			m.samples = append(m.samples, s)
			m.mu.Unlock()
			if csv != nil { // written as it goes, so that a long run can be watched
				fmt.Fprintf(csv, "%.0f,%d,%d,%d,%d,%d,%d,%d\n", s.at.Sub(m.start).Seconds(), s.heap, s.rss, s.goroutines, s.sockets,
					s.server.HeapAfterGC, s.server.RSS, s.server.Goroutines)
			}
			if !profiled && s.at.Sub(m.start) >= *memWarmUp {
				profiled = true
				writeHeapProfile("warmup")
			}
			if *heapEvery > 0 && s.at.Sub(m.start) >= nextProfile {
				writeHeapProfile(nextProfile.String())
				nextProfile += *heapEvery
			}
			select {
			case <-t.C:
			case <-m.stopCh:
				return
			}
		}
	}()
	return m, nil
}

// measure takes one sample: the live heap after a GC, so that the slope is what the
// process keeps, not what it has not collected yet.
func (m *memorySampler) measure() sample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := sample{at: time.Now(), heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine()}
	s.rss, _ = processRSS(os.Getpid())
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, fd := range fds {
			if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(target, "socket:") {
				s.sockets++
			}
		}
	}
	s.server, _ = m.srv.memory()
	return s
}

// writeHeapProfile writes the heap profile named name into --heap_profiles, if set.
func writeHeapProfile(name string) {
	if *heapProfiles == "" {
		return
	}
	runtime.GC()
	f, err := os.Create(filepath.Join(*heapProfiles, "heap-"+name+".pprof"))
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: writing the %s heap profile: %v\n", name, err)
	}
}

// processRSS returns the resident set size of process pid, from /proc.
func processRSS(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// memoryReport summarises the samples.
type memoryReport struct {
	samples []sample
	// warm and last are the first sample after the warm-up (nil when the run was shorter)
	// and the last one.
	warm, last *sample
	// heapSlopePerHour is the least-squares slope of the live heap after the warm-up, and
	// serverSlopePerHour the server's, in bytes per hour; NaN with fewer than three samples.
	heapSlopePerHour, serverSlopePerHour float64
	goroutineRange, socketRange          [2]int // min and max after the warm-up
	maxHeap, maxRSS                      uint64
	external                             bool
}

// freeze ends the sampling and writes the last heap profile; the soak calls it when the
// producer ends, before the drain and the ledger load both streams into this process.
func (m *memorySampler) freeze() {
	m.stopOnce.Do(func() {
		close(m.stopCh)
		<-m.done
		writeHeapProfile("end")
	})
}

// stop freezes the sampling if the producer's end has not, and returns the report.
func (m *memorySampler) stop() memoryReport {
	m.freeze()
	if len(m.samples) == 0 {
		m.samples = append(m.samples, m.measure())
	}
	r := memoryReport{samples: m.samples, last: &m.samples[len(m.samples)-1], external: m.samples[0].server.RSS > 0}
	var after []sample
	for i, s := range m.samples {
		r.maxHeap, r.maxRSS = max(r.maxHeap, s.heap), max(r.maxRSS, s.rss)
		if s.at.Sub(m.start) >= *memWarmUp {
			if r.warm == nil {
				r.warm = &m.samples[i]
				r.goroutineRange, r.socketRange = [2]int{s.goroutines, s.goroutines}, [2]int{s.sockets, s.sockets}
			}
			after = append(after, s)
			r.goroutineRange = [2]int{min(r.goroutineRange[0], s.goroutines), max(r.goroutineRange[1], s.goroutines)}
			r.socketRange = [2]int{min(r.socketRange[0], s.sockets), max(r.socketRange[1], s.sockets)}
		}
	}
	r.heapSlopePerHour = slope(after, func(s sample) uint64 { return s.heap })
	r.serverSlopePerHour = slope(after, func(s sample) uint64 { return s.server.HeapAfterGC })
	return r
}

// slope is the least-squares slope of v over time, in units per hour; NaN for fewer than
// three samples.
func slope(ss []sample, v func(sample) uint64) float64 {
	if len(ss) < 3 {
		return math.NaN()
	}
	var sx, sy, sxx, sxy float64
	n := float64(len(ss))
	for _, s := range ss {
		x := s.at.Sub(ss[0].at).Hours()
		y := float64(v(s))
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func (r memoryReport) String() string {
	mib := func(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	slopeOf := func(v float64) string {
		if math.IsNaN(v) {
			return "n/a (fewer than 3 samples after the warm-up)"
		}
		return fmt.Sprintf("%+.2f MiB/h", v/(1<<20))
	}
	at := func(s *sample) string {
		return fmt.Sprintf("heap %s, goroutines %d, sockets %d, RSS %s", mib(s.heap), s.goroutines, s.sockets, mib(s.rss))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "this process (%s): %d samples; ", map[bool]string{true: "the job, the producer and the ledger; the server runs apart", false: "the server, the producer and the job"}[r.external], len(r.samples))
	if r.warm != nil {
		fmt.Fprintf(&b, "at %v: %s; ", r.warm.at.Sub(r.samples[0].at).Round(time.Second), at(r.warm))
	}
	fmt.Fprintf(&b, "at the end (%v): %s; heap slope after the warm-up %s", r.last.at.Sub(r.samples[0].at).Round(time.Second), at(r.last), slopeOf(r.heapSlopePerHour))
	if r.warm != nil {
		fmt.Fprintf(&b, ", goroutines %d-%d, sockets %d-%d after it", r.goroutineRange[0], r.goroutineRange[1], r.socketRange[0], r.socketRange[1])
	}
	fmt.Fprintf(&b, "; heap max %s, RSS max %s", mib(r.maxHeap), mib(r.maxRSS))
	if r.external {
		fmt.Fprintf(&b, "\n                   the server (apart): at the end heap %s, RSS %s, goroutines %d; heap slope after the warm-up %s (it keeps every record of both streams)",
			mib(r.last.server.HeapAfterGC), mib(r.last.server.RSS), r.last.server.Goroutines, slopeOf(r.serverSlopePerHour))
	}
	return b.String()
}
