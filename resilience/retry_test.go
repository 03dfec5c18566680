package resilience

import (
	"context"
	"errors"
	"fmt"
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
	r := NewRetrier(WithClock(fc), WithMaxAttempts(2), WithBackoff(Constant(time.Hour)),
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
		{func() { WithPerAttemptTimeout(-1) }, "WithPerAttemptTimeout"},
		{func() { WithHedging(-1, 1) }, "WithHedging"},
		{func() { WithRetryIf(nil) }, "WithRetryIf"},
		{func() { WithRetryBudget(-1, 0) }, "WithRetryBudget"},
		{func() { WithRetryBudget(0.1, -1) }, "WithRetryBudget"},
		{func() { WithRetryBudget(0.1, 1001) }, "WithRetryBudget"},
		{func() { WithBreaker(BreakerConfig{OpenDuration: -1}) }, "WithBreaker"},
	} {
		if msg := panicMessage(c.fn); !strings.Contains(msg, c.want) {
			t.Errorf("panic %q does not name %s", msg, c.want)
		}
	}
}

// TestRetrierOptionsPanicNotNewRetrier: the option constructors panic where
// they are called; NewRetrier itself never panics, and ignores nil options.
func TestRetrierOptionsPanicNotNewRetrier(t *testing.T) {
	var opt Option
	msg := panicMessage(func() { opt = WithMaxAttempts(0) })
	if opt != nil || !strings.Contains(msg, "WithMaxAttempts") {
		t.Fatalf("WithMaxAttempts(0): option %v, panic %q; want a panic naming it", opt, msg)
	}
	if msg := panicMessage(func() { NewRetrier(nil, WithMaxAttempts(1), nil) }); msg != "" {
		t.Fatalf("NewRetrier with nil options panicked: %s", msg)
	}
}

// WithHooksFor's func runs once, inside NewRetrier, with the Retrier being
// built, and its hooks run in option order beside WithHooks'.
func TestWithHooksForGetsItsRetrier(t *testing.T) {
	var order []string
	var seen []*Retrier
	r := NewRetrier(
		WithHooks(Hooks{OnCallEnd: func(CallEndEvent) { order = append(order, "first") }}),
		WithHooksFor(func(r *Retrier) Hooks {
			seen = append(seen, r)
			return Hooks{OnCallEnd: func(CallEndEvent) { order = append(order, "second") }}
		}),
	)
	if len(seen) != 1 || seen[0] != r {
		t.Fatalf("WithHooksFor's func saw %v, want the Retrier NewRetrier returned, once", seen)
	}
	if _, err := Retry(context.Background(), r, "k", func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"first", "second"}) {
		t.Errorf("OnCallEnd calls %v, want first, second", order)
	}
	if msg := panicMessage(func() { WithHooksFor(nil) }); !strings.Contains(msg, "WithHooksFor") {
		t.Errorf("WithHooksFor(nil) panicked with %q, want a message naming it", msg)
	}
}

