package kinesisio

import (
	"fmt"
	"time"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/queue"
)

// queueConfig holds the options of the queue read (QueueOption).
type queueConfig struct {
	slots, receivers    int
	visibility, timeout time.Duration
	wait                time.Duration
	maxRecords          int
	maxCallTime         time.Duration
	stopWhenIdle        time.Duration
	restore             bool
	// dedup, when positive, is the span of event time within which later deliveries of a
	// record are dropped (WithQueueDeduplication).
	dedup time.Duration
}

func defaultQueueConfig() queueConfig {
	return queueConfig{
		slots: 4, receivers: 4,
		visibility: time.Minute, timeout: 10 * time.Minute,
		wait:       defaultQueueWait,
		maxRecords: 10000, maxCallTime: time.Second,
	}
}

func (c queueConfig) validate(t target) error {
	if c.restore && t != targetQueueDeadLetters {
		return fmt.Errorf("WithRestoreDeadLetters applies to ReadQueueDeadLetters only; remove it")
	}
	if c.timeout < c.visibility {
		return fmt.Errorf("the processing timeout %v is shorter than the visibility timeout %v; make WithQueueProcessingTimeout at least WithQueueVisibility", c.timeout, c.visibility)
	}
	return nil
}

// queueOnly is an option of the queue read alone.
type queueOnly struct{ o option }

func (c queueOnly) unwrap() option { return c.o }
func (queueOnly) queueOption()     {}

// WithQueueSlots sets how many receiver slots the queue read has in all (default 4): the
// runner spreads them over its workers, and each worker's slots drain one receiver pool.
// More slots than the job's parallelism gain nothing.
func WithQueueSlots(n int) QueueOption {
	return queueOnly{option{name: "WithQueueSlots", apply: func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%d slots; give at least 1", n)
		}
		c.queue.slots = n
		return nil
	}}}
}

// WithQueueReceivers sets how many long-polling receives each worker keeps going at once
// for each of the read's calls it runs at once (default 4; each returns up to 10 records):
// a worker whose runner runs two slots' calls at once (two tasks in one worker process)
// keeps 8.
func WithQueueReceivers(n int) QueueOption {
	return queueOnly{option{name: "WithQueueReceivers", apply: func(c *config) error {
		if n < 1 || n > 256 {
			return fmt.Errorf("%d receivers; give 1 to 256", n)
		}
		c.queue.receivers = n
		return nil
	}}}
}

// WithQueueVisibility sets the visibility timeout each receive asks for, and what each
// extension of a held record sets (default 1 minute; whole seconds, 1 s to 12 h). A record
// a worker holds is extended when less than a fifth of it is left, so a dead worker's
// records come back within about this long.
func WithQueueVisibility(d time.Duration) QueueOption {
	return queueOnly{option{name: "WithQueueVisibility", apply: func(c *config) error {
		if d < time.Second || d > queue.MaxVisibility || d%time.Second != 0 {
			return fmt.Errorf("visibility %v; give whole seconds from 1s to 12h", d)
		}
		c.queue.visibility = d
		return nil
	}}}
}

// WithQueueProcessingTimeout sets how long after its receive a record not yet acknowledged
// is kept invisible (default 10 minutes). After it the record is let go and delivered
// again. With WithCommitAfterSinks, make it longer than the sinks' windows plus their
// allowed lateness, or the records of an open window come back while the job lives.
func WithQueueProcessingTimeout(d time.Duration) QueueOption {
	return queueOnly{option{name: "WithQueueProcessingTimeout", apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("timeout %v; give a positive duration", d)
		}
		c.queue.timeout = d
		return nil
	}}}
}

// WithQueueWait sets the long poll of a receive (default 20 s, the service's longest; whole
// seconds).
func WithQueueWait(d time.Duration) QueueOption {
	return queueOnly{option{name: "WithQueueWait", apply: func(c *config) error {
		if d < 0 || d > queue.MaxWait || d%time.Second != 0 {
			return fmt.Errorf("wait %v; give whole seconds from 0 to 20s", d)
		}
		c.queue.wait = d
		return nil
	}}}
}

// WithQueueMaxRecordsPerCall bounds the records one call of a slot emits before it
// checkpoints (default 10,000), and WithQueueMaxCallTime its time (default 1 s): together
// they bound a bundle, and so how soon its records are acknowledged. A call also ends once
// its worker has received nothing for 20 ms, so a quiet queue's records are not held for
// the bounds; a busy one's calls are long, since each costs the runner a resume (on Flink
// about a bundle's time).
func WithQueueMaxRecordsPerCall(n int) QueueOption {
	return queueOnly{option{name: "WithQueueMaxRecordsPerCall", apply: func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%d records; give at least 1", n)
		}
		c.queue.maxRecords = n
		return nil
	}}}
}

// WithQueueMaxCallTime bounds the time of one call of a slot (default 1 s).
func WithQueueMaxCallTime(d time.Duration) QueueOption {
	return queueOnly{option{name: "WithQueueMaxCallTime", apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("time %v; give a positive duration", d)
		}
		c.queue.maxCallTime = d
		return nil
	}}}
}

// WithQueueStopWhenIdle ends the read once each slot got nothing from the queue for d: the
// read then ends, as a bounded one does (for tests and draining a queue in a batch job).
func WithQueueStopWhenIdle(d time.Duration) QueueOption {
	return queueOnly{option{name: "WithQueueStopWhenIdle", apply: func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("idle time %v; give a positive duration", d)
		}
		c.queue.stopWhenIdle = d
		return nil
	}}}
}

// WithRestoreDeadLetters makes ReadQueueDeadLetters restore the dead letters it read to the
// queue (their receive count reset) once the runner has them, instead of discarding them.
func WithRestoreDeadLetters() QueueOption {
	return queueOnly{option{name: "WithRestoreDeadLetters", apply: func(c *config) error {
		c.queue.restore = true
		return nil
	}}}
}

// WithQueueDeduplication drops the deliveries of a record that follow its first within span
// of event time (receive time). A queue delivers at least once: a record comes back when the
// worker holding it dies or keeps it past WithQueueProcessingTimeout, when an
// acknowledgement fails, and, the service says, on rare occasions after its
// acknowledgement. Every delivery has the same RecordId, which the read keys a stateful step
// by (with SubIndex for the user records of a KPL aggregate), so the pipeline sees each
// record once within span, and within one job: a new job, or one restarted without its
// runner state, starts with none. The state holds the records delivered within one span,
// and costs a shuffle of every record. Without it, a pipeline must tolerate duplicates
// (idempotent sinks, or its own deduplication on RecordId).
func WithQueueDeduplication(span time.Duration) QueueOption {
	return queueOnly{option{name: "WithQueueDeduplication", apply: func(c *config) error {
		if span < time.Millisecond {
			return fmt.Errorf("span %v; give at least a millisecond (10 minutes covers a redelivery after the default processing timeout)", span)
		}
		c.queue.dedup = span
		return nil
	}}}
}
