package kinesistest

import "sync"

// The account's minimum throughput billing commitment ("On-demand
// Advantage"), turned on and off by UpdateAccountSettings and read by
// DescribeAccountSettings. While it is on, ON_DEMAND streams accept and report
// warm throughput and take 50 registered consumers instead of 20.
//
// The rules, from the API reference: a commitment lasts at least 24 hours;
// disabling it before then schedules its end for the earliest allowed end
// (status ENABLED_UNTIL_EARLIEST_ALLOWED_END, still on meanwhile); enabling it
// again before that cancels the scheduled end. Enabling a commitment that has
// ended starts a new one. Time is the server clock's.

// Commitment statuses as the service spells them.
const (
	commitmentEnabled  = "ENABLED"
	commitmentDisabled = "DISABLED"
	commitmentEnding   = "ENABLED_UNTIL_EARLIEST_ALLOWED_END"
	minCommitmentMs    = 24 * 60 * 60 * 1000
)

// commitment is the account's billing commitment; the zero value was never
// enabled. mu is a leaf lock: nothing else is taken while it is held.
type commitment struct {
	mu            sync.Mutex
	startedMs     int64 // start of the current or last commitment; 0: never enabled
	earliestEndMs int64
	endMs         int64 // when it ended or is scheduled to end; 0 while it runs
}

// statusLocked is the commitment's status at nowMs.
func (c *commitment) statusLocked(nowMs int64) string {
	switch {
	case c.startedMs == 0:
		return commitmentDisabled
	case c.endMs == 0:
		return commitmentEnabled
	case nowMs < c.endMs:
		return commitmentEnding
	}
	return commitmentDisabled
}

// active reports whether the commitment is on at nowMs: enabled, or disabled
// with its end still to come.
func (c *commitment) active(nowMs int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(nowMs) != commitmentDisabled
}

// set asks for status (ENABLED or DISABLED) at nowMs and returns the
// commitment as it is then.
func (c *commitment) set(status string, nowMs int64) commitmentJSON {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch current := c.statusLocked(nowMs); {
	case status == commitmentEnabled && current == commitmentDisabled:
		c.startedMs, c.earliestEndMs, c.endMs = nowMs, nowMs+minCommitmentMs, 0
	case status == commitmentEnabled && current == commitmentEnding:
		c.endMs = 0
	case status == commitmentDisabled && current == commitmentEnabled:
		c.endMs = max(nowMs, c.earliestEndMs)
	}
	return c.shapeLocked(nowMs)
}

// shape is the commitment at nowMs as the service describes it.
func (c *commitment) shape(nowMs int64) commitmentJSON {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shapeLocked(nowMs)
}

func (c *commitment) shapeLocked(nowMs int64) commitmentJSON {
	out := commitmentJSON{Status: c.statusLocked(nowMs)}
	if c.startedMs == 0 {
		return out
	}
	started, earliest := epochMillis(c.startedMs), epochMillis(c.earliestEndMs)
	out.StartedAt, out.EarliestAllowedEndAt = &started, &earliest
	if out.Status == commitmentDisabled {
		ended := epochMillis(c.endMs)
		out.EndedAt = &ended
	}
	return out
}

type commitmentJSON struct {
	Status               string
	StartedAt            *epochMillis `json:",omitempty"`
	EndedAt              *epochMillis `json:",omitempty"`
	EarliestAllowedEndAt *epochMillis `json:",omitempty"`
}

// consumerLimit is how many registered consumers st may have at nowMs: 50 on
// an On-demand Advantage stream (ON_DEMAND while the commitment is on), 20 on
// On-demand Standard and PROVISIONED streams.
func (s *Server) consumerLimit(st *stream, nowMs int64) int {
	if st.mode == modeOnDemand && s.commitment.active(nowMs) {
		return maxConsumersAdvantage
	}
	return maxConsumersPerStream
}
