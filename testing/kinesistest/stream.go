package kinesistest

import (
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Identity of the simulated account. Streams live in one namespace whatever
// region a client signs for; ARNs in responses carry the client's region.
const (
	// AccountID is the account every stream belongs to.
	AccountID = "123456789012"
	// Region is the region of Server.Client and of ARNs built without a
	// request (Server.StreamARN).
	Region = "us-east-1"
)

// Stream defaults and bounds of the service.
const (
	defaultRetention     = 24 * time.Hour
	minRetentionHours    = 24
	maxRetentionHours    = 8760
	defaultMaxRecordSize = 1 << 20 // data + partition key, bytes
	minMaxRecordSizeKiB  = 1024
	maxMaxRecordSizeKiB  = 10240
	onDemandShardCount   = 4
)

// Stream statuses and capacity modes as the service spells them.
const (
	statusCreating  = "CREATING"
	statusActive    = "ACTIVE"
	statusUpdating  = "UPDATING"
	modeProvisioned = "PROVISIONED"
	modeOnDemand    = "ON_DEMAND"

	// Record distribution strategies: by the producer's partition key (the
	// default), or by the service, which ignores keys (on-demand streams only).
	distributionUserKey = "USER_PARTITION_KEY"
	distributionAuto    = "AUTO"
)

var (
	streamNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)
	streamARNPattern  = regexp.MustCompile(`^arn:aws.*:kinesis:.*:\d{12}:stream/\S+$`)
)

// stream is one data stream.
//
// Locking: mu's read lock is held for the whole of every data-plane call
// (puts, reads, listings); resharding and configuration changes take the write
// lock, so a reader never sees half a split and a put never lands in a shard
// that closed under it. Record storage has its own per-shard lock.
type stream struct {
	uid       uint64 // distinguishes a re-created stream from the deleted one
	name      string
	createdMs int64
	mode      string
	tags      map[string]string

	// counter feeds sequence numbers. It is taken under the shard's lock when
	// a record is stored, so the numbers grow in storage order in each shard.
	counter atomic.Uint64
	// autoNext counts the records placed by the AUTO strategy (distribution.go).
	autoNext atomic.Uint64

	mu            sync.RWMutex
	shards        []*shard // every shard ever created, by number
	byID          map[string]*shard
	open          []*shard // open shards by hash range, for routing
	retention     time.Duration
	maxRecordSize int
	strategy      string // distributionUserKey or distributionAuto
	busyStatus    string // CREATING or UPDATING until busyUntilMs
	busyUntilMs   int64
	scalingsMs    []int64 // UpdateShardCount calls, for the daily quota
	warm          warmThroughput

	// consumers are the stream's enhanced fan-out consumers by name; guarded
	// by Server.consumerMu, not mu.
	consumers map[string]*consumer
	// queues are the queues that take the stream's new records (queue.go);
	// puts read it under the read lock, changes take the write lock.
	queues []*queue
}

// newStream creates a stream whose shards split the hash key space evenly.
func newStream(uid uint64, name, mode string, shardCount int, nowMs int64) *stream {
	st := &stream{
		uid:           uid,
		name:          name,
		createdMs:     nowMs,
		mode:          mode,
		byID:          make(map[string]*shard, shardCount),
		retention:     defaultRetention,
		maxRecordSize: defaultMaxRecordSize,
		strategy:      distributionUserKey,
	}
	starts := evenSplit(shardCount)
	for i, start := range starts {
		end := maxHashKey
		if i+1 < len(starts) {
			end = starts[i+1].sub1()
		}
		st.addShardLocked("", "", start, end, nowMs)
	}
	st.rebuildOpenLocked()
	st.warm = warmThroughput{target: shardCount * shardWriteBytesPerSec >> 20}
	st.warm.previous = st.warm.target
	return st
}

// addShardLocked creates an open shard with the next shard number.
func (st *stream) addShardLocked(parentID, adjacentID string, start, end uint128, nowMs int64) *shard {
	num := uint32(len(st.shards))
	counter := st.counter.Add(1)
	sh := &shard{
		num:              num,
		id:               shardID(num),
		parentID:         parentID,
		adjacentParentID: adjacentID,
		start:            start,
		end:              end,
		startKey:         start.String(),
		endKey:           end.String(),
		startCounter:     counter,
		startSeq:         formatSeq(counter, num),
		createdMs:        nowMs,
		buckets:          newShardBuckets(),
	}
	st.shards = append(st.shards, sh)
	st.byID[sh.id] = sh
	for _, p := range []string{parentID, adjacentID} {
		if p != "" {
			st.byID[p].children = append(st.byID[p].children, sh)
		}
	}
	return sh
}

// closeShardLocked closes sh. Its ending sequence number is issued after every
// record it holds, because the counter is taken under the shard's lock.
func (st *stream) closeShardLocked(sh *shard, nowMs int64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.closed = true
	sh.closedMs = nowMs
	sh.endSeq = formatSeq(st.counter.Add(1), sh.num)
	sh.wakeLocked() // subscribers send the shard's end
}

