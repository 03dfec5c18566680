package resilience

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

func TestRetryRetriesErrorsUntilSuccess(t *testing.T) {
	r := NewRetrier(WithMaxAttempts(4), WithBackoff(Constant(0)))
	var n int
	v, err := Retry(context.Background(), r, "db.query", func(context.Context) (string, error) {
		n++
		if n < 3 {
			return "", errBoom
		}
		return "row", nil
	})
	if err != nil || v != "row" || n != 3 {
		t.Fatalf("v=%q err=%v after %d calls", v, err, n)
	}
}

func TestRetryPermanentAndContextErrorsAreNotRetried(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"permanent", Permanent(errBoom)},
		{"canceled", context.Canceled},
		{"wrapped deadline", errors.Join(errors.New("query"), context.DeadlineExceeded)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewRetrier(WithMaxAttempts(4), WithBackoff(Constant(0)))
			n := 0
			_, err := Retry(context.Background(), r, "op", func(context.Context) (int, error) { n++; return 0, c.err })
			if n != 1 || !errors.Is(err, c.err) {
				t.Fatalf("%d calls, err %v", n, err)
			}
		})
	}
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) != nil")
	}
}

func TestRetryIfSeesResultAndError(t *testing.T) {
	r := NewRetrier(WithMaxAttempts(3), WithBackoff(Constant(0)))
	n := 0
	v, err := Retry(context.Background(), r, "queue.publish", func(context.Context) (int, error) { n++; return n, nil },
		RetryIf(func(v int, err error) bool { return v < 2 }))
	if err != nil || v != 2 || n != 2 {
		t.Fatalf("v=%d err=%v n=%d", v, err, n)
	}
}

func TestRetryGiveUpWrapsErrors(t *testing.T) {
	r := NewRetrier(WithMaxAttempts(2), WithBackoff(Constant(0)))
	first := errors.New("first")
	errs := []error{first, errBoom}
	i := 0
	_, err := Retry(context.Background(), r, "op", func(context.Context) (int, error) { i++; return 0, errs[i-1] })
	var ge *Error
	if !errors.As(err, &ge) || ge.Attempts != 2 || !errors.Is(err, first) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "gave up after 2 attempts") {
		t.Fatalf("message %q", err.Error())
	}
}

type throttled struct{ d time.Duration }

func (t throttled) Error() string             { return "throttled" }
func (t throttled) RetryAfter() time.Duration { return t.d }

func TestRetryHonoursRetryAfterError(t *testing.T) {
	fc := fakeclock.New(t0)
	var delays []time.Duration
	r := NewRetrier(withRetrierClock(fc), WithMaxAttempts(2), WithBackoff(Constant(time.Hour)),
		WithHooks(Hooks{OnRetry: func(e RetryEvent) { delays = append(delays, e.Delay) }}))
	n := 0
	done := make(chan error, 1)
	go func() {
		_, err := Retry(context.Background(), r, "op", func(context.Context) (int, error) {
			n++
			if n == 1 {
				return 0, throttled{3 * time.Second}
			}
			return 1, nil
		})
		done <- err
	}()
	fc.WaitForArmed(1, 5*time.Second)
	fc.Advance(3 * time.Second)
	if err := <-done; err != nil || !slices.Equal(delays, []time.Duration{3 * time.Second}) {
		t.Fatalf("err %v delays %v", err, delays)
	}
}

func TestRetryBreakerKeyedByCaller(t *testing.T) {
	r := NewRetrier(WithMaxAttempts(1), WithBreaker(BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour}))
	if _, err := Retry(context.Background(), r, "primary", func(context.Context) (int, error) { return 0, errBoom }); !errors.Is(err, errBoom) {
		t.Fatalf("primary, first call: %v, want %v", err, errBoom)
	}
	if _, err := Retry(context.Background(), r, "primary", func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("primary: %v", err)
	}
	if v, err := Retry(context.Background(), r, "replica", func(context.Context) (int, error) { return 1, nil }); err != nil || v != 1 {
		t.Fatalf("replica affected: %v", err)
	}
}

func TestRetryHedgeReleasesLosingResults(t *testing.T) {
	r := NewRetrier(WithMaxAttempts(2), WithHedging(time.Millisecond, 1))
	var calls atomic.Int32
	var mu sync.Mutex
	var released []int
	slow := make(chan struct{})
	v, err := Retry(context.Background(), r, "cache.get", func(ctx context.Context) (int, error) {
		if calls.Add(1) == 1 {
			<-slow // the first attempt finishes only after the hedge won
			return 1, nil
		}
		return 2, nil
	}, ReleaseWith(func(v int) { mu.Lock(); released = append(released, v); mu.Unlock() }))
	close(slow)
	if err != nil || v != 2 {
		t.Fatalf("v=%d err=%v", v, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(released)
		mu.Unlock()
		if slices.Equal(got, []int{1}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loser's result not released: %v", got)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRetryAttemptStartHookSetsAttemptContext(t *testing.T) {
	type key struct{}
	var kinds []AttemptKind
	r := NewRetrier(WithMaxAttempts(2), WithBackoff(Constant(0)), WithHooks(Hooks{
		OnAttemptStart: func(ctx context.Context, e AttemptStartEvent) context.Context {
			kinds = append(kinds, e.Kind)
			return context.WithValue(ctx, key{}, e.Attempt)
		},
	}))
	var seen []int
	_, err := Retry(context.Background(), r, "op", func(ctx context.Context) (int, error) {
		seen = append(seen, ctx.Value(key{}).(int))
		return 0, errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Retry: %v, want %v", err, errBoom)
	}
	if !slices.Equal(seen, []int{1, 2}) || !slices.Equal(kinds, []AttemptKind{KindInitial, KindRetry}) {
		t.Fatalf("seen %v kinds %v", seen, kinds)
	}
}

func TestRetrierOptionsRejectNonsense(t *testing.T) {
	for _, c := range []struct {
		fn   func()
		want string
	}{
		{func() { WithMaxAttempts(0) }, "WithMaxAttempts"},
		{func() { WithBackoff(nil) }, "WithBackoff"},
		{func() { WithAttemptTimeout(-1) }, "WithAttemptTimeout"},
		{func() { WithHedging(-1, 1) }, "WithHedging"},
		{func() { WithRetryIf(nil) }, "WithRetryIf"},
	} {
		if msg := panicMessage(c.fn); !strings.Contains(msg, c.want) {
			t.Errorf("panic %q does not name %s", msg, c.want)
		}
	}
}

func TestEndReasonStrings(t *testing.T) {
	want := map[EndReason]string{
		ReasonSuccess: "success", ReasonNotRetryable: "not_retryable", ReasonAttemptsExhausted: "attempts_exhausted",
		ReasonBudgetExhausted: "budget_exhausted", ReasonCircuitOpen: "circuit_open", ReasonRetryAfterTooLong: "retry_after_too_long",
		ReasonPastDeadline: "past_deadline", ReasonNotIdempotent: "not_idempotent", ReasonBodyNotReplayable: "body_not_replayable",
		ReasonCanceled: "canceled",
	}
	for r, s := range want {
		if r.String() != s {
			t.Errorf("%d: %q want %q", int(r), r.String(), s)
		}
		if r.GaveUp() == (r == ReasonSuccess || r == ReasonNotRetryable) {
			t.Errorf("%s.GaveUp() wrong", s)
		}
	}
}
