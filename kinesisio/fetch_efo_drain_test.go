package kinesisio

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/readapi"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

const drainShard = "shardId-000000000000"

// drainStream starts a server with a one-shard stream holding n records of size bytes and
// a registered consumer, and returns the records as stored.
func drainStream(t testing.TB, n, size int, opts ...kinesistest.Option) (*kinesistest.Server, string, []kinesistest.StoredRecord) {
	t.Helper()
	const stream = "efo-drain"
	srv := kinesistest.StartT(t, append([]kinesistest.Option{kinesistest.WithStream(stream, 1), kinesistest.WithSubscriptionHeartbeat(time.Hour)}, opts...)...)
	arn, err := srv.RegisterConsumer(stream, "drain")
	if err != nil {
		t.Fatal(err)
	}
	entries := make([]types.PutRecordsRequestEntry, n)
	for i := range entries {
		data := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		copy(data, fmt.Sprintf("%08d", i))
		entries[i] = types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprint(i))}
	}
	putAll(t, srv.Client(), stream, entries)
	stored, err := srv.ShardRecords(stream, drainShard)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != n {
		t.Fatalf("the shard holds %d records, want %d", len(stored), n)
	}
	return srv, arn, stored
}

// subscribeForDrain opens a subscription to the shard at its trim horizon, as the reader
// does, and returns it as the reader keeps it.
func subscribeForDrain(t testing.TB, srv *kinesistest.Server, arn string) *subscription {
	t.Helper()
	sctx, cancel := context.WithCancel(context.Background())
	out, err := srv.Client().SubscribeToShard(sctx, &kinesis.SubscribeToShardInput{
		ConsumerARN: aws.String(arn), ShardId: aws.String(drainShard),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
	}, readapi.OwnProtocol)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return &subscription{shardKey: t.Name(), cancel: cancel, stream: out.GetStream(), opened: time.Now()}
}

// heldBy returns the memory readAhead counts for read, the events s's drain holds and
// whether the drain waits for room.
func heldBy(read string, s *subscription) (held int64, events int, waiting bool) {
	readAhead.mu.Lock()
	defer readAhead.mu.Unlock()
	for _, w := range readAhead.waiting[read] {
		waiting = waiting || w == capWaiter(s.drain)
	}
	return readAhead.held[read], len(s.drain.events), waiting
}

// awaitDrain waits until cond holds for what s's drain holds.
func awaitDrain(t *testing.T, what, read string, s *subscription, cond func(held int64, events int, waiting bool) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		held, events, waiting := heldBy(read, s)
		if cond(held, events, waiting) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: the drain holds %d events, %d bytes counted for the read, waiting for room %v", what, events, held, waiting)
		}
		time.Sleep(5 * time.Millisecond) // polls a condition; asserts nothing by itself
	}
}

// readAll reads s to the end of want's records, the drained events first, and checks that
// they are exactly want's, in order.
func readAll(t *testing.T, s *subscription, want []kinesistest.StoredRecord) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []types.Record
	for len(got) < len(want) {
		ev, _, ended := s.next(ctx, nil)
		if ev == nil {
			t.Fatalf("the subscription stopped after %d of %d records (ended %v: %v)", len(got), len(want), ended, s.stream.Err())
		}
		got = append(got, ev.Records...)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if aws.ToString(got[i].SequenceNumber) != want[i].SequenceNumber || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("record %d is %s, want %s: the drained events and the stream's are not the shard's records in order", i, aws.ToString(got[i].SequenceNumber), want[i].SequenceNumber)
		}
	}
}

// TestDrainOfAParkedSubscriptionStopsAtTheShardsCapAndLosesNothing drains a subscription to
// a shard holding 4 MiB of records with a read cap of 4 MiB, so a quarter of it, 1 MiB, per
// shard: the drain must stop within one event of that, wait, and take up again after the
// call took and parked the subscription; the records read are then exactly the shard's, in
// order, the drained ones first, and the memory counted for the read returns to zero.
func TestDrainOfAParkedSubscriptionStopsAtTheShardsCapAndLosesNothing(t *testing.T) {
	const read = "drain-cap"
	srv, arn, want := drainStream(t, 4096, 1000)
	s := subscribeForDrain(t, srv, arn)
	defer s.close()
	readAhead.takeStats(read)

	const capBytes = 4 << 20
	startDrain(s, read, capBytes)
	awaitDrain(t, "the drain to stop at the shard's cap", read, s, func(_ int64, _ int, waiting bool) bool { return waiting })
	held, events, _ := heldBy(read, s)
	largest := int64(0)
	readAhead.mu.Lock()
	for _, de := range s.drain.events {
		largest = max(largest, de.mem)
	}
	readAhead.mu.Unlock()
	if held < capBytes/readAheadShardShare || held >= capBytes/readAheadShardShare+largest {
		t.Errorf("the drain stopped holding %d bytes, want from the shard's cap %d to less than one event (%d) over it", held, capBytes/readAheadShardShare, largest)
	}

	// The call takes it, reads the first event, parks it again: the drain takes up.
	s.drain.halt()
	ev, _, _ := s.next(context.Background(), nil)
	if ev == nil || aws.ToString(ev.Records[0].SequenceNumber) != want[0].SequenceNumber {
		t.Fatalf("the first event read after the drain is not the shard's first")
	}
	first := len(ev.Records)
	startDrain(s, read, capBytes)
	awaitDrain(t, "the drain to fill the room the call made", read, s, func(_ int64, n int, waiting bool) bool { return waiting && n >= events })
	s.drain.halt()
	readAll(t, s, want[first:])
	if held, _, _ := heldBy(read, s); held != 0 {
		t.Errorf("the read still counts %d bytes held after every drained event was read", held)
	}
	st, _ := readAhead.takeStats(read)
	if st.pages < int64(events) || st.droppedPages != 0 {
		t.Errorf("stats: %d events drained, %d dropped; want at least the %d of the first park, none dropped", st.pages, st.droppedPages, events)
	}
}