// rebuildOpenLocked recomputes the routing table after shards open or close.
func (st *stream) rebuildOpenLocked() {
	open := make([]*shard, 0, len(st.open)+2)
	for _, sh := range st.shards {
		if !sh.closed {
			open = append(open, sh)
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i].start.cmp(open[j].start) < 0 })
	st.open = open
}

// route returns the open shard whose hash key range holds key. The open
// shards always cover the key space exactly.
func (st *stream) route(key uint128) *shard {
	i := sort.Search(len(st.open), func(i int) bool { return st.open[i].start.cmp(key) > 0 })
	return st.open[i-1]
}

// statusLocked is the stream's status at nowMs.
func (st *stream) statusLocked(nowMs int64) string {
	if nowMs < st.busyUntilMs {
		return st.busyStatus
	}
	return statusActive
}

// requireActiveLocked refuses control-plane changes to a stream that is not
// ACTIVE.
func (st *stream) requireActiveLocked(nowMs int64) error {
	if status := st.statusLocked(nowMs); status != statusActive {
		return errorf(codeResourceInUse, "Stream %s under account %s not ACTIVE, instead in state %s", st.name, AccountID, status)
	}
	return nil
}

// markBusyLocked puts the stream in status for delay (no-op for zero delay).
func (st *stream) markBusyLocked(status string, nowMs int64, delay time.Duration) {
	if delay <= 0 {
		return
	}
	st.busyStatus = status
	st.busyUntilMs = nowMs + delay.Milliseconds()
}

// cutoffMsLocked is the arrival time at or before which records are trimmed.
func (st *stream) cutoffMsLocked(nowMs int64) int64 {
	return nowMs - st.retention.Milliseconds()
}

// expiredLocked reports whether sh closed longer than the retention period
// ago; such shards hold no data and are no longer listed.
func (st *stream) expiredLocked(sh *shard, nowMs int64) bool {
	return sh.closed && sh.closedMs <= st.cutoffMsLocked(nowMs)
}

// liveShardsLocked lists the shards that have not expired, by shard number.
func (st *stream) liveShardsLocked(nowMs int64) []*shard {
	live := make([]*shard, 0, len(st.shards))
	for _, sh := range st.shards {
		if !st.expiredLocked(sh, nowMs) {
			live = append(live, sh)
		}
	}
	return live
}

// shardLocked finds a shard that has not expired.
func (st *stream) shardLocked(id string, nowMs int64) *shard {
	sh := st.byID[id]
	if sh == nil || st.expiredLocked(sh, nowMs) {
		return nil
	}
	return sh
}

func streamARN(region, name string) string {
	if region == "" {
		region = Region
	}
	return "arn:aws:kinesis:" + region + ":" + AccountID + ":stream/" + name
}

// validateStreamName checks a stream name against the model; member is the
// request member it came from.
func validateStreamName(name, member string, v *violations) {
	if len(name) < 1 || len(name) > 128 {
		v.add(name, member, "have length between 1 and 128")
	} else if !streamNamePattern.MatchString(name) {
		v.add(name, member, "satisfy regular expression pattern: [a-zA-Z0-9_.-]+")
	}
}

// streamNameOf returns the stream a request names by StreamName, StreamARN or
// both. The account and region of an ARN are not checked: every stream of the
// server belongs to the one simulated account.
func streamNameOf(name, arn *string) (string, error) {
	var v violations
	var fromARN string
	if arn != nil {
		if len(*arn) < 1 || len(*arn) > 2048 || !streamARNPattern.MatchString(*arn) {
			v.add(*arn, "streamARN", `satisfy regular expression pattern: arn:aws.*:kinesis:.*:\d{12}:stream/\S+`)
		} else {
			fromARN = (*arn)[strings.LastIndex(*arn, ":stream/")+len(":stream/"):]
			validateStreamName(fromARN, "streamARN", &v)
		}
	}
	if name != nil {
		validateStreamName(*name, "streamName", &v)
	}
	if err := v.err(); err != nil {
		return "", err
	}
	switch {
	case name == nil && arn == nil:
		return "", errorf(codeInvalidArgument, "Either StreamName or StreamARN must be provided.")
	case name != nil && arn != nil && *name != fromARN:
		return "", errorf(codeInvalidArgument, "StreamARN %s and StreamName %s do not identify the same stream.", *arn, *name)
	case name != nil:
		return *name, nil
	}
	return fromARN, nil
}

func errStreamNotFound(name string) error {
	return errorf(codeResourceNotFound, "Stream %s under account %s not found.", name, AccountID)
}

func errShardNotFound(shardID, stream string) error {
	return errorf(codeResourceNotFound, "Shard %s in stream %s under account %s does not exist", shardID, stream, AccountID)
}