func TestEndReasonStrings(t *testing.T) {
	want := map[EndReason]string{
		ReasonSuccess: "success", ReasonNotRetryable: "not_retryable", ReasonAttemptsExhausted: "attempts_exhausted",
		ReasonBudgetExhausted: "budget_exhausted", ReasonCircuitOpen: "circuit_open", ReasonRetryAfterTooLong: "retry_after_too_long",
		ReasonPastDeadline: "past_deadline", ReasonNotIdempotent: "not_idempotent", ReasonBodyNotReplayable: "body_not_replayable",
		ReasonCanceled: "canceled", ReasonOverloaded: "overloaded", ReasonPushback: "pushback",
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

// TestRetryAttemptContextsEndWhenRetryReturns: whatever the policy, every
// context an attempt was given is cancelled by the time Retry returns, even
// an attempt that shares the call's context (no hedging, no per-attempt
// timeout) and even when the caller's context lives on.
func TestRetryAttemptContextsEndWhenRetryReturns(t *testing.T) {
	cases := []struct {
		name    string
		opts    []Option
		results []error // attempt n returns results[n-1]; nil is a success
	}{
		{"first attempt wins", nil, []error{nil}},
		{"retried then wins", nil, []error{errBoom, errBoom, nil}},
		{"gives up", nil, []error{errBoom, errBoom, errBoom}},
		{"not retryable", nil, []error{Permanent(errBoom)}},
		{"per-attempt timeout", []Option{WithPerAttemptTimeout(time.Hour)}, []error{errBoom, nil}},
		{"hedging", []Option{WithHedging(time.Hour, 1)}, []error{errBoom, nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewRetrier(append([]Option{WithMaxAttempts(3), WithBackoff(Constant(0))}, c.opts...)...)
			var ctxs []context.Context
			_, _ = Retry(context.Background(), r, "op", func(ctx context.Context) (int, error) {
				ctxs = append(ctxs, ctx)
				return len(ctxs), c.results[len(ctxs)-1]
			})
			if len(ctxs) != len(c.results) {
				t.Fatalf("%d attempts, want %d", len(ctxs), len(c.results))
			}
			for i, ctx := range ctxs {
				if ctx.Err() == nil {
					t.Errorf("attempt %d's context is still live after Retry returned", i+1)
				}
			}
		})
	}
}

// TestRetryReleasesKeptResultWhenALaterAttemptPanics: a result kept as
// retryable (RetryIf) is handed to ReleaseWith when a later attempt panics,
// and the panic still reaches the caller.
func TestRetryReleasesKeptResultWhenALaterAttemptPanics(t *testing.T) {
	cases := []struct {
		name string
		opts []Option
	}{
		{"sequential", nil},
		{"hedging", []Option{WithHedging(time.Hour, 1)}},
		{"per-attempt timeout", []Option{WithPerAttemptTimeout(time.Hour)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewRetrier(append([]Option{WithMaxAttempts(3), WithBackoff(Constant(0))}, c.opts...)...)
			var mu sync.Mutex
			var released []int
			n := 0
			p := panicValue(func() {
				_, _ = Retry(context.Background(), r, "pool.get", func(context.Context) (int, error) {
					n++
					if n == 2 {
						panic("attempt 2 panicked")
					}
					return n, nil
				},
					RetryIf(func(v int, err error) bool { return v < 5 }), // keep 1, retry
					ReleaseWith(func(v int) { mu.Lock(); released = append(released, v); mu.Unlock() }))
			})
			if p != "attempt 2 panicked" {
				t.Fatalf("panic %v, want the attempt's", p)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(released, []int{1}) {
				t.Fatalf("released %v, want [1] (the kept result)", released)
			}
		})
	}
}

func TestRetryIgnoresNilOption(t *testing.T) {
	r := NewRetrier(WithMaxAttempts(2), WithBackoff(Constant(0)))
	var nilOpt RetryOption[int]
	v, err := Retry(context.Background(), r, "op", func(context.Context) (int, error) { return 7, nil }, nilOpt, ReleaseWith[int](nil), nil)
	if err != nil || v != 7 {
		t.Fatalf("v=%d err=%v", v, err)
	}
}

// panicValue runs fn and returns what it panicked with (nil if it did not).
func panicValue(fn func()) (p any) {
	defer func() { p = recover() }()
	fn()
	return nil
}

// BenchmarkRetrySucceedsFirstTime measures the common case: one attempt that
// succeeds, under a cancelable caller context.
func BenchmarkRetrySucceedsFirstTime(b *testing.B) {
	r := NewRetrier(WithRetryBudget(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fn := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Retry(ctx, r, "op", fn); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRetrierConcurrencyLimit: over the limit, Retry fails at once with an
// error matching ErrOverloaded without running fn; WithMaxKeys bounds the
// keys; both options name themselves on nonsense.
func TestRetrierConcurrencyLimit(t *testing.T) {
	r := NewRetrier(WithMaxKeys(4), WithConcurrencyLimit(ConcurrencyLimit{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, MaxWait: -1}))
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Retry(context.Background(), r, "db", func(context.Context) (int, error) {
			close(held)
			<-release
			return 1, nil
		})
		done <- err
	}()
	<-held
	ran := false
	_, err := Retry(context.Background(), r, "db", func(context.Context) (int, error) { ran = true; return 1, nil })
	if !errors.Is(err, ErrOverloaded) || ran {
		t.Errorf("Retry at the limit: %v (fn ran: %v), want ErrOverloaded without running fn", err, ran)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h, ok := r.Stats().Host("db"); !ok || h.Limit != 1 || h.Shed != 1 || h.InFlight != 0 {
		t.Errorf("Stats for db: %+v, want limit 1, 1 shed, nothing in flight", h)
	}
	for _, c := range []struct {
		f    func()
		want string
	}{
		{func() { WithConcurrencyLimit(ConcurrencyLimit{MaxLimit: -1}) }, "WithConcurrencyLimit: ConcurrencyLimit.MaxLimit"},
		{func() { WithMaxKeys(0) }, "WithMaxKeys"},
	} {
		if msg := panicMessage(c.f); !strings.Contains(msg, c.want) {
			t.Errorf("panic %q, want it to contain %q", msg, c.want)
		}
	}
}

// The Retrier's defaults and options are the transport's (issue #29: the
// Retrier waited for any Retry-After, had no adaptive hedging, and an empty
// key silently turned off its breaker).
func TestRetrierSharesTheTransportsVocabulary(t *testing.T) {
	t.Run("a Retry-After past DefaultMaxRetryAfter ends the call", func(t *testing.T) {
		r := NewRetrier(WithBackoff(Constant(0)))
		calls := 0
		_, err := Retry(context.Background(), r, "k", func(context.Context) (int, error) {
			calls++
			return 0, retryAfterErr{DefaultMaxRetryAfter + time.Second}
		})
		if err == nil || calls != 1 {
			t.Fatalf("%d calls, err %v; want one call ended by the long Retry-After", calls, err)
		}
	})
	t.Run("the empty key has a breaker", func(t *testing.T) {
		r := NewRetrier(WithMaxAttempts(1), WithBreaker(BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour}))
		fail := func(context.Context) (int, error) { return 0, errors.New("down") }
		_, _ = Retry(context.Background(), r, "", fail)
		_, err := Retry(context.Background(), r, "", fail)
		if !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("second call under the empty key: %v, want the open breaker", err)
		}
	})
	t.Run("adaptive hedging learns the key's delay", func(t *testing.T) {
		r := NewRetrier(WithAdaptiveHedging(AdaptiveHedging{MaxExtraLoad: 0.05}, 1))
		if _, err := Retry(context.Background(), r, "k", func(context.Context) (int, error) { return 1, nil }); err != nil {
			t.Fatal(err)
		}
		h, ok := r.Stats().Host("k")
		if !ok || h.HedgeDelay <= 0 || r.Stats().MaxExtraLoad != 0.05 {
			t.Fatalf("stats %+v; want the key's adaptive delay and the cap", r.Stats())
		}
	})
	t.Run("nonsense names the option", func(t *testing.T) {
		for name, f := range map[string]func(){
			"WithAdaptiveHedging": func() { WithAdaptiveHedging(AdaptiveHedging{MaxExtraLoad: 2}, 1) },
			"WithMaxRetryAfter":   func() { WithMaxRetryAfter(-time.Second) },
		} {
			func() {
				defer func() {
					if p := fmt.Sprint(recover()); !strings.Contains(p, name) {
						t.Errorf("%s: panic %q does not name the option", name, p)
					}
				}()
				f()
			}()
		}
	})
}

type retryAfterErr struct{ d time.Duration }

func (e retryAfterErr) Error() string             { return "slow down" }
func (e retryAfterErr) RetryAfter() time.Duration { return e.d }
