package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

var breakerCfg = resilience.BreakerConfig{FailureThreshold: 2, OpenDuration: time.Second, HalfOpenProbes: 1}

func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

type transition struct {
	host     string
	from, to resilience.BreakerState
	observed resilience.BreakerState // breakerState(tr, host) called from the hook
}

func TestBreakerOpensAfterConsecutiveFailuresThenRejects(t *testing.T) {
	fc := newClock()
	s := newScript(t, replyN(503))
	host := hostOf(t, s.URL)
	var rejects events[resilience.BreakerRejectEvent]
	var end events[resilience.CallEndEvent]
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithBreaker(breakerCfg),
		transport.WithHooks(transport.Hooks{OnBreakerReject: rejects.add, OnCallEnd: end.add}))

	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
	if err != nil {
		t.Fatalf("err = %v, want the retained 503 when the breaker opens mid-request", err)
	}
	if body := readBody(t, resp); body != "attempt 2" {
		t.Errorf("body %q, want the second attempt's", body)
	}
	if got := s.count(); got != 2 {
		t.Errorf("server saw %d attempts, want 2 (the third is refused by the open breaker)", got)
	}
	if got := breakerState(tr, host); got != resilience.BreakerOpen {
		t.Errorf("BreakerState = %v, want open", got)
	}

	body := newCallerBody(nil)
	req := newRequest(t, context.Background(), http.MethodPut, s.URL, body)
	resp, err = tr.RoundTrip(req)
	closeResp(result{resp, err})
	if !errors.Is(err, transport.ErrCircuitOpen) || resp != nil {
		t.Fatalf("RoundTrip = %v, %v; want ErrCircuitOpen and no response", resp, err)
	}
	var ge *transport.Error
	if errors.As(err, &ge) {
		t.Errorf("admission rejection wrapped in *transport.Error: %v", err)
	}
	if got := s.count(); got != 2 {
		t.Errorf("rejected request reached the server (%d attempts)", got)
	}
	got := rejects.get()
	if len(got) != 2 || got[0].Attempt != 3 || got[0].Key != host || got[0].State != resilience.BreakerOpen ||
		got[1].Attempt != 0 || got[1].Key != host || transport.RequestOf(got[1].Event) != req || got[1].State != resilience.BreakerOpen {
		t.Errorf("OnBreakerReject %+v, want attempt 3 then attempt 0, both open, host %s", got, host)
	}
	if ev := end.get(); len(ev) != 2 || ev[0].Reason != resilience.ReasonCircuitOpen || ev[1].Reason != resilience.ReasonCircuitOpen || ev[1].Attempts != 0 {
		t.Errorf("OnCallEnd %+v, want circuit_open twice, no attempt the second time", ev)
	}
}

