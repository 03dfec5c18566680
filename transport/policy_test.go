package transport_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

func TestNoRetryPolicy(t *testing.T) {
	p := transport.NoRetry()
	if p.MaxAttempts != 1 || p.MaxHedges != -1 || p.HedgeDelay != 0 || p.Backoff != nil ||
		p.PerAttemptTimeout != 0 || p.Classifier != nil || p.RetryNonIdempotent {
		t.Errorf("NoRetry() = %+v, want Policy{MaxAttempts: 1, MaxHedges: -1}", p)
	}
	got, ok := transport.PolicyFrom(transport.WithPolicy(context.Background(), p))
	if !ok || got.MaxAttempts != 1 || got.MaxHedges != -1 {
		t.Errorf("PolicyFrom = %+v, %v; want the attached policy", got, ok)
	}
	if _, ok := transport.PolicyFrom(context.Background()); ok {
		t.Errorf("PolicyFrom found a policy in a bare context")
	}
}

func TestPolicyMaxAttempts(t *testing.T) {
	tests := []struct {
		name     string
		policy   transport.Policy
		wantHits int
	}{
		{"zero policy inherits", transport.Policy{}, 3},
		{"more attempts", transport.Policy{MaxAttempts: 5}, 5},
		{"fewer attempts", transport.Policy{MaxAttempts: 2}, 2},
		{"NoRetry", transport.NoRetry(), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, reply(503))
			tr := transport.New(newBase(t), noDelay, transport.WithRetryBudget(0, 0))
			resp, err := tr.RoundTrip(newRequest(t, transport.WithPolicy(context.Background(), tc.policy), http.MethodGet, s.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := s.count(); got != tc.wantHits {
				t.Errorf("server saw %d attempts, want %d", got, tc.wantHits)
			}
		})
	}
}

func TestPolicyBackoff(t *testing.T) {
	fc := newClock()
	s := newScript(t, reply(503), reply(200))
	var retries events[resilience.RetryEvent]
	tr := transport.New(newBase(t), transport.WithClock(fc), transport.WithBackoff(resilience.Constant(time.Hour)),
		transport.WithHooks(transport.Hooks{OnRetry: retries.add}))
	ctx := transport.WithPolicy(testCtx(t), transport.Policy{
		Backoff: resilience.BackoffFunc(func(retry int, prev time.Duration) time.Duration { return 3 * time.Second }),
	})
	done := goRoundTrip(tr, newRequest(t, ctx, http.MethodGet, s.URL, nil))
	waitArmed(t, fc, 1)
	fc.Advance(3 * time.Second)
	r := recv(t, done, "RoundTrip after the policy's backoff")
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	if ev := retries.get(); len(ev) != 1 || ev[0].Delay != 3*time.Second {
		t.Errorf("OnRetry %+v, want the policy's 3s delay", ev)
	}
}

func TestBackoffReceivesRetryNumberAndPreviousDelay(t *testing.T) {
	type call struct {
		retry int
		prev  time.Duration
	}
	var calls events[call]
	s := newScript(t, reply(503))
	tr := transport.New(newBase(t), transport.WithMaxAttempts(4), transport.WithBackoff(resilience.BackoffFunc(
		func(retry int, prev time.Duration) time.Duration {
			calls.add(call{retry, prev})
			return time.Duration(retry) * time.Nanosecond
		})))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	want := []call{{1, 0}, {2, 1}, {3, 2}}
	if got := calls.get(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Backoff.Delay calls %v, want %v", got, want)
	}
}

func TestPolicyPerAttemptTimeout(t *testing.T) {
	fc := newClock()
	gone := make(chan int, 1)
	s := newScript(t, hang(gone), reply(200))
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithPerAttemptTimeout(time.Hour))
	ctx := transport.WithPolicy(testCtx(t), transport.Policy{PerAttemptTimeout: time.Second})
	done := goRoundTrip(tr, newRequest(t, ctx, http.MethodGet, s.URL, nil))
	recv(t, s.arrived, "attempt 1")
	waitArmed(t, fc, 1)
	fc.Advance(time.Second)
	recv(t, gone, "attempt 1 to time out after the policy's timeout")
	r := recv(t, done, "RoundTrip")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if body := readBody(t, r.resp); body != "reply 200" {
		t.Errorf("body %q, want the retry's", body)
	}
}

