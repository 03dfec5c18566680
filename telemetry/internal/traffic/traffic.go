// Package traffic is the test traffic that package telemetry's tests and
// promexport's tests share: loopback servers that answer from a script,
// a base that holds a request until released, and Exercise, which drives
// every metric of telemetry at least once. Telemetry checks those metrics
// through the SDK's reader, promexport through a real Prometheus exporter;
// with one driver, a metric added to the one is exercised in the other.
//
// Only tests import it. promexport is a module of its own, but Go's
// internal rule lets it import this package (its path is below
// telemetry), its go.mod replaces telemetry with this directory, and the
// two are released together, so its tests always build against this
// version. No program's build reads this package.
//
// It does not import telemetry, so that telemetry's own tests can import
// it: the metrics are wired through a func that returns each transport's
// hooks option.
package traffic

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// BreakerOpen is the OpenDuration of Exercise's breaker, passed on a fake
// clock.
const BreakerOpen = 250 * time.Millisecond

// TimeLeft is the deadline of Exercise's first request, the one that
// retries: its gotry.request.time_left is just under it.
const TimeLeft = time.Minute

// Exercise drives every metric at least once through real transports and
// loopback servers: retries on 503 (backoff) and 429 (Retry-After: 0),
// within a deadline of TimeLeft, and
// a give-up after exhausted attempts ("retries"), a hedge won against a
// stalled attempt ("hedged"), a budget refusal ("budgeted"), and a breaker
// that opens, rejects and closes after a probe, then opens again
// ("payments"); two more send nothing: a budget-less transport
// ("nobudget") and an adaptive one ("adaptive"). Each transport is built
// with hooks(its name), so its gauges are reported too. The transports
// live until the test ends (the gauges hold them weakly).
func Exercise(t testing.TB, hooks func(name string) transport.Option) {
	t.Helper()
	backoff := transport.WithBackoff(resilience.Constant(time.Millisecond))

	// Retries: 503 then 429 with Retry-After: 0, then 200.
	srv := NewServer(t, Status(503), Status(429, "Retry-After", "0"), Status(200))
	// A reserve of 4: the first request spends 2, the give-up below 2 more.
	tr := transport.New(Base(t), hooks("retries"), backoff, transport.WithRetryBudget(transport.DefaultBudgetRatio, 4))
	MustGetWithin(t, tr, srv.URL, TimeLeft)

	// Give-up: always 503.
	down := NewServer(t, Status(503))
	MustGet(t, tr, down.URL)

	// Hedge: the first attempt stalls until the test ends.
	done := make(chan struct{})
	slow := NewServer(t, Stall(done), Status(200))
	t.Cleanup(func() { close(done) })
	hedged := transport.New(Base(t), hooks("hedged"),
		transport.WithHedging(20*time.Millisecond, 1), transport.WithMaxAttempts(2))
	MustGet(t, hedged, slow.URL)

	// Budget refusal: deposits of 0.01 never pay for a retry.
	budgeted := transport.New(Base(t), hooks("budgeted"), backoff, transport.WithRetryBudget(0.01, 0))
	MustGet(t, budgeted, down.URL)

	// Breaker: open on a 503, reject, then close on a probe.
	flaky := NewServer(t, Status(503), Status(200))
	fc := clock.NewFake(time.Unix(1000, 0))
	breaker := transport.New(Base(t), hooks("payments"), transport.WithMaxAttempts(1), transport.WithClock(fc),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: BreakerOpen}))
	MustGet(t, breaker, flaky.URL)
	if err := Await(t, Send(t, breaker, flaky.URL), "the rejected request"); !errors.Is(err, transport.ErrCircuitOpen) {
		t.Fatalf("want a rejection, got %v", err)
	}
	fc.Advance(BreakerOpen)
	MustGet(t, breaker, flaky.URL)
	// Re-open it so the state gauge shows open.
	MustGet(t, breaker, NewServer(t, Status(503)).URL)

	idle := []*transport.Transport{
		transport.New(Base(t), hooks("nobudget"), transport.WithRetryBudget(0, 0)),
		transport.New(Base(t), hooks("adaptive"), transport.WithRetryBudget(0, 0),
			transport.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: 0.05}, 1)),
	}
	t.Cleanup(func() { runtime.KeepAlive([]any{tr, hedged, budgeted, breaker, idle}) })
}

// NewServer returns a loopback server that answers its nth request with
// script[n-1], the last handler repeating; it closes when the test ends.
func NewServer(t testing.TB, script ...http.HandlerFunc) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		script[min(i, len(script)-1)](w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Status answers code, with header pairs, and the status text as body.
func Status(code int, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code)) // the status is the answer; a failed write shows in the test
	}
}

// Stall blocks until the client goes away or done is closed.
func Stall(done <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}
}

// Base returns a fresh http.Transport whose idle connections are closed at
// the end of the test, so goleak sees no connection goroutines.
func Base(t testing.TB) *http.Transport {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// MustGet sends a GET of u through rt, reads and closes the body, and
// fails the test on an error.
func MustGet(t testing.TB, rt http.RoundTripper, u string) {
	t.Helper()
	if err := Await(t, Send(t, rt, u), u); err != nil {
		t.Fatal(err)
	}
}

// MustGetWithin is MustGet with a deadline d from now on the request's
// context.
func MustGetWithin(t testing.TB, rt http.RoundTripper, u string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	if err := Await(t, send(ctx, t, rt, u), u); err != nil {
		t.Fatal(err)
	}
}

// Send sends a GET of u through rt on its own goroutine; the result
// arrives on the channel, the body already read and closed.
func Send(t testing.TB, rt http.RoundTripper, u string) <-chan error {
	t.Helper()
	return send(t.Context(), t, rt, u)
}

// send is Send with the request's context.
func send(ctx context.Context, t testing.TB, rt http.RoundTripper, u string) <-chan error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		ch <- err
	}()
	return ch
}

// Await returns what ch delivers, failing the test after 10 s.
func Await[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// HoldBase is a base that answers "/hold" once Release is closed (or the
// request's context ends), anything else at once with 200.
type HoldBase struct {
	Release chan struct{}
	Held    chan struct{} // one receive per request that started holding
}

// NewHoldBase returns a HoldBase with room for four held requests.
func NewHoldBase() *HoldBase {
	return &HoldBase{Release: make(chan struct{}), Held: make(chan struct{}, 4)}
}

// RoundTrip answers r.
func (b *HoldBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/hold") {
		b.Held <- struct{}{}
		select {
		case <-b.Release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// OneAtATime is a concurrency limit of exactly one attempt in flight.
var OneAtATime = resilience.ConcurrencyLimit{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, MaxWait: -1}