func TestBreakerCountsOutcomes(t *testing.T) {
	type step func(r *http.Request, cancel context.CancelFunc) (*http.Response, error)
	status := func(code int) step {
		return func(r *http.Request, _ context.CancelFunc) (*http.Response, error) {
			return fakeResponse(r, code, "x"), nil
		}
	}
	fail := func(err error) step {
		return func(*http.Request, context.CancelFunc) (*http.Response, error) { return nil, err }
	}
	cancelled := func(r *http.Request, cancel context.CancelFunc) (*http.Response, error) {
		cancel()
		return nil, r.Context().Err()
	}
	notFound := &net.DNSError{Err: "no such host", Name: "svc.test", IsNotFound: true}
	tests := []struct {
		name  string
		steps []step
		want  resilience.BreakerState
	}{
		{"two 503s open", []step{status(503), status(503)}, resilience.BreakerOpen},
		// A throttle is neither a failure nor a success (issue #37; see
		// TestThrottlesDoNotOpenTheBreaker).
		{"429 is not counted", []step{status(429), status(502)}, resilience.BreakerClosed},
		{"429 clears no failure", []step{status(502), status(429), status(502)}, resilience.BreakerOpen},
		{"retryable errors count as failures", []step{fail(errReset), fail(errReset)}, resilience.BreakerOpen},
		{"one failure stays closed", []step{status(503)}, resilience.BreakerClosed},
		{"a 404 in between is a success", []step{status(503), status(404), status(503)}, resilience.BreakerClosed},
		{"a 500 in between is a success", []step{status(503), status(500), status(503)}, resilience.BreakerClosed},
		{"a 200 in between is a success", []step{status(503), status(200), status(503)}, resilience.BreakerClosed},
		{"a non-retryable error is ignored", []step{status(503), fail(notFound), status(503)}, resilience.BreakerOpen},
		{"caller cancellation is ignored", []step{status(503), cancelled, status(503)}, resilience.BreakerOpen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			var cancel context.CancelFunc
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				return tc.steps[n.Add(1)-1](r, cancel)
			})
			tr := transport.New(base, transport.WithClock(newClock()), transport.WithMaxAttempts(1),
				transport.WithBreaker(breakerCfg))
			for range tc.steps {
				var ctx context.Context
				ctx, cancel = context.WithCancel(context.Background())
				resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://svc.test/", nil))
				closeResp(result{resp, err})
				cancel()
			}
			if got := breakerState(tr, "svc.test"); got != tc.want {
				t.Errorf("BreakerState = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBreakerHalfOpenProbe(t *testing.T) {
	tests := []struct {
		name      string
		probe     int
		wantState resilience.BreakerState
	}{
		{"probe success closes", 200, resilience.BreakerClosed},
		{"probe 4xx closes", 404, resilience.BreakerClosed},
		{"probe failure re-opens", 503, resilience.BreakerOpen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			release := make(chan struct{})
			s := newScript(t, reply(503), reply(503), func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				reply(tc.probe)(w, r)
			}, reply(200))
			host := hostOf(t, s.URL)
			var end events[resilience.CallEndEvent]
			var starts events[resilience.AttemptStartEvent]
			tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithBreaker(breakerCfg),
				transport.WithHooks(transport.Hooks{
					OnCallEnd: end.add,
					OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
						starts.add(e)
						return ctx
					},
				}))
			getStatus(t, tr, s.URL) // two failures: open
			fc.Advance(time.Second - 1)
			if got := breakerState(tr, host); got != resilience.BreakerOpen {
				t.Fatalf("BreakerState = %v just before OpenDuration, want open", got)
			}
			fc.Advance(1)
			if got := breakerState(tr, host); got != resilience.BreakerHalfOpen {
				t.Fatalf("BreakerState = %v after OpenDuration, want half-open", got)
			}

			done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
			recv(t, s.arrived, "attempt 1")
			recv(t, s.arrived, "attempt 2")
			recv(t, s.arrived, "the probe")
			_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
			if !errors.Is(err, transport.ErrCircuitOpen) {
				t.Errorf("second request during the probe: err = %v, want ErrCircuitOpen", err)
			}
			close(release)
			r := recv(t, done, "the probe")
			if r.err != nil {
				t.Fatalf("probe err = %v, want its response", r.err)
			}
			if r.resp.StatusCode != tc.probe {
				t.Errorf("probe status %d, want %d", r.resp.StatusCode, tc.probe)
			}
			readBody(t, r.resp)
			if got := s.count(); got != 3 {
				t.Errorf("server saw %d attempts, want 3: the probe gets exactly one", got)
			}
			if got := breakerState(tr, host); got != tc.wantState {
				t.Errorf("BreakerState after the probe = %v, want %v", got, tc.wantState)
			}
			ev := end.get()
			if len(ev) != 3 || !ev[2].Probe || ev[2].Attempts != 1 || ev[2].Retries != 0 || ev[2].Hedges != 0 {
				t.Errorf("probe OnCallEnd %+v, want Probe with exactly one attempt", ev)
			}
			st := starts.get()
			if len(st) != 3 || st[0].Probe || !st[2].Probe {
				t.Errorf("OnAttemptStart %+v, want only the third attempt marked Probe", st)
			}
		})
	}
}

func TestBreakerProbeBodyIsPassedThroughUnbuffered(t *testing.T) {
	fc := newClock()
	started := make(chan struct{}, 1)
	bodies := make(chan string, 1)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			w.WriteHeader(503)
			return
		}
		started <- struct{}{}
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		w.WriteHeader(503)
	}))
	t.Cleanup(srv.Close)
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithBreaker(breakerCfg),
		transport.WithHedging(time.Millisecond, 2))
	getStatus(t, tr, srv.URL) // open
	fc.Advance(time.Second)

	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.CloseWithError(errors.New("test over")) })
	req := newRequest(t, testCtx(t), http.MethodPut, srv.URL, pr)
	req.ContentLength = -1
	armed := fc.Armed()
	done := goRoundTrip(tr, req)
	recv(t, started, "the probe to reach the server before its body is written")
	io.WriteString(pw, payload)
	pw.Close()
	if got := recv(t, bodies, "the probe's body"); got != payload {
		t.Errorf("server received %q, want %q", got, payload)
	}
	r := recv(t, done, "the probe")
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	if got := hits.Load(); got != 3 {
		t.Errorf("server saw %d attempts, want 3: one for the failing probe", got)
	}
	if got := fc.Armed(); got != armed {
		t.Errorf("the probe armed %d timers: it must not be hedged", got-armed)
	}
}

