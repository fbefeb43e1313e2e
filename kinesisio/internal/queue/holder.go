package queue

import (
	"context"
	"sync"
	"time"
)

// Visibility keeping, as Beam Java's SqsIO and PubsubIO keep their messages: a held
// record's visibility is extended when less than safetyShare of the visibility timeout is
// left, to a full visibility timeout from the call, until ProcessingTimeout has passed
// since its receive; then it is let go and comes back to the queue.
const safetyShare = 0.2

// Holder keeps records in flight for as long as their owner holds them: a table of handles
// with their deadlines, and a loop (Run) that extends those near their deadline.
type Holder struct {
	settler *Settler
	// vis is the visibility timeout of a receive and of an extension; timeout the most
	// time since a record's receive for which it is extended.
	vis, timeout time.Duration

	mu   sync.Mutex
	held map[string]*held
}

type held struct {
	received, deadline time.Time
}

// NewHolder returns a Holder that extends records through s by vis at a time, up to
// processingTimeout since their receive.
func NewHolder(s *Settler, vis, processingTimeout time.Duration) *Holder {
	return &Holder{settler: s, vis: vis, timeout: processingTimeout, held: map[string]*held{}}
}

// Hold adds entries whose visibility runs out at deadline.
func (h *Holder) Hold(entries []Entry, deadline time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range entries {
		h.held[e.Handle] = &held{received: e.Received, deadline: deadline}
	}
}

// Drop stops holding handles (they were settled, or are held elsewhere).
func (h *Holder) Drop(handles []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range handles {
		delete(h.held, hd)
	}
}

// Holding returns those of entries the Holder still holds.
func (h *Holder) Holding(entries []Entry) []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Entry
	for _, e := range entries {
		if h.held[e.Handle] != nil {
			out = append(out, e)
		}
	}
	return out
}

// Len is how many records the Holder holds.
func (h *Holder) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// tick is how often Run looks at the deadlines.
func (h *Holder) tick() time.Duration {
	return min(max(time.Duration(float64(h.vis)*safetyShare/4), 50*time.Millisecond), time.Second)
}

// Run extends the held records until ctx is done, or until done, asked after each round,
// says the loop may end (nil: never).
func (h *Holder) Run(ctx context.Context, done func() bool) {
	t := time.NewTicker(h.tick())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Extend(ctx, time.Now())
			if done != nil && done() {
				return
			}
		}
	}
}

// Extend extends, once, the records whose deadline is near at now, and lets go those held
// for the processing timeout.
func (h *Holder) Extend(ctx context.Context, now time.Time) {
	safety := time.Duration(float64(h.vis) * safetyShare)
	var due []Entry
	released := 0
	h.mu.Lock()
	for hd, e := range h.held {
		if e.deadline.Sub(now) > safety {
			continue
		}
		if now.Sub(e.received) >= h.timeout {
			delete(h.held, hd)
			released++
			continue
		}
		due = append(due, Entry{Handle: hd, Received: e.received})
	}
	h.mu.Unlock()
	if released > 0 {
		h.settler.stats.update(func(s *Stats) { s.Released += int64(released) })
	}
	if len(due) == 0 {
		return
	}
	lost, err := h.settler.Extend(ctx, due, h.vis)
	deadline := now.Add(h.vis)
	h.mu.Lock()
	defer h.mu.Unlock()
	gone := make(map[string]bool, len(lost))
	for _, l := range lost {
		gone[l] = true
	}
	for _, e := range due {
		cur := h.held[e.Handle]
		switch {
		case cur == nil:
		case gone[e.Handle]:
			delete(h.held, e.Handle)
		case err == nil:
			cur.deadline = deadline
		}
	}
}
