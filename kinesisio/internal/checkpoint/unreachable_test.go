package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
)

// A held position only moves forward: an earlier token adds its records and changes
// nothing else, SHARD_END replaces any sequence number and nothing replaces it.
func TestAHeldPositionNeverMovesBack(t *testing.T) {
	ctx := context.Background()
	c := newCheckpointer(Config{Table: "t"}, nil)
	s := c.shard("shardId-000000000001")
	s.held = &Token{ShardID: "shardId-000000000001", Seq: "200", Records: 2}
	steps := []struct {
		tok     Token
		wantSeq string
	}{
		{Token{Seq: "100", Records: 1}, "200"},
		{Token{Seq: "300", Records: 4}, "300"},
		{Token{Seq: leasetable.ShardEnd, Records: 5}, leasetable.ShardEnd},
		{Token{Seq: "400", Records: 7}, leasetable.ShardEnd},
	}
	for i, st := range steps {
		st.tok.ShardID = "shardId-000000000001"
		c.holdLocked(ctx, s, st.tok, nil)
		if s.held.Seq != st.wantSeq {
			t.Fatalf("step %d: held %s, want %s", i, s.held.Seq, st.wantSeq)
		}
	}
	if s.held.Records != 19 {
		t.Errorf("held position covers %d records, want 19 (every token's)", s.held.Records)
	}
	if n := c.stats.unavailable.Load(); n != 4 {
		t.Errorf("checkpoint_table_unavailable %d, want 4", n)
	}
}

// A bounded read's commit waits for its held positions, then fails naming the table and
// the shards.
func TestABoundedCommitFailsWhenItsPositionsStayHeld(t *testing.T) {
	c := newCheckpointer(Config{Table: "positions"}, nil)
	c.shard("shardId-000000000002").heldPrepare = true
	c.shard("shardId-000000000003")
	start := time.Now()
	err := c.AwaitHeld(context.Background(), []string{"shardId-000000000003", "shardId-000000000002"}, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "positions") || !strings.Contains(err.Error(), "shardId-000000000002") || strings.Contains(err.Error(), "shardId-000000000003") {
		t.Fatalf("awaitHeld: %v; want an error naming table positions and shard 2 only", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("awaitHeld gave up after %v, before its budget", d)
	}
	if err := c.AwaitHeld(context.Background(), []string{"shardId-000000000003"}, time.Minute); err != nil {
		t.Errorf("awaitHeld of a shard with nothing held: %v", err)
	}
}

// What counts as an unreachable table, and what as its answer.
func TestTableUnreachable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), true},
		{context.DeadlineExceeded, true},
		{&smithy.GenericAPIError{Code: "ThrottlingException"}, true},
		{&smithy.GenericAPIError{Code: "InternalServerError", Fault: smithy.FaultServer}, true},
		{&smithy.GenericAPIError{Code: "ValidationException", Fault: smithy.FaultClient}, false},
		{&smithy.GenericAPIError{Code: "ResourceNotFoundException", Fault: smithy.FaultClient}, false},
		{fmt.Errorf("gone: %w", leasetable.ErrLeaseGone), false},
		{&leasetable.LostError{ShardID: "s"}, false},
		{&refusedError{"live owner"}, false},
		{context.Canceled, false},
	} {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// The lease renewer warns once per outage: the first failed renewal after a success is the
// one to warn about, and the first success after failures ends the outage.
func TestRenewalFailuresWarnOncePerOutage(t *testing.T) {
	c := &Checkpointer{}
	if d := c.renewalSucceeded(); d != 0 {
		t.Fatalf("a success without failures before ended an outage of %v", d)
	}
	got := []bool{c.renewalFailed(), c.renewalFailed(), c.renewalFailed()}
	if !slices.Equal(got, []bool{true, false, false}) {
		t.Fatalf("warnings of three failed renewals: %v, want [true false false]", got)
	}
	if d := c.renewalSucceeded(); d <= 0 {
		t.Fatalf("the success after failures ended an outage of %v, want > 0", d)
	}
	if d := c.renewalSucceeded(); d != 0 {
		t.Fatalf("a second success ended an outage of %v", d)
	}
	if !c.renewalFailed() {
		t.Fatal("the first failure of a second outage did not warn")
	}
}

// A commit the table does not answer holds its position and starts the retrier once it has
// released its shard's lock: the retrier and the lease renewer hold the checkpointer's lock
// while they take each shard's (anyHeldLocked, anyActiveLocked), so a commit that took the
// checkpointer's lock under its shard's would deadlock with them.
func TestAHeldCommitAndTheRetrierDoNotDeadlock(t *testing.T) {
	// The table's endpoint accepts the commit's connection and closes it once the
	// checkpointer's lock is held, as the retrier or the renewer holds it between passes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if conn, err := ln.Accept(); err == nil {
			accepted <- conn
		}
	}()
	c := newCheckpointer(Config{Table: "t", Owner: "o", LeaseDuration: time.Minute}, nil)
	c.table = leasetable.New(dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String("http://" + ln.Addr().String()),
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		RetryMaxAttempts: 1,
	}), "t")
	tok := Token{Stream: "s", ShardID: "shardId-000000000000", Seq: "100", Records: 1}

	committed := make(chan error, 1)
	go func() { committed <- c.Commit(context.Background(), tok) }()
	var conn net.Conn
	select {
	case conn = <-accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("the commit did not reach the table within 30s")
	}
	c.mu.Lock()
	conn.Close()
	deadline := time.Now().Add(30 * time.Second)
	for c.stats.unavailable.Load() == 0 {
		if time.Now().After(deadline) {
			c.mu.Unlock()
			t.Fatal("the commit whose connection closed was not held within 30s")
		}
		time.Sleep(time.Millisecond)
	}
	checked := make(chan bool, 1)
	go func() {
		held := c.anyHeldLocked()
		c.anyActiveLocked()
		checked <- held
	}()
	select {
	case held := <-checked:
		if !held {
			t.Error("the retrier's check found no held position after the commit was held")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: the retrier's and renewer's checks (checkpointer lock, then each shard's) waited 10s for the shard's lock, which the held commit keeps while it waits for the checkpointer's")
	}
	c.mu.Unlock()
	select {
	case err := <-committed:
		if err != nil {
			t.Fatalf("a commit to an unreachable table is held, not failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held commit did not return within 10s of the checkpointer's lock being released")
	}
	c.mu.Lock()
	retrying := c.retrying
	c.mu.Unlock()
	if !retrying {
		t.Error("the held commit started no retrier")
	}
	// The retrier drops the positions of a lost lease and ends.
	s := c.shard(tok.ShardID)
	s.mu.Lock()
	s.lost = &leasetable.LostError{ShardID: tok.ShardID, Owner: "test-cleanup"}
	s.mu.Unlock()
}
