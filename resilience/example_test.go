package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/MrVSiK/gotry/resilience"
)

// Retry runs any function under a Retrier's policy: here a flaky lookup
// that fails twice, then answers.
func ExampleRetry() {
	r := resilience.NewRetrier(resilience.WithMaxAttempts(3),
		resilience.WithBackoff(resilience.Constant(time.Millisecond)))
	calls := 0
	v, err := resilience.Retry(context.Background(), r, "config.load", func(context.Context) (string, error) {
		calls++
		if calls < 3 {
			return "", errors.New("connection reset")
		}
		return "ok", nil
	})
	fmt.Println(v, err, calls)
	// Output: ok <nil> 3
}

// A permanent error ends the call at once; giving up after several attempts
// returns a *resilience.Error that says why.
func ExampleRetry_giveUp() {
	r := resilience.NewRetrier(resilience.WithMaxAttempts(2),
		resilience.WithBackoff(resilience.Constant(0)))
	_, err := resilience.Retry(context.Background(), r, "db.get", func(context.Context) (int, error) {
		return 0, resilience.Permanent(errors.New("no such row"))
	})
	fmt.Println(err)

	_, err = resilience.Retry(context.Background(), r, "db.get", func(context.Context) (int, error) {
		return 0, errors.New("timeout")
	})
	var gave *resilience.Error
	fmt.Println(errors.As(err, &gave), gave.Attempts, gave.Reason)
	// Output:
	// no such row
	// true 2 attempts_exhausted
}

// One Retrier per dependency, shared by every call to it, so its budget and
// breakers have memory. Hooks observe every call (telemetry's
// Telemetry.Retrier option is the usual set); here one counts the retries,
// and Stats reads the breaker.
func ExampleNewRetrier() {
	retries := 0
	r := resilience.NewRetrier(
		resilience.WithMaxAttempts(4),
		resilience.WithBackoff(resilience.ExponentialJitter(time.Millisecond, 10*time.Millisecond)),
		resilience.WithPerAttemptTimeout(time.Second),
		resilience.WithBreaker(resilience.BreakerConfig{FailureThreshold: 5}),
		resilience.WithHooks(resilience.Hooks{
			OnRetry: func(e resilience.RetryEvent) { retries++ },
		}),
	)
	n := 0
	_, err := resilience.Retry(context.Background(), r, "queue.publish", func(context.Context) (int, error) {
		if n++; n < 3 {
			return 0, errors.New("broker busy")
		}
		return n, nil
	})
	st, _ := r.Stats().Host("queue.publish")
	fmt.Println(err, retries, st.Breaker)
	// Output: <nil> 2 closed
}

// echo is an adapter of the engine to a made-up protocol: an Operation
// whose attempts send a message and whose results are replies.
type echo struct {
	msg   string
	sends int
}

// Prepare allows every attempt the engine offers: the message can be resent.
func (o *echo) Prepare(n int) (int, resilience.EndReason, error) { return n, 0, nil }

// Do sends one attempt; the first one is lost.
func (o *echo) Do(ctx context.Context, a resilience.AttemptInfo) (string, error) {
	o.sends++
	if a.Number == 1 {
		return "", errors.New("lost")
	}
	return "echo: " + o.msg, nil
}

// Classify retries errors; a reply is final.
func (o *echo) Classify(v string, err error, _ resilience.AttemptInfo) resilience.Verdict {
	return resilience.Verdict{Retryable: err != nil}
}

// Retain and Release have nothing to free: a reply holds no connection.
func (o *echo) Retain(_ context.Context, v string) string { return v }
func (o *echo) Release(string)                            {}

// An adapter for another protocol is an Operation run by Execute on an
// Engine shared by every call to one downstream; the engine schedules the
// attempts, sleeps, spends the budget, asks the breaker and fires the hooks.
func ExampleExecute() {
	// The engine's settings are every call's policy; a call's Policy
	// overrides them field by field (its zero fields take the engine's).
	e := resilience.NewEngine(resilience.Settings{BudgetRatio: 0.1, Backoff: resilience.Constant(time.Millisecond)},
		func(*resilience.Engine) resilience.Hooks {
			return resilience.Hooks{OnCallEnd: func(e resilience.CallEndEvent) {
				fmt.Println("call", e.Key, "ended:", e.Reason, "after", e.Attempts, "attempts")
			}}
		})
	op := &echo{msg: "hello"}
	res := resilience.Execute(context.Background(), e, resilience.Call[string]{Key: "echo-server", Op: op})
	defer res.Finish(nil) // the caller is done with the result
	fmt.Println(res.Value, res.Err, op.sends)
	// Output:
	// call echo-server ended: success after 2 attempts
	// echo: hello <nil> 2
}
