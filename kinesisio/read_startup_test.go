package kinesisio

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// startupOptions read srv's stream with one retry per listing, polls back to back and a
// startup bound of bound.
func startupOptions(url string, bound time.Duration) []ReadOption {
	return []ReadOption{WithEndpoint(url), WithRegion("us-east-1"), WithStaticCredentials("test", "test"),
		WithRetries(1, 5*time.Millisecond, 10*time.Millisecond), WithDescribeShardInterval(10 * time.Millisecond),
		WithStartingPosition(TrimHorizon()), WithStartupTimeout(bound)}
}

// pollUntil calls discovery's ProcessElement on rest until it returns an error or for the
// time given, and returns the error, the time it took and the restriction after the last
// completed poll.
func pollUntil(t *testing.T, fn *discoverFn, rest discoveryRestriction, d time.Duration) (error, time.Duration, discoveryRestriction) {
	t.Helper()
	ctx := t.Context()
	we := newWatermarkEstimator(0)
	start := time.Now()
	for time.Since(start) < d {
		rt := sdf.NewLockRTracker(&discoveryTracker{rest: rest})
		cont, err := fn.ProcessElement(ctx, we, rt, nil, func(beam.EventTime, shardDescriptor) {})
		if err != nil {
			return err, time.Since(start), rest
		}
		if cont == nil || !cont.ShouldResume() {
			t.Fatalf("discovery stopped: %v", cont)
		}
		if _, res, err := rt.TrySplit(0); err == nil && res != nil {
			rest = res.(discoveryRestriction)
		}
	}
	return nil, time.Since(start), rest
}

// refusedURL is the URL of a port nothing listens on.
func refusedURL(t *testing.T) string {
	srv, err := kinesistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	url := srv.URL()
	srv.Close()
	return url
}

func TestAReadThatNeverListedItsShardsFailsAfterTheStartupTimeout(t *testing.T) {
	const bound = 300 * time.Millisecond
	url := refusedURL(t)
	fn := &discoverFn{Spec: newDiscoverySpec("real", buildConfig(targetRead, startupOptions(url, bound)))}
	err, took, _ := pollUntil(t, fn, discoveryRestriction{}, 20*time.Second)
	if !errors.Is(err, ErrNeverReached) {
		t.Fatalf("after %v: %v; want ErrNeverReached", took, err)
	}
	for _, want := range []string{"stream real", "at " + url + " once", "WithStartupTimeout", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if took < bound {
		t.Errorf("the read failed after %v, before its bound of %v", took, bound)
	}
}

func TestAReadThatListedItsShardsOnceRidesOutAnOutage(t *testing.T) {
	const bound = 200 * time.Millisecond
	srv := kinesistest.StartT(t, kinesistest.WithStream("real", 1))
	cfg := buildConfig(targetRead, startupOptions(srv.URL(), bound))
	fn := &discoverFn{Spec: newDiscoverySpec("real", cfg)}
	err, _, rest := pollUntil(t, fn, discoveryRestriction{}, 50*time.Millisecond)
	if err != nil || rest.LastPollMs == 0 {
		t.Fatalf("the first polls: %v (last poll %d)", err, rest.LastPollMs)
	}
	if err := srv.SetOutage(kinesistest.OutageRefuse); err != nil {
		t.Fatal(err)
	}
	if err, took, _ := pollUntil(t, fn, rest, 4*bound); err != nil {
		t.Errorf("the read that had listed its shards failed in an outage after %v: %v", took, err)
	}
	// Restored elsewhere (a new DoFn) from a restriction with a completed poll: it rides out too.
	restored := &discoverFn{Spec: newDiscoverySpec("real", cfg)}
	if err, took, _ := pollUntil(t, restored, rest, 4*bound); err != nil {
		t.Errorf("the restored read failed in an outage after %v: %v", took, err)
	}
}

func TestAStartupTimeoutOfZeroRidesOutFromTheStart(t *testing.T) {
	fn := &discoverFn{Spec: newDiscoverySpec("real", buildConfig(targetRead, startupOptions(refusedURL(t), 0)))}
	if err, took, _ := pollUntil(t, fn, discoveryRestriction{}, time.Second); err != nil {
		t.Errorf("the read without a startup bound failed after %v: %v", took, err)
	}
}

// On a runner, the job fails with the error's text.
func TestAJobWhoseReadNeverListsItsShardsFails(t *testing.T) {
	url := refusedURL(t)
	p, s := beam.NewPipelineWithRoot()
	Read(s, "real", startupOptions(url, 500*time.Millisecond)...)
	err := ptest.Run(p)
	if err == nil {
		t.Fatal("the job ran; want it to fail")
	}
	if !strings.Contains(err.Error(), "could not list its shards at "+url+" once in") {
		t.Errorf("the job's error does not name the endpoint: %v", err)
	}
}

func TestWithStartupTimeoutRefusesANegativeBound(t *testing.T) {
	msg := mustPanic(t, func() { buildConfig(targetRead, []ReadOption{WithStartupTimeout(-time.Second)}) })
	if !strings.Contains(msg, "WithStartupTimeout") || !strings.Contains(msg, "must not be negative") {
		t.Errorf("panic %q does not name the option and the rule", msg)
	}
	msg = mustPanic(t, func() { ReadBounded(beam.NewPipeline().Root(), "s", WithStartupTimeout(time.Minute)) })
	if !strings.Contains(msg, "WithStartupTimeout") || !strings.Contains(msg, "ReadBounded lists the shards once") {
		t.Errorf("ReadBounded with WithStartupTimeout: panic %q; want the option refused as doing nothing there", msg)
	}
	if got := buildConfig(targetRead, []ReadOption(nil)).read.startupTimeout; got != 3*time.Minute {
		t.Errorf("default startup timeout %v; want 3m", got)
	}
}
