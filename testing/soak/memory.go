package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// sample is one measurement of the process.
type sample struct {
	at         time.Time
	heap, rss  uint64
	goroutines int
	sockets    int
}

// memorySampler measures the process every interval.
type memorySampler struct {
	stopCh  chan struct{}
	done    chan struct{}
	samples []sample
}

func startMemorySampler(every time.Duration) *memorySampler {
	m := &memorySampler{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			m.samples = append(m.samples, measure())
			select {
			case <-t.C:
			case <-m.stopCh:
				return
			}
		}
	}()
	return m
}

func measure() sample {
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
	return s
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
	samples                  []sample
	heapSlopePerHour         float64
	maxHeap, maxRSS, lastRSS uint64
	maxGoroutines, maxSocket int
}

// stop takes a last sample and returns the report.
func (m *memorySampler) stop() memoryReport {
	close(m.stopCh)
	<-m.done
	m.samples = append(m.samples, measure())
	r := memoryReport{samples: m.samples}
	for _, s := range m.samples {
		r.maxHeap, r.maxRSS = max(r.maxHeap, s.heap), max(r.maxRSS, s.rss)
		r.maxGoroutines, r.maxSocket = max(r.maxGoroutines, s.goroutines), max(r.maxSocket, s.sockets)
	}
	r.lastRSS = m.samples[len(m.samples)-1].rss
	r.heapSlopePerHour = slope(m.samples)
	return r
}

// warmUp is the start of a run that the heap slope leaves out: clients, caches and the
// runner's pools fill up then.
const warmUp = time.Minute

// slope is the least-squares slope of the heap over time after warmUp, in bytes per hour;
// NaN when fewer than three samples come after it.
func slope(all []sample) float64 {
	var ss []sample
	for _, s := range all {
		if s.at.Sub(all[0].at) >= warmUp {
			ss = append(ss, s)
		}
	}
	if len(ss) < 3 {
		return math.NaN()
	}
	var sx, sy, sxx, sxy float64
	n := float64(len(ss))
	for _, s := range ss {
		x := s.at.Sub(ss[0].at).Hours()
		y := float64(s.heap)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func (r memoryReport) String() string {
	mib := func(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	slope := "n/a (fewer than 3 samples after the first minute)"
	if !math.IsNaN(r.heapSlopePerHour) {
		slope = fmt.Sprintf("%+.1f MiB/h after the first minute", r.heapSlopePerHour/(1<<20))
	}
	return fmt.Sprintf("%d samples; heap max %s, slope %s; RSS max %s, last %s; goroutines max %d; sockets max %d",
		len(r.samples), mib(r.maxHeap), slope, mib(r.maxRSS), mib(r.lastRSS), r.maxGoroutines, r.maxSocket)
}
