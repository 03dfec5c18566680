package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/MrVSiK/gotry/resilience"
)

// Exponential doubles the delay from base, capped at max; the jittered
// strategies draw around the same curve.
func ExampleExponential() {
	b := resilience.Exponential(100*time.Millisecond, time.Second)
	var prev time.Duration
	for retry := 1; retry <= 5; retry++ {
		prev = b.Delay(retry, prev)
		fmt.Print(prev, " ")
	}
	fmt.Println()
	// Output: 100ms 200ms 400ms 800ms 1s
}

// Any function can be a Backoff; this one grows linearly.
func ExampleBackoffFunc() {
	linear := resilience.BackoffFunc(func(retry int, prev time.Duration) time.Duration {
		return time.Duration(retry) * 200 * time.Millisecond
	})
	fmt.Println(linear.Delay(1, 0), linear.Delay(2, 200*time.Millisecond), linear.Delay(3, 400*time.Millisecond))
	// Output: 200ms 400ms 600ms
}

// busyError is what a client library might return for an overloaded
// server: it says how long to wait, as an HTTP Retry-After does.
type busyError struct{ wait time.Duration }

func (e busyError) Error() string             { return "busy" }
func (e busyError) RetryAfter() time.Duration { return e.wait }

// An error with a RetryAfter method dictates the delay before the next
// retry instead of the backoff.
func ExampleRetry_retryAfter() {
	r := resilience.NewRetrier(
		resilience.WithBackoff(resilience.Constant(time.Hour)), // never used here
		resilience.WithHooks(resilience.Hooks{OnRetry: func(e resilience.RetryEvent) {
			fmt.Println("retry in", e.Delay, "from the error:", e.FromRetryAfter)
		}}),
	)
	calls := 0
	v, err := resilience.Retry(context.Background(), r, "quota.check", func(context.Context) (int, error) {
		if calls++; calls == 1 {
			return 0, fmt.Errorf("check: %w", busyError{wait: time.Millisecond})
		}
		return 7, nil
	})
	fmt.Println(v, err)
	// Output:
	// retry in 1ms from the error: true
	// 7 <nil>
}

// RetryIf sees the result as well as the error: here a result that is not
// ready yet is retried.
func ExampleRetryIf() {
	r := resilience.NewRetrier(resilience.WithMaxAttempts(5),
		resilience.WithBackoff(resilience.Constant(time.Millisecond)))
	polls := 0
	status, err := resilience.Retry(context.Background(), r, "job.status", func(context.Context) (string, error) {
		if polls++; polls < 3 {
			return "pending", nil
		}
		return "done", nil
	}, resilience.RetryIf(func(s string, err error) bool { return err != nil || s == "pending" }))
	fmt.Println(status, err, polls)
	// Output: done <nil> 3
}

// A breaker per key: after FailureThreshold consecutive failures, calls with
// that key fail at once with ErrCircuitOpen, without running fn.
func ExampleWithBreaker() {
	r := resilience.NewRetrier(
		resilience.WithMaxAttempts(1),
		resilience.WithBreaker(resilience.BreakerConfig{FailureThreshold: 2, OpenDuration: time.Minute}),
	)
	runs := 0
	fail := func(context.Context) (int, error) { runs++; return 0, errors.New("unavailable") }
	for i := 0; i < 3; i++ {
		_, err := resilience.Retry(context.Background(), r, "inventory", fail)
		h, _ := r.Stats().Host("inventory")
		fmt.Println(errors.Is(err, resilience.ErrCircuitOpen), runs, h.Breaker)
	}
	// Output:
	// false 1 closed
	// false 2 open
	// true 2 open
}
