package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// message is what the producer writes: a unique id, its partition key, the key's sequence
// number (1, 2, ... per key) and when it was sent. The n-th message (from 0) has id n, key
// n mod keys, so the producer keeps only how many it made: its memory stays flat.
type message struct {
	ID  string `json:"id"`
	Key string `json:"key"`
	Seq int    `json:"seq"`
	TMs int64  `json:"t"`
}

// producer writes one message per key per tick until its end, resending failed entries
// before the key's next message, so that each key's messages arrive in sequence order. It
// stops resending at its hard stop: an entry still unstored then is given up, and the ledger
// reports it apart from what the connector lost, because a read with an end owes only the
// records that arrived before that end.
type producer struct {
	done chan struct{}
	// produced is how many messages the producer made: ids 0 to produced-1.
	produced int
	retried  int
	// givenUp counts the entries still unstored at the hard stop.
	givenUp int
}

// producerTimes are a producer's clock: it starts a batch a tick until end, and sends nothing
// at or after hardStop. lastDelay holds back the last batch's first attempt, as a producer
// slowed at its end (--producer_end_delay).
type producerTimes struct {
	end, hardStop time.Time
	lastDelay     time.Duration
}

func startProducer(ctx context.Context, srv service, stream string, rate, keys int, at producerTimes) *producer {
	p := &producer{done: make(chan struct{})}
	client := srv.Client()
	tick := time.Duration(float64(time.Second) * float64(keys) / float64(rate))
	go func() {
		defer close(p.done)
		seq := make([]int, keys)
		n := 0
		t := time.NewTicker(tick)
		defer t.Stop()
		for time.Now().Before(at.end) {
			batch := make([]message, keys)
			for k := range keys {
				seq[k]++
				batch[k] = message{ID: strconv.Itoa(n), Key: fmt.Sprintf("key-%02d", k), Seq: seq[k]}
				n++
			}
			if at.lastDelay > 0 && !time.Now().Add(tick).Before(at.end) {
				select {
				case <-time.After(min(at.lastDelay, time.Until(at.hardStop))):
				case <-ctx.Done():
				}
			}
			p.givenUp += p.put(ctx, client, stream, batch, at.hardStop)
			p.produced += len(batch)
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return p
}

// put writes batch, resending what failed until every entry is stored or hardStop comes.
// It returns how many entries it gave up. A call cut short by hardStop may still have
// stored its entries: the ledger takes what was stored from the stream itself.
func (p *producer) put(ctx context.Context, client *kinesis.Client, stream string, batch []message, hardStop time.Time) int {
	ctx, cancel := context.WithDeadline(ctx, hardStop)
	defer cancel()
	pending := batch
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > 0 {
			p.retried += len(pending)
			select { // backoff between resends
			case <-time.After(min(time.Duration(attempt)*20*time.Millisecond, time.Second)):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			return len(pending)
		}
		entries := make([]types.PutRecordsRequestEntry, len(pending))
		now := time.Now().UnixMilli()
		for i := range pending {
			pending[i].TMs = now
			data, _ := json.Marshal(pending[i])
			entries[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(pending[i].Key), Data: data}
		}
		out, err := client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			if attempt%50 == 49 {
				log.Printf("soak producer: PutRecords still failing after %d attempts: %v", attempt+1, err)
			}
			continue
		}
		var failed []message
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				failed = append(failed, pending[i])
			}
		}
		pending = failed
	}
	return 0
}

// wait waits for the producer to end and returns how many messages it produced.
func (p *producer) wait() int {
	<-p.done
	return p.produced
}
