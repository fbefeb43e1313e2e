package kinesisio

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/errkind"
)

// defaultStartupTimeout is how long a Read that has never listed its stream's shards
// retries before it fails: long enough for a network or a service that is slow to come up
// as the job starts, short enough that a mistyped endpoint or region shows within minutes.
const defaultStartupTimeout = 3 * time.Minute

// WithStartupTimeout bounds how long Read goes on trying to list its stream's shards when
// it has not once succeeded since it started (default 3 minutes). Listing is what a read
// does first, so a read that never gets an answer is most likely pointed at the wrong
// endpoint or region, or has no network path to it; after d of failed attempts it fails
// with ErrNeverReached and an error naming the endpoint and the last error. A read that
// has listed the shards once (also before a restore from a checkpoint or savepoint) rides
// out any later outage. 0 rides out from the start, without a bound. It is refused on
// ReadBounded, which lists the shards once and fails on the first listing that fails after
// its retries.
func WithStartupTimeout(d time.Duration) ReadOption {
	return readOnly{option{name: "WithStartupTimeout", apply: func(c *config) error {
		if d < 0 {
			return fmt.Errorf("the startup timeout %v must not be negative (0 rides out without a bound)", d)
		}
		c.read.startupTimeout = d
		return nil
	}}}
}

// neverReached is called after a listing of the shards failed with err, a failure
// discovery rides out. While the read has never listed them (rest has no completed poll,
// and this DoFn has not listed them either), it returns the error that fails the read
// once the first attempt, at attemptMs, is StartupTimeout behind; otherwise nil.
func (fn *discoverFn) neverReached(ctx context.Context, rest discoveryRestriction, attemptMs int64, err error) error {
	if fn.Spec.Startup <= 0 || rest.LastPollMs > 0 || fn.listed {
		return nil
	}
	if fn.firstAttemptMs == 0 {
		fn.firstAttemptMs = attemptMs
		log.Warnf(ctx, "kinesisio: the read of stream %s has not listed its shards at %s yet; it fails if it cannot within %v of its start (WithStartupTimeout): %v",
			fn.Spec.Stream, fn.api.Endpoint(), fn.Spec.Startup, err)
	}
	waited := time.Since(time.UnixMilli(fn.firstAttemptMs))
	if waited < fn.Spec.Startup {
		return nil
	}
	return errkind.Mark(errkind.NeverReached, fmt.Errorf("kinesisio: the read of stream %s could not list its shards at %s once in %v since it started; check the endpoint, the region and the network path to it (WithStartupTimeout sets this bound; 0 waits without one): %w",
		fn.Spec.Stream, fn.api.Endpoint(), waited.Round(time.Second), err))
}