// TestDrainOfASubscriptionClosedUnreadCountsWhatItDrops closes a subscription whose drain
// holds events, as a call that resumes at another position or the idle timeout does: the
// memory is released and the events and their bytes are counted as dropped.
func TestDrainOfASubscriptionClosedUnreadCountsWhatItDrops(t *testing.T) {
	const read = "drain-dropped"
	srv, arn, want := drainStream(t, 500, 1000)
	s := subscribeForDrain(t, srv, arn)
	readAhead.takeStats(read)
	startDrain(s, read, 64<<20)
	awaitDrain(t, "every record to be drained", read, s, func(int64, int, bool) bool {
		readAhead.mu.Lock()
		defer readAhead.mu.Unlock()
		n := 0
		for _, de := range s.drain.events {
			n += len(de.ev.Records)
		}
		return n == len(want)
	})
	_, events, _ := heldBy(read, s)
	s.close()
	st, held := readAhead.takeStats(read)
	if held != 0 {
		t.Errorf("the read counts %d bytes held after its only subscription closed", held)
	}
	if st.droppedPages != int64(events) || st.droppedBytes != int64(len(want)*1000) {
		t.Errorf("dropped %d events, %d bytes; want %d events, %d bytes", st.droppedPages, st.droppedBytes, events, len(want)*1000)
	}
}

// TestDrainStoppedByTheReadsCapIsForgottenWhenItsSubscriptionCloses starts a drain while
// the read's other shards hold its whole cap: the drain waits holding nothing, and closing its
// subscription must remove it from the drains waiting for room, which would otherwise keep
// the closed subscription until the read next releases memory.
func TestDrainStoppedByTheReadsCapIsForgottenWhenItsSubscriptionCloses(t *testing.T) {
	const read, capBytes = "drain-read-cap", 4 << 20
	srv, arn, _ := drainStream(t, 100, 1000)
	s := subscribeForDrain(t, srv, arn)
	readAhead.takeStats(read)
	readAhead.mu.Lock()
	readAhead.held[read] += capBytes // the other shards' pages
	readAhead.mu.Unlock()
	defer func() {
		readAhead.mu.Lock()
		readAhead.releaseHeldLocked(read, capBytes)
		readAhead.mu.Unlock()
	}()
	startDrain(s, read, capBytes)
	awaitDrain(t, "the drain to wait for the read's cap", read, s, func(_ int64, _ int, waiting bool) bool { return waiting })
	if _, events, _ := heldBy(read, s); events != 0 {
		t.Fatalf("the drain read %d events past the read's cap", events)
	}
	d := s.drain
	s.close()
	readAhead.mu.Lock()
	defer readAhead.mu.Unlock()
	for _, w := range readAhead.waiting[read] {
		if w == capWaiter(d) {
			t.Errorf("the closed subscription's drain still waits for room")
		}
	}
}

// BenchmarkParkedSubscriptionRate measures how much of a shard's 2 MiB/s an enhanced fan-out
// read keeps when the runner parks the shard for longer than its connection's buffers last:
// each iteration is a park of 4 s (the runner at work on other shards), then one call that
// reads the subscription for 1 s, which reads what the park left, with the server's limits on (events paced to 2 MiB/s).
// "window" parks as WithoutReadAhead does, the events waiting in the connection; "drained"
// parks with the read-ahead's drain at the default cap; "unparked" reads the whole time, the
// rate the server's pacing gives a subscription that is always read. It reports the records' bytes read
// per wall-clock second, as MiB/s and as a fraction of 2 MiB/s. Run it with a count of
// iterations, each takes 5 s:
//
//	go test -run '^$' -bench ParkedSubscriptionRate -benchtime 3x ./kinesisio/
func BenchmarkParkedSubscriptionRate(b *testing.B) {
	const (
		readFor = time.Second
		parkFor = 4 * time.Second
		size    = 1000
	)
	for _, mode := range []string{"unparked", "window", "drained"} {
		name, drained := mode, mode == "drained"
		readFor, parkFor := readFor, parkFor
		if mode == "unparked" {
			// The baseline: a call that reads the whole 5 s, what the server's pacing allows.
			readFor, parkFor = readFor+parkFor, 0
		}
		b.Run(name, func(b *testing.B) {
			// Enough backlog that no iteration reaches the tip at the full rate.
			n := b.N * int((readFor+parkFor).Seconds()*3*(1<<20)) / size
			srv, arn, _ := drainStream(b, n, size)
			srv.SetLimits(true)
			s := subscribeForDrain(b, srv, arn)
			defer s.close()
			read := "bench-" + name
			var bytesRead int64
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if drained {
					startDrain(s, read, defaultReadAheadBytes)
				}
				time.Sleep(parkFor) // the runner works on other shards
				if drained {
					s.drain.halt()
				}
				timer := time.NewTimer(readFor)
				for {
					ev, _, ended := s.next(ctx, timer.C)
					if ended {
						b.Fatalf("the subscription ended: %v", s.stream.Err())
					}
					if ev == nil {
						break
					}
					bytesRead += dataBytes(ev.Records)
				}
			}
			rate := float64(bytesRead) / (1 << 20) / time.Since(start).Seconds()
			b.ReportMetric(rate, "MiB/s")
			b.ReportMetric(rate/2, "of-2MiB/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