func TestBreakerProbeSlotIsFreedWhenTheProbeIsCancelled(t *testing.T) {
	fc := newClock()
	gone := make(chan int, 1)
	s := newScript(t, reply(503), reply(503), hang(gone), reply(200))
	host := hostOf(t, s.URL)
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithBreaker(breakerCfg))
	getStatus(t, tr, s.URL)
	fc.Advance(time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := goRoundTrip(tr, newRequest(t, ctx, http.MethodGet, s.URL, nil))
	for range 3 {
		recv(t, s.arrived, "the probe")
	}
	cancel()
	if r := recv(t, done, "the cancelled probe"); r.err != context.Canceled {
		closeResp(r)
		t.Fatalf("probe err = %v, want context.Canceled", r.err)
	}
	if got := breakerState(tr, host); got != resilience.BreakerHalfOpen {
		t.Errorf("BreakerState = %v after a cancelled probe, want half-open", got)
	}
	if got := getStatus(t, tr, s.URL); got != 200 {
		t.Errorf("next probe status %d, want 200: the slot must be free", got)
	}
	if got := breakerState(tr, host); got != resilience.BreakerClosed {
		t.Errorf("BreakerState = %v, want closed", got)
	}
}

func TestBreakerAdmitsUpToHalfOpenProbes(t *testing.T) {
	fc := newClock()
	release := make(chan struct{})
	s := newScript(t, reply(503), reply(503), func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		reply(200)(w, r)
	})
	cfg := breakerCfg
	cfg.HalfOpenProbes = 2
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithBreaker(cfg))
	getStatus(t, tr, s.URL)
	fc.Advance(time.Second)

	ctx := testCtx(t)
	p1 := goRoundTrip(tr, newRequest(t, ctx, http.MethodGet, s.URL, nil))
	p2 := goRoundTrip(tr, newRequest(t, ctx, http.MethodGet, s.URL, nil))
	for range 4 {
		recv(t, s.arrived, "two probes")
	}
	_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
	if !errors.Is(err, transport.ErrCircuitOpen) {
		t.Errorf("third request with both probe slots taken: err = %v, want ErrCircuitOpen", err)
	}
	close(release)
	for _, p := range []<-chan result{p1, p2} {
		r := recv(t, p, "a probe")
		if r.err != nil {
			t.Fatal(r.err)
		}
		readBody(t, r.resp)
	}
	if got := s.count(); got != 4 {
		t.Errorf("server saw %d attempts, want 4", got)
	}
}

// TestBreakerIsCheckedAfterBackoffSleep pins that a request sleeping in
// backoff launches no further attempt when other requests open the breaker
// meanwhile, and returns what it has: the retained response.
func TestBreakerIsCheckedAfterBackoffSleep(t *testing.T) {
	fc := newClock()
	var calls atomic.Int32
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return fakeResponse(r, 503, fmt.Sprintf("call %d", calls.Add(1))), nil
	})
	var rejects events[resilience.BreakerRejectEvent]
	var end events[resilience.CallEndEvent]
	cfg := resilience.BreakerConfig{FailureThreshold: 2, OpenDuration: time.Minute}
	tr := transport.New(base, transport.WithClock(fc), transport.WithBreaker(cfg),
		transport.WithBackoff(resilience.Constant(time.Second)),
		transport.WithHooks(transport.Hooks{OnBreakerReject: rejects.add, OnCallEnd: end.add}))

	a := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/a", nil))
	waitArmed(t, fc, 1) // a is sleeping after its first 503
	b, err := tr.RoundTrip(newRequest(t, transport.WithPolicy(context.Background(), transport.NoRetry()),
		http.MethodGet, "http://svc.test/b", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, b)
	if got := breakerState(tr, "svc.test"); got != resilience.BreakerOpen {
		t.Fatalf("BreakerState = %v, want open", got)
	}
	fc.Advance(time.Second)
	r := recv(t, a, "request a")
	if r.err != nil {
		t.Fatalf("err = %v, want a's retained 503", r.err)
	}
	if body := readBody(t, r.resp); body != "call 1" {
		t.Errorf("body %q, want a's own first response", body)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("%d attempts in total, want 2", got)
	}
	if rj := rejects.get(); len(rj) != 1 || rj[0].Attempt != 2 {
		t.Errorf("OnBreakerReject %+v, want a's attempt 2", rj)
	}
	if ev := end.get(); len(ev) != 2 || ev[1].Reason != resilience.ReasonCircuitOpen {
		t.Errorf("OnCallEnd %+v, want a to end with circuit_open", ev)
	}
}

