// Package backoff is the connector's one retry mechanism: it classifies errors from Kinesis
// calls and waits between attempts with capped exponential backoff and jitter.
package backoff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Class is what a caller should do about an error.
type Class int

const (
	// Fatal errors cannot succeed on retry: bad input, unknown resources, denied access,
	// cancelled contexts.
	Fatal Class = iota
	// Retryable errors are transient faults: 5xx responses, dropped connections, timeouts.
	Retryable
	// Throttled errors say the caller is over a limit; retry after a longer wait.
	Throttled
)

func (c Class) String() string {
	switch c {
	case Retryable:
		return "retryable"
	case Throttled:
		return "throttled"
	}
	return "fatal"
}

// Classify sorts err using the SDK's own retry classification (so that 5xx, connection
// errors and the throttling codes behave as they do in aws-sdk-go-v2), plus
// KMSThrottlingException, which the SDK does not treat as a throttle but is one.
func Classify(err error) Class {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Fatal
	}
	var kmsThrottle *types.KMSThrottlingException
	if errors.As(err, &kmsThrottle) {
		return Throttled
	}
	for _, t := range retry.DefaultThrottles {
		if t.IsErrorThrottle(err) == aws.TrueTernary {
			return Throttled
		}
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary {
		return Retryable
	}
	return Fatal
}

// Policy is a retry policy: up to Retries retries after the first attempt, waiting about
// Initial before the first retry, doubling each time up to Max.
type Policy struct {
	Retries int
	Initial time.Duration
	Max     time.Duration
}

// Delay is the wait before retry number attempt (0 for the first retry). It uses "equal
// jitter": half the exponential step is fixed and half is random, so concurrent workers
// spread out without ever retrying immediately. Throttled errors wait twice as long, since
// the limit they hit refills over a second.
func (p Policy) Delay(attempt int, class Class) time.Duration {
	step := p.Initial
	for i := 0; i < attempt && step < p.Max; i++ {
		step *= 2
	}
	if class == Throttled {
		step *= 2
	}
	if step > p.Max {
		step = p.Max
	}
	if step <= 0 {
		return 0
	}
	half := step / 2
	return half + rand.N(step-half+1)
}

// Do calls fn until it succeeds, returns a fatal error, or the retries are used up. Before
// each retry it calls onRetry (which may be nil) with the attempt number, the error and the
// wait, then sleeps unless ctx is done. The returned error wraps the last failure and says
// how many attempts were made.
func Do(ctx context.Context, p Policy, fn func(context.Context) error, onRetry func(attempt int, err error, class Class, wait time.Duration)) error {
	for attempt := 0; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		class := Classify(err)
		if class == Fatal {
			return err
		}
		if attempt >= p.Retries {
			return fmt.Errorf("gave up after %d attempts: %w", attempt+1, err)
		}
		wait := p.Delay(attempt, class)
		if onRetry != nil {
			onRetry(attempt+1, err, class, wait)
		}
		if err := Sleep(ctx, wait); err != nil {
			return fmt.Errorf("stopped retrying after %d attempts (%v): %w", attempt+1, err, ctx.Err())
		}
	}
}

// Sleep waits for d or until ctx is done, whichever is first.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