func TestPolicyClassifierReplacesTransportClassifier(t *testing.T) {
	retry500 := func(a transport.Attempt) transport.Decision {
		if a.Response != nil && a.Response.StatusCode == 500 {
			return transport.Retry
		}
		return transport.Default
	}
	tests := []struct {
		name     string
		status   int
		policy   transport.Policy
		wantHits int
	}{
		{"transport classifier applies", 500, transport.Policy{}, 3},
		{"policy classifier replaces it", 500, transport.Policy{Classifier: func(transport.Attempt) transport.Decision { return transport.Default }}, 1},
		{"policy classifier can refuse a 503", 503, transport.Policy{Classifier: func(transport.Attempt) transport.Decision { return transport.DontRetry }}, 1},
		{"policy classifier can retry a 400", 400, transport.Policy{Classifier: func(transport.Attempt) transport.Decision { return transport.Retry }}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, reply(tc.status))
			tr := transport.New(newBase(t), noDelay, transport.WithClassifier(retry500))
			resp, err := tr.RoundTrip(newRequest(t, transport.WithPolicy(context.Background(), tc.policy), http.MethodGet, s.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := s.count(); got != tc.wantHits {
				t.Errorf("server saw %d attempts, want %d", got, tc.wantHits)
			}
		})
	}
}

func TestPolicyHedging(t *testing.T) {
	tests := []struct {
		name   string
		opts   []transport.Option
		policy transport.Policy
		delay  time.Duration // the effective hedge delay
		hedges int           // the effective MaxHedges
	}{
		{"more hedges", []transport.Option{transport.WithHedging(hedgeDelay, 1)}, transport.Policy{MaxHedges: 2}, hedgeDelay, 2},
		{"longer delay", []transport.Option{transport.WithHedging(hedgeDelay, 1)}, transport.Policy{HedgeDelay: time.Second}, time.Second, 1},
		{"hedging on a transport without it", nil, transport.Policy{MaxHedges: 2, HedgeDelay: time.Second}, time.Second, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			release := make(chan struct{})
			s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				reply(200)(w, r)
			})
			tr := transport.New(newBase(t), append([]transport.Option{transport.WithClock(fc), transport.WithMaxAttempts(5)}, tc.opts...)...)
			done := goRoundTrip(tr, newRequest(t, transport.WithPolicy(testCtx(t), tc.policy), http.MethodGet, s.URL, nil))
			recv(t, s.arrived, "attempt 1")
			for i := 1; i <= tc.hedges; i++ {
				waitArmed(t, fc, i)
				fc.Advance(tc.delay - 1)
				if got := fc.Pending(); got != 1 {
					t.Fatalf("hedge %d: %d timers pending just before the delay, want 1", i, got)
				}
				fc.Advance(1)
				recv(t, s.arrived, "a hedge")
			}
			close(release)
			r := recv(t, done, "RoundTrip")
			if r.err != nil {
				t.Fatal(r.err)
			}
			readBody(t, r.resp)
			if got := fc.Armed(); got != tc.hedges {
				t.Errorf("%d hedge timers armed, want %d: no hedge past MaxHedges", got, tc.hedges)
			}
		})
	}
}