func TestBreakerOpeningMidRequestReturnsLastErrorNotErrCircuitOpen(t *testing.T) {
	fc := newClock()
	var calls atomic.Int32
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		calls.Add(1)
		return nil, errReset
	})
	cfg := resilience.BreakerConfig{FailureThreshold: 3, OpenDuration: time.Minute}
	tr := transport.New(base, transport.WithClock(fc), transport.WithBreaker(cfg),
		transport.WithBackoff(resilience.Constant(time.Second)))

	a := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/a", nil))
	waitArmed(t, fc, 1)
	fc.Advance(time.Second)
	waitArmed(t, fc, 2) // a sleeps again after its second failure
	_, err := tr.RoundTrip(newRequest(t, transport.WithPolicy(context.Background(), transport.NoRetry()),
		http.MethodGet, "http://svc.test/b", nil))
	if err != error(errReset) {
		t.Fatalf("b: err = %v", err)
	}
	fc.Advance(time.Second)
	r := recv(t, a, "request a")
	closeResp(r)
	var ge *transport.Error
	if !errors.As(r.err, &ge) || ge.Attempts != 2 || ge.Err != error(errReset) {
		t.Fatalf("err = %v, want *transport.Error with 2 attempts and the last error", r.err)
	}
	if errors.Is(r.err, transport.ErrCircuitOpen) {
		t.Errorf("errors.Is(err, ErrCircuitOpen) after a mid-request opening: only admission rejections are ErrCircuitOpen")
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("%d attempts in total, want 3", got)
	}
}

func TestBreakerIsPerHost(t *testing.T) {
	fc := newClock()
	down := newScript(t, reply(503))
	up := newScript(t, reply(200))
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithBreaker(breakerCfg))
	getStatus(t, tr, down.URL)
	_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, down.URL, nil))
	if !errors.Is(err, transport.ErrCircuitOpen) {
		t.Fatalf("down host: err = %v, want ErrCircuitOpen", err)
	}
	if got := getStatus(t, tr, up.URL); got != 200 {
		t.Errorf("other host: status %d, want 200", got)
	}
	if got := breakerState(tr, hostOf(t, up.URL)); got != resilience.BreakerClosed {
		t.Errorf("other host's breaker %v, want closed", got)
	}
	if got := breakerState(tr, hostOf(t, down.URL)); got != resilience.BreakerOpen {
		t.Errorf("failing host's breaker %v, want open", got)
	}
	states := map[string]resilience.BreakerState{}
	for _, h := range tr.Stats().Hosts {
		states[h.Key] = h.Breaker
	}
	want := map[string]resilience.BreakerState{
		hostOf(t, down.URL): resilience.BreakerOpen, hostOf(t, up.URL): resilience.BreakerClosed,
	}
	if len(states) != 2 || states[hostOf(t, down.URL)] != want[hostOf(t, down.URL)] || states[hostOf(t, up.URL)] != want[hostOf(t, up.URL)] {
		t.Errorf("Stats().Hosts breakers %v, want %v", states, want)
	}
}

func TestBreakerStateChangeHookMayReadState(t *testing.T) {
	tests := []struct {
		name  string
		probe int
		want  []resilience.BreakerState // from, to pairs flattened after the first "closed"
	}{
		{"probe succeeds", 200, []resilience.BreakerState{
			resilience.BreakerClosed, resilience.BreakerOpen,
			resilience.BreakerOpen, resilience.BreakerHalfOpen,
			resilience.BreakerHalfOpen, resilience.BreakerClosed,
		}},
		{"probe fails", 503, []resilience.BreakerState{
			resilience.BreakerClosed, resilience.BreakerOpen,
			resilience.BreakerOpen, resilience.BreakerHalfOpen,
			resilience.BreakerHalfOpen, resilience.BreakerOpen,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			s := newScript(t, reply(503), reply(503), reply(tc.probe))
			host := hostOf(t, s.URL)
			var changes events[transition]
			var tr *transport.Transport
			tr = transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithBreaker(breakerCfg),
				transport.WithHooks(transport.Hooks{
					OnBreakerStateChange: func(e resilience.BreakerStateEvent) {
						changes.add(transition{e.Key, e.From, e.To, breakerState(tr, e.Key)})
					},
				}))
			getStatus(t, tr, s.URL)
			fc.Advance(time.Second)
			getStatus(t, tr, s.URL)

			got := changes.get()
			if len(got) != 3 {
				t.Fatalf("%d state changes %+v, want 3", len(got), got)
			}
			for i, c := range got {
				if c.host != host || c.from != tc.want[2*i] || c.to != tc.want[2*i+1] || c.observed != c.to {
					t.Errorf("change %d = %+v, want %v -> %v on %s, and BreakerState reading the new state",
						i+1, c, tc.want[2*i], tc.want[2*i+1], host)
				}
			}
		})
	}
}

