package promexport

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// exercise drives every metric at least once through real transports and
// loopback servers, each transport wired with tel.Transport and its Name:
// retries on 503 and 429 (backoff and Retry-After: 0) and a give-up after
// exhausted attempts ("retries"), a hedge won against a stalled attempt
// ("hedged"), a budget refusal ("budgeted"), a breaker that opens, rejects
// and closes after a probe, then opens again ("payments"), and two that
// send nothing: a budget-less one ("nobudget") and an adaptive one
// ("adaptive"). It is the named half of package telemetry's exercise
// (telemetry/metrics_test.go), which checks the same metrics through the
// SDK's reader: a metric added there is added here. The transports live
// until the test ends (the gauges hold them weakly).
func exercise(t *testing.T, tel *telemetry.Telemetry) {
	t.Helper()
	const breakerOpen = 250 * time.Millisecond
	hooks := func(name string) transport.Option { return tel.Transport(telemetry.Name(name)) }
	backoff := transport.WithBackoff(resilience.Constant(time.Millisecond))

	// Retries: 503 then 429 with Retry-After: 0, then 200.
	srv := newServer(t, status(503), status(429, "Retry-After", "0"), status(200))
	// A reserve of 4: the first request spends 2, the give-up below 2 more.
	tr := transport.New(base(t), hooks("retries"), backoff, transport.WithRetryBudget(transport.DefaultBudgetRatio, 4))
	mustGet(t, tr, srv.URL)

	// Give-up: always 503.
	down := newServer(t, status(503))
	mustGet(t, tr, down.URL)

	// Hedge: the first attempt stalls until the test ends.
	done := make(chan struct{})
	slow := newServer(t, stall(done), status(200))
	t.Cleanup(func() { close(done) })
	hedged := transport.New(base(t), hooks("hedged"),
		transport.WithHedging(20*time.Millisecond, 1), transport.WithMaxAttempts(2))
	mustGet(t, hedged, slow.URL)

	// Budget refusal: deposits of 0.01 never pay for a retry.
	budgeted := transport.New(base(t), hooks("budgeted"), backoff, transport.WithRetryBudget(0.01, 0))
	mustGet(t, budgeted, down.URL)

	// Breaker: open on a 503, reject, then close on a probe.
	flaky := newServer(t, status(503), status(200))
	fc := clock.NewFake(time.Unix(1000, 0))
	breaker := transport.New(base(t), hooks("payments"), transport.WithMaxAttempts(1), transport.WithClock(fc),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: breakerOpen}))
	mustGet(t, breaker, flaky.URL)
	if err := await(t, roundTrip(t, breaker, flaky.URL), "the rejected request"); !errors.Is(err, transport.ErrCircuitOpen) {
		t.Fatalf("want a rejection, got %v", err)
	}
	fc.Advance(breakerOpen)
	mustGet(t, breaker, flaky.URL)
	// Re-open it so the state gauge shows open.
	mustGet(t, breaker, newServer(t, status(503)).URL)

	idle := []*transport.Transport{
		transport.New(base(t), hooks("nobudget"), transport.WithRetryBudget(0, 0)),
		transport.New(base(t), hooks("adaptive"), transport.WithRetryBudget(0, 0),
			transport.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: 0.05}, 1)),
	}
	t.Cleanup(func() { runtime.KeepAlive([]any{tr, hedged, budgeted, breaker, idle}) })
}

// newServer returns a loopback server that answers its nth request with
// script[n-1], the last handler repeating; it closes when the test ends.
func newServer(t *testing.T, script ...http.HandlerFunc) *httptest.Server {
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

// status answers code, with header pairs, and the status text as body.
func status(code int, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, http.StatusText(code))
	}
}

// stall blocks until the client goes away or done is closed.
func stall(done <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}
}

// base returns a fresh http.Transport whose idle connections are closed at
// the end of the test, so goleak sees no connection goroutines.
func base(t *testing.T) *http.Transport {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// mustGet sends a GET of u through rt, reads and closes the body, and
// fails the test on an error.
func mustGet(t *testing.T, rt http.RoundTripper, u string) {
	t.Helper()
	if err := await(t, roundTrip(t, rt, u), u); err != nil {
		t.Fatal(err)
	}
}

// holdBase answers "/hold" once release is closed (or the request's
// context ends), anything else at once with 200.
type holdBase struct {
	release chan struct{}
	held    chan struct{} // one receive per request that started holding
}

func newHoldBase() *holdBase {
	return &holdBase{release: make(chan struct{}), held: make(chan struct{}, 4)}
}

func (b *holdBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/hold") {
		b.held <- struct{}{}
		select {
		case <-b.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// roundTrip sends a GET of u through rt on its own goroutine; the result
// arrives on the channel, the body already read and closed.
func roundTrip(t *testing.T, rt http.RoundTripper, u string) <-chan error {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
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

// await returns what ch delivers, failing the test after 10 s.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// oneAtATime is a concurrency limit of exactly one attempt in flight.
var oneAtATime = resilience.ConcurrencyLimit{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, MaxWait: -1}