func TestInvalidPolicyFailsBeforeAnyAttempt(t *testing.T) {
	tests := []struct {
		name   string
		policy transport.Policy
		field  string
	}{
		{"negative MaxAttempts", transport.Policy{MaxAttempts: -1}, "MaxAttempts"},
		{"MaxHedges below -1", transport.Policy{MaxHedges: -2}, "MaxHedges"},
		{"negative HedgeDelay", transport.Policy{HedgeDelay: -time.Millisecond}, "HedgeDelay"},
		{"negative PerAttemptTimeout", transport.Policy{PerAttemptTimeout: -time.Millisecond}, "PerAttemptTimeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, reply(200))
			var end events[resilience.CallEndEvent]
			tr := transport.New(newBase(t), transport.WithHooks(transport.Hooks{OnCallEnd: end.add}))
			body := newCallerBody(strings.NewReader(payload))
			resp, err := tr.RoundTrip(newRequest(t, transport.WithPolicy(context.Background(), tc.policy), http.MethodPut, s.URL, body))
			closeResp(result{resp, err})
			if err == nil || resp != nil {
				t.Fatalf("RoundTrip = %v, %v; want an error and no response", resp, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
			if got := s.count(); got != 0 {
				t.Errorf("server saw %d attempts, want 0", got)
			}
			if body.closes.Load() == 0 {
				t.Errorf("caller's body not closed")
			}
		})
	}
}

// panicMessage runs f and returns what it panicked with ("" if it did not).
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func TestOptionsPanicOnNonsense(t *testing.T) {
	tests := []struct {
		name   string
		opt    func() transport.Option
		option string
	}{
		{"zero attempts", func() transport.Option { return transport.WithMaxAttempts(0) }, "WithMaxAttempts"},
		{"negative attempts", func() transport.Option { return transport.WithMaxAttempts(-1) }, "WithMaxAttempts"},
		{"nil backoff", func() transport.Option { return transport.WithBackoff(nil) }, "WithBackoff"},
		{"negative ratio", func() transport.Option { return transport.WithRetryBudget(-0.1, 2) }, "WithRetryBudget"},
		{"infinite ratio", func() transport.Option { return transport.WithRetryBudget(math.Inf(1), 2) }, "WithRetryBudget"},
		{"negative reserve", func() transport.Option { return transport.WithRetryBudget(0.1, -1) }, "WithRetryBudget"},
		{"reserve past 1000", func() transport.Option { return transport.WithRetryBudget(0.1, 1001) }, "WithRetryBudget"},
		{"NaN ratio of WithRetryBudget", func() transport.Option { return transport.WithRetryBudget(math.NaN(), 2) }, "WithRetryBudget"},
		{"negative hedge delay", func() transport.Option { return transport.WithHedging(-time.Millisecond, 1) }, "WithHedging"},
		{"negative hedges", func() transport.Option { return transport.WithHedging(time.Millisecond, -1) }, "WithHedging"},
		{"negative per-attempt timeout", func() transport.Option { return transport.WithPerAttemptTimeout(-time.Second) }, "WithPerAttemptTimeout"},
		{"nil classifier", func() transport.Option { return transport.WithClassifier(nil) }, "WithClassifier"},
		{"status 99", func() transport.Option { return transport.WithRetryableStatuses(503, 99) }, "WithRetryableStatuses"},
		{"status 600", func() transport.Option { return transport.WithRetryableStatuses(600) }, "WithRetryableStatuses"},
		{"status 0", func() transport.Option { return transport.WithRetryableStatuses(0) }, "WithRetryableStatuses"},
		{"negative status", func() transport.Option { return transport.WithRetryableStatuses(-503) }, "WithRetryableStatuses"},
		{"negative max Retry-After", func() transport.Option { return transport.WithMaxRetryAfter(-time.Second) }, "WithMaxRetryAfter"},
		{"negative buffer limit", func() transport.Option { return transport.WithMaxBufferedBody(-1) }, "WithMaxBufferedBody"},
		{"negative failure threshold", func() transport.Option {
			return transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: -1})
		}, "WithBreaker"},
		{"negative open duration", func() transport.Option {
			return transport.WithBreaker(resilience.BreakerConfig{OpenDuration: -time.Second})
		}, "WithBreaker"},
		{"negative probes", func() transport.Option {
			return transport.WithBreaker(resilience.BreakerConfig{HalfOpenProbes: -1})
		}, "WithBreaker"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := panicMessage(func() { transport.New(nil, tc.opt()) })
			if !strings.Contains(msg, tc.option) {
				t.Errorf("panic %q, want one naming %s", msg, tc.option)
			}
		})
	}
}

// TestWithBackoffPanicsOnNilBackoffFunc pins that a nil function wrapped in
// BackoffFunc is refused at construction, like a nil Backoff, instead of
// crashing RoundTrip at the first retry.
func TestWithBackoffPanicsOnNilBackoffFunc(t *testing.T) {
	msg := panicMessage(func() { transport.New(nil, transport.WithBackoff(resilience.BackoffFunc(nil))) })
	if !strings.Contains(msg, "WithBackoff") {
		t.Errorf("panic %q, want one naming WithBackoff", msg)
	}
}

func TestOptionsAcceptBoundaryValues(t *testing.T) {
	tests := []struct {
		name string
		opt  transport.Option
	}{
		{"one attempt", transport.WithMaxAttempts(1)},
		{"budget off", transport.WithRetryBudget(0, 0)},
		{"hedging off", transport.WithHedging(0, 0)},
		{"no per-attempt timeout", transport.WithPerAttemptTimeout(0)},
		{"statuses 100 and 599", transport.WithRetryableStatuses(100, 599)},
		{"no statuses", transport.WithRetryableStatuses()},
		{"max Retry-After 0", transport.WithMaxRetryAfter(0)},
		{"never buffer", transport.WithMaxBufferedBody(0)},
		{"zero breaker config", transport.WithBreaker(resilience.BreakerConfig{})},
		{"non-idempotent retries", transport.WithNonIdempotentRetries(true)},
		{"nil option", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if msg := panicMessage(func() { transport.New(nil, tc.opt) }); msg != "" {
				t.Errorf("New panicked: %s", msg)
			}
		})
	}
}
