package kinesistest

import "math/rand/v2"

// The two structures that make a receive O(records returned): the visible
// records of each side, and the in-flight records by deadline.

// visibleRing holds the visible records of one side in intake order (records
// that become visible again go to the back). A receive takes a random one of
// the first queueShuffleWindow, so delivery is unordered but no record waits
// long, in O(1) per record. Entries whose record has since changed state are
// skipped when met, so leaving the ring costs nothing.
type visibleRing struct {
	buf  []ringEntry
	head int
}

type ringEntry struct {
	rec   *qrec
	epoch uint32
}

func (r *visibleRing) push(rec *qrec) { r.buf = append(r.buf, ringEntry{rec, rec.epoch}) }

// pick removes and returns a random live record among the first window, or
// nil when there is none.
func (r *visibleRing) pick(rng *rand.Rand, want uint8) *qrec {
	for r.head < len(r.buf) {
		n := min(queueShuffleWindow, len(r.buf)-r.head)
		i := r.head + rng.IntN(n)
		e := r.buf[i]
		r.buf[i] = r.buf[r.head]
		r.buf[r.head] = ringEntry{}
		r.head++
		if r.head == len(r.buf) {
			r.buf, r.head = r.buf[:0], 0
		} else if r.head >= 1024 && r.head*2 >= len(r.buf) {
			n := copy(r.buf, r.buf[r.head:])
			clear(r.buf[n:])
			r.buf, r.head = r.buf[:n], 0
		}
		if e.rec.epoch == e.epoch && e.rec.state == want {
			return e.rec
		}
	}
	return nil
}

// sweep drops stale entries once they outnumber the live ones (live of
// them), keeping the order of the rest.
func (r *visibleRing) sweep(want uint8, live int) {
	if len(r.buf)-r.head <= 2*live+64 {
		return
	}
	kept := r.buf[:0]
	for _, e := range r.buf[r.head:] {
		if e.rec.epoch == e.epoch && e.rec.state == want {
			kept = append(kept, e)
		}
	}
	clear(r.buf[len(kept):])
	r.buf, r.head = kept, 0
}

// deadlineHeap orders in-flight records by visibility deadline.
type deadlineHeap []*qrec

func (h deadlineHeap) less(i, j int) bool {
	if h[i].deadlineMs != h[j].deadlineMs {
		return h[i].deadlineMs < h[j].deadlineMs
	}
	return h[i].serial < h[j].serial
}

func (h deadlineHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}

func (h deadlineHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h deadlineHeap) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

func (h *deadlineHeap) push(rec *qrec) {
	rec.heapIdx = len(*h)
	*h = append(*h, rec)
	h.up(rec.heapIdx)
}

func (h *deadlineHeap) remove(rec *qrec) {
	i, last := rec.heapIdx, len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	rec.heapIdx = -1
	if i != last && !h.down(i) {
		h.up(i)
	}
}

// fix restores the order after rec's deadline changed.
func (h deadlineHeap) fix(rec *qrec) {
	if !h.down(rec.heapIdx) {
		h.up(rec.heapIdx)
	}
}
