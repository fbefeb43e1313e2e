package kinesisio

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/aws/smithy-go"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/leasetable"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The errors of the read and the write are matched where the DoFns return them, before a
// runner turns them into text: each test drives the DoFns directly, with the real SDK
// against the test server (and dynalite for the table).

// boundedRead runs ReadBounded's discovery and then each shard's read in this process, and
// returns the first error.
func boundedRead(ctx context.Context, stream string, opts []ReadOption) error {
	cfg := buildConfig(targetReadBounded, opts)
	disc := &discoverBoundedFn{Spec: newDiscoverySpec(stream, cfg)}
	var shards []shardDescriptor
	if err := disc.ProcessElement(ctx, nil, func(d shardDescriptor) { shards = append(shards, d) }); err != nil {
		return err
	}
	fn := &readBoundedFn{shardFn{Spec: newReadSpec(stream, cfg)}}
	defer fn.Teardown()
	for _, d := range shards {
		rt := fn.CreateTracker(fn.CreateInitialRestriction(d))
		if err := fn.ProcessElement(ctx, rt, d, func(beam.EventTime, Record) {}, func(beam.EventTime, commitToken) {}); err != nil {
			return err
		}
	}
	return nil
}

// serverOptions reach srv with credentials and region of their own (connect's are fixed).
func serverOptions(srv *kinesistest.Server, region string, creds ...ReadOption) []ReadOption {
	return append([]ReadOption{WithEndpoint(srv.URL()), WithRegion(region), WithRetries(1, 5*time.Millisecond, 10*time.Millisecond)}, creds...)
}

// assertKind fails t unless err matches want and none of the other kinds.
func assertKind(t *testing.T, err, want error, says ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one matching %v", want)
	}
	for _, kind := range []error{ErrStreamNotFound, ErrNoCredentials, ErrAccessDenied, ErrConsumerLimit, ErrLeaseHeld, ErrDataLoss, ErrNeverReached} {
		if got := errors.Is(err, kind); got != (kind == want) {
			t.Errorf("errors.Is(err, %v) = %v; the error: %v", kind, got, err)
		}
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not say %q: %v", s, err)
		}
	}
}

func TestAMissingStreamIsErrStreamNotFound(t *testing.T) {
	srv := kinesistest.StartT(t, kinesistest.WithStream("real", 1))
	ctx := t.Context()
	err := boundedRead(ctx, "missing", connect(srv))
	assertKind(t, err, ErrStreamNotFound, "listing the shards of stream missing", "ResourceNotFoundException")

	cfg := buildConfig(targetWrite, to(srv))
	w := &writeFn{Stream: "missing", Client: cfg.client, Retry: cfg.retry, Write: cfg.write}
	assertKind(t, w.Setup(ctx), ErrStreamNotFound, `kinesisio.Write to "missing"`, "ResourceNotFoundException")
}

func TestNoCredentialsIsErrNoCredentials(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_WEB_IDENTITY_TOKEN_FILE": ""} {
		t.Setenv(k, v)
	}
	srv := kinesistest.StartT(t, kinesistest.WithStream("real", 1))
	err := boundedRead(t.Context(), "real", serverOptions(srv, "us-east-1"))
	assertKind(t, err, ErrNoCredentials, "listing the shards of stream real", "get credentials")
	if n := srv.CallCount("ListShards"); n != 0 {
		t.Errorf("%d ListShards calls reached the server without credentials", n)
	}
}

func TestRefusedCredentialsAreErrAccessDenied(t *testing.T) {
	expired := kinesistest.Credential{AccessKeyID: "ASIAEXPIRED", SecretAccessKey: "expired-secret", SessionToken: "expired-token", Expires: time.Now().Add(-time.Minute)}
	srv := kinesistest.StartT(t, kinesistest.WithStream("real", 1), kinesistest.WithRegion("eu-west-1"), kinesistest.WithCredentials(kinesistest.TestCredential, expired))
	key := WithStaticCredentials(kinesistest.TestCredential.AccessKeyID, kinesistest.TestCredential.SecretAccessKey)
	for _, c := range []struct {
		name, code string
		opts       []ReadOption
	}{
		{"unknown key", "UnrecognizedClientException", serverOptions(srv, "eu-west-1", WithStaticCredentials("AKIAUNKNOWN", "whatever"))},
		{"expired session token", "ExpiredTokenException", serverOptions(srv, "eu-west-1",
			WithStaticCredentials(expired.AccessKeyID, expired.SecretAccessKey), WithSessionToken(expired.SessionToken))},
		{"signed for another region", "InvalidSignatureException", serverOptions(srv, "us-east-1", key)},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := boundedRead(t.Context(), "real", c.opts)
			assertKind(t, err, ErrAccessDenied, "listing the shards of stream real", c.code)
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != c.code {
				t.Errorf("errors.As finds no smithy.APIError with code %s in %v", c.code, err)
			}
		})
	}
	if err := boundedRead(t.Context(), "real", serverOptions(srv, "eu-west-1", key)); err != nil {
		t.Errorf("with the right key and region: %v", err)
	}
}

func TestAStreamAtItsConsumerLimitIsErrConsumerLimit(t *testing.T) {
	const stream = "full"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	for i := range consumersPerStream {
		if _, err := srv.RegisterConsumer(stream, fmt.Sprintf("app-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	err := boundedRead(t.Context(), stream, connect(srv, WithEnhancedFanOut("one-more"), WithRetries(1, 5*time.Millisecond, 10*time.Millisecond)))
	assertKind(t, err, ErrConsumerLimit, "the limit of 20", "LimitExceededException")
}

func TestATrimmedPositionIsErrDataLoss(t *testing.T) {
	const stream = "trimmed-kind"
	srv, trimmed := trimmedStream(t, stream)
	err := boundedRead(t.Context(), stream, connect(srv, WithStartingPosition(ShardPositions(AfterSequenceNumber("shardId-000000000000", trimmed)))))
	assertKind(t, err, ErrDataLoss, "AFTER_SEQUENCE_NUMBER "+trimmed, "lost to the stream's retention")
}

func TestALeaseHeldByALiveOwnerIsErrLeaseHeld(t *testing.T) {
	const stream, table, shard = "leased", "held-positions", "shardId-000000000000"
	srv := kinesistest.StartT(t, kinesistest.WithStream(stream, 1))
	dyn := startDynalite(t)
	ctx := t.Context()
	tab := leasetable.New(emulatorsDynamoDB(dyn), table)
	if _, err := tab.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	held, _, err := tab.Acquire(ctx, leasetable.Lease{ShardID: shard, Checkpoint: leasetable.TrimHorizon}, "other-job")
	if err != nil {
		t.Fatal(err)
	}
	// The other job is alive: it renews its lease faster than the lease duration.
	renewCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for renewCtx.Err() == nil {
			if l, err := tab.Renew(renewCtx, held, "other-job"); err == nil {
				held = l
			}
			select {
			case <-renewCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	defer wg.Wait()
	defer stop()
	err = boundedRead(ctx, stream, connect(srv, WithStartingPosition(TrimHorizon()), WithCheckpointTable(table), WithCheckpointTableEndpoint(dyn),
		WithCheckpointLeaseDuration(300*time.Millisecond)))
	assertKind(t, err, ErrLeaseHeld, "checkpoint table "+table, `owner "other-job"`, "WithCheckpointTakeover()")
}