func TestBreakerZeroConfigUsesDefaults(t *testing.T) {
	fc := newClock()
	var status atomic.Int32
	status.Store(503)
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return fakeResponse(r, int(status.Load()), ""), nil
	})
	tr := transport.New(base, transport.WithClock(fc), transport.WithMaxAttempts(1),
		transport.WithBreaker(resilience.BreakerConfig{}))
	for range resilience.DefaultFailureThreshold - 1 {
		getStatus(t, tr, "http://svc.test/")
	}
	if got := breakerState(tr, "svc.test"); got != resilience.BreakerClosed {
		t.Fatalf("BreakerState = %v after %d failures, want closed", got, resilience.DefaultFailureThreshold-1)
	}
	getStatus(t, tr, "http://svc.test/")
	if got := breakerState(tr, "svc.test"); got != resilience.BreakerOpen {
		t.Fatalf("BreakerState = %v after %d failures, want open", got, resilience.DefaultFailureThreshold)
	}
	fc.Advance(resilience.DefaultOpenDuration - time.Millisecond)
	if got := breakerState(tr, "svc.test"); got != resilience.BreakerOpen {
		t.Errorf("BreakerState = %v before the default OpenDuration, want open", got)
	}
	fc.Advance(time.Millisecond)
	status.Store(200)
	getStatus(t, tr, "http://svc.test/")
	if got := breakerState(tr, "svc.test"); got != resilience.BreakerClosed {
		t.Errorf("BreakerState = %v after a successful probe, want closed", got)
	}
}

func TestBreakerStateWithoutBreaker(t *testing.T) {
	s := newScript(t, reply(503))
	tr := transport.New(newBase(t), noDelay, transport.WithMaxAttempts(1))
	for range 10 {
		getStatus(t, tr, s.URL)
	}
	if got := breakerState(tr, hostOf(t, s.URL)); got != resilience.BreakerClosed {
		t.Errorf("BreakerState = %v with the breaker off, want closed", got)
	}
	if got := s.count(); got != 10 {
		t.Errorf("server saw %d attempts, want every request to go through", got)
	}
}

func TestBreakerStateString(t *testing.T) {
	tests := []struct {
		state resilience.BreakerState
		want  string
	}{
		{resilience.BreakerClosed, "closed"},
		{resilience.BreakerOpen, "open"},
		{resilience.BreakerHalfOpen, "half-open"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.state.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBreakerProbeTimingOutReopens pins the package doc's advice: with a
// per-attempt timeout a hung probe ends, counts as a failure and frees its
// slot, with exactly one attempt.
func TestBreakerProbeTimingOutReopens(t *testing.T) {
	fc := newClock()
	gone := make(chan int, 1)
	s := newScript(t, reply(503), reply(503), hang(gone), reply(200))
	host := hostOf(t, s.URL)
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithBreaker(breakerCfg),
		transport.WithPerAttemptTimeout(10*time.Second))
	getStatus(t, tr, s.URL)
	fc.Advance(time.Second)
	armed := fc.Armed()
	done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
	for range 3 {
		recv(t, s.arrived, "the probe")
	}
	waitArmed(t, fc, armed+1)
	fc.Advance(10 * time.Second)
	recv(t, gone, "the probe to be cut off")
	r := recv(t, done, "the probe")
	closeResp(r)
	var ge *transport.Error
	if !errors.Is(r.err, transport.ErrAttemptTimeout) || errors.As(r.err, &ge) {
		t.Errorf("probe err = %v, want the single attempt's timeout, unwrapped", r.err)
	}
	if got := breakerState(tr, host); got != resilience.BreakerOpen {
		t.Errorf("BreakerState = %v after a timed-out probe, want open", got)
	}
	if got := s.count(); got != 3 {
		t.Errorf("server saw %d attempts, want 3: no retry of the probe", got)
	}
}
