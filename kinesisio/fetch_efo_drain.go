package kinesisio

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// The read-ahead of enhanced fan-out: a parked subscription's events are read into memory.
// The service pushes a shard's events as fast as its 2 MiB/s allows, but only while the
// client reads them: a subscription that no call reads fills the connection's buffers (about
// 5 MiB, the HTTP/2 stream window and the sockets' buffers) in two or three seconds, and
// the service then waits, so a shard the runner parks for longer loses its rate. A drain
// reads the events of a parked subscription within the same bounds as the polling read-ahead
// (WithMaxReadAheadBytes: the read's cap in the worker, a quarter of it per shard, counted
// in readAhead.held), and the call that takes the subscription reads the drained events
// before the stream's. A subscription that is closed unread (expired, or parked at another
// position than the call that came for it starts) drops what it drained, and counts it.

// drainedEvent is an event a drain read, with when it arrived and what it holds.
type drainedEvent struct {
	ev        *types.SubscribeToShardEvent
	received  time.Time
	mem, data int64
}

// drain reads a parked subscription's events. readAhead.mu guards its events and memory;
// the subscription's stream and event count belong to the drain's goroutine while it runs
// (from start until halt returns) and to the call that holds the subscription otherwise.
type drain struct {
	sub *subscription
	// read is the read's ID, max its cap (WithMaxReadAheadBytes).
	read string
	max  int64

	events    []drainedEvent
	mem, data int64

	stop, done chan struct{} // while the goroutine runs
	room       chan struct{} // wakes a goroutine that the cap stopped
}

// startDrain starts reading s's events while it is parked, within the cap max of the read
// read. A drain that s kept from an earlier park continues, its events still first.
func startDrain(s *subscription, read string, max int64) {
	if s.drain == nil {
		s.drain = &drain{sub: s, read: read, max: max, room: make(chan struct{}, 1)}
	}
	d := s.drain
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go d.run(d.stop, d.done)
}

// run reads events until stop is closed or the stream ends.
func (d *drain) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		for !d.mayRead() {
			select {
			case <-stop:
				return
			case <-d.room:
			}
		}
		select {
		case <-stop:
			return
		case e, ok := <-d.sub.stream.Events():
			if !ok {
				// The stream ended: the call that takes the subscription finds out, from
				// the closed channel, after the events drained before.
				return
			}
			if v, ok := e.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent); ok {
				d.sub.events++
				d.add(&v.Value, time.Now())
			}
		}
	}
}

// mayRead says whether the drain is within its caps; if not, it waits for room.
func (d *drain) mayRead() bool {
	c := readAhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.overCapLocked(d.read, d.mem, d.max) {
		return true
	}
	c.waitLocked(d.read, d)
	return false
}

// roomLocked wakes a drain that its cap stopped, to look again.
func (d *drain) roomLocked(*readAheadCache) {
	select {
	case d.room <- struct{}{}:
	default:
	}
}

// add keeps ev, received at received.
func (d *drain) add(ev *types.SubscribeToShardEvent, received time.Time) {
	de := drainedEvent{ev: ev, received: received, mem: recordsMemory(ev.Records), data: dataBytes(ev.Records)}
	c := readAhead
	c.mu.Lock()
	defer c.mu.Unlock()
	d.events = append(d.events, de)
	d.mem += de.mem
	d.data += de.data
	c.held[d.read] += de.mem
	c.statsLocked(d.read).pages++
}

// halt stops the drain's goroutine, if it runs, and waits for it to end. What it drained
// stays.
func (d *drain) halt() {
	if d.stop == nil {
		return
	}
	close(d.stop)
	<-d.done
	d.stop, d.done = nil, nil
}

// pop removes and returns the first drained event (ok false: none). The drain is halted.
func (d *drain) pop() (ev *types.SubscribeToShardEvent, received time.Time, ok bool) {
	c := readAhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(d.events) == 0 {
		return nil, time.Time{}, false
	}
	de := d.events[0]
	d.events[0] = drainedEvent{}
	d.events = d.events[1:]
	d.releaseLocked(de.mem, de.data)
	return de.ev, de.received, true
}

// discard halts the drain and drops what it drained, counting it.
func (d *drain) discard() {
	d.halt()
	c := readAhead
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.statsLocked(d.read)
	st.droppedPages += int64(len(d.events))
	st.droppedBytes += d.data
	d.events = nil
	c.unwaitLocked(d.read, d)
	d.releaseLocked(d.mem, d.data)
}

// releaseLocked forgets mem bytes of memory (data of records) the drain held.
func (d *drain) releaseLocked(mem, data int64) {
	d.mem -= mem
	d.data -= data
	readAhead.releaseHeldLocked(d.read, mem)
}

// heldOf reports the data bytes s's drain holds and the newest drained event (nil: none):
// the rest of the shard known beyond the event being read, for the backlog.
func heldOf(s *subscription) (int64, *types.SubscribeToShardEvent) {
	if s == nil || s.drain == nil {
		return 0, nil
	}
	c := readAhead
	c.mu.Lock()
	defer c.mu.Unlock()
	d := s.drain
	if len(d.events) == 0 {
		return 0, nil
	}
	return d.data, d.events[len(d.events)-1].ev
}
