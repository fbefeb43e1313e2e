package backoff

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func responseError(status int, err error) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err}}
}

func TestClassifyFollowsTheSDKAndTreatsKMSThrottlingAsThrottle(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want Class
	}{
		{"throughput exceeded", responseError(400, &types.ProvisionedThroughputExceededException{Message: new(string)}), Throttled},
		{"limit exceeded", responseError(400, &types.LimitExceededException{}), Throttled},
		{"kms throttling", responseError(400, &types.KMSThrottlingException{}), Throttled},
		{"internal failure 500", responseError(500, &types.InternalFailureException{}), Retryable},
		{"service unavailable 503", responseError(503, &smithy.GenericAPIError{Code: "ServiceUnavailable"}), Retryable},
		{"expired iterator", responseError(400, &types.ExpiredIteratorException{}), Fatal},
		{"not found", responseError(400, &types.ResourceNotFoundException{}), Fatal},
		{"invalid argument", responseError(400, &types.InvalidArgumentException{}), Fatal},
		{"cancelled", fmt.Errorf("call: %w", context.Canceled), Fatal},
		{"nil", nil, Fatal},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("%s: Classify = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDelayGrowsExponentiallyWithinJitterBoundsAndCaps(t *testing.T) {
	p := Policy{Retries: 10, Initial: 100 * time.Millisecond, Max: time.Second}
	for attempt, step := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		step *= time.Millisecond
		for i := 0; i < 200; i++ {
			d := p.Delay(attempt, Retryable)
			if d < step/2 || d > step {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, step/2, step)
			}
		}
	}
	for i := 0; i < 200; i++ {
		if d := p.Delay(0, Throttled); d < 100*time.Millisecond || d > 200*time.Millisecond {
			t.Fatalf("throttled first delay %v outside [100ms, 200ms]", d)
		}
	}
}

func TestDoRetriesTransientErrorsThenSucceeds(t *testing.T) {
	p := Policy{Retries: 3, Initial: time.Microsecond, Max: time.Microsecond}
	calls, retries := 0, 0
	err := Do(context.Background(), p, func(context.Context) error {
		calls++
		if calls < 3 {
			return responseError(500, &types.InternalFailureException{})
		}
		return nil
	}, func(attempt int, err error, class Class, wait time.Duration) {
		retries++
		if attempt != retries || class != Retryable {
			t.Errorf("onRetry(%d, %v) on retry %d", attempt, class, retries)
		}
	})
	if err != nil || calls != 3 || retries != 2 {
		t.Fatalf("Do = %v after %d calls and %d retries, want nil after 3 and 2", err, calls, retries)
	}
}

func TestDoGivesUpAfterRetriesAndStopsAtFatalErrors(t *testing.T) {
	p := Policy{Retries: 2, Initial: time.Microsecond, Max: time.Microsecond}
	calls := 0
	throttle := responseError(400, &types.ProvisionedThroughputExceededException{})
	err := Do(context.Background(), p, func(context.Context) error { calls++; return throttle }, nil)
	var pte *types.ProvisionedThroughputExceededException
	if calls != 3 || !errors.As(err, &pte) {
		t.Fatalf("Do = %v after %d calls, want a wrapped throttle after 3", err, calls)
	}
	calls = 0
	err = Do(context.Background(), p, func(context.Context) error {
		calls++
		return responseError(400, &types.ResourceNotFoundException{})
	}, nil)
	var nf *types.ResourceNotFoundException
	if calls != 1 || !errors.As(err, &nf) {
		t.Fatalf("Do = %v after %d calls, want the fatal error after 1", err, calls)
	}
}

func TestDoStopsWaitingWhenTheContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := Policy{Retries: 5, Initial: time.Hour, Max: time.Hour}
	err := Do(ctx, p, func(context.Context) error {
		return responseError(503, &smithy.GenericAPIError{Code: "ServiceUnavailable"})
	}, func(int, error, Class, time.Duration) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
}
