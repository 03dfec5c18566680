package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// Property tests of the whole transport on a fake clock, under arbitrary
// server behaviour. resilience/*_test.go already checks the engine, budget
// and breaker in isolation; these check that the HTTP layer keeps their
// promises end to end. Each property is also a fuzz target (rapid.MakeFuzz),
// so `go test -fuzz` can search for counterexamples.

var propStart = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// propOutcome is how the base answers one attempt.
type propOutcome struct {
	after time.Duration // fake time before answering; negative hangs until cancelled
	kind  int           // index into propKinds
}

var propKinds = []func(r *http.Request) (*http.Response, error){
	func(r *http.Request) (*http.Response, error) { return memResponse(r, 200, "ok"), nil },
	func(r *http.Request) (*http.Response, error) { return memResponse(r, 503, "unavailable"), nil },
	func(r *http.Request) (*http.Response, error) {
		return memResponse(r, 429, "slow down", "Retry-After", "0"), nil
	},
	func(r *http.Request) (*http.Response, error) { return memResponse(r, 404, "not found"), nil },
	func(*http.Request) (*http.Response, error) { return nil, errMemReset },
	func(*http.Request) (*http.Response, error) { return nil, errors.New("prop: permanent failure") },
}

func drawOutcome(t *rapid.T, label string) propOutcome {
	o := propOutcome{kind: rapid.IntRange(0, len(propKinds)-1).Draw(t, label+" kind")}
	switch rapid.IntRange(0, 3).Draw(t, label+" timing") {
	case 1:
		o.after = time.Duration(rapid.IntRange(1, 60).Draw(t, label+" ms")) * time.Millisecond
	case 2:
		o.after = -1
	}
	return o
}

// checkAttemptLimits sends one request with arbitrary retry, hedge, timeout
// and budget settings to a base whose every attempt answers arbitrarily,
// while a pump advances the fake clock. However the attempts interleave:
// the base never sees more than MaxAttempts attempts nor more than
// 1+MaxHedges at once (one at a time without hedging); OnCallEnd's counts
// agree with the base's; RoundTrip returns exactly one of response and
// error; and every response body the base produced is closed.
func checkAttemptLimits(t *rapid.T) {
	maxAttempts := rapid.IntRange(1, 5).Draw(t, "MaxAttempts")
	maxHedges := rapid.IntRange(0, 3).Draw(t, "MaxHedges")
	hedgeDelay := time.Duration(rapid.IntRange(1, 40).Draw(t, "hedge ms")) * time.Millisecond
	perAttempt := time.Duration(rapid.IntRange(0, 100).Draw(t, "per-attempt ms")) * time.Millisecond
	backoff := time.Duration(rapid.IntRange(0, 20).Draw(t, "backoff ms")) * time.Millisecond
	withBudget := rapid.Bool().Draw(t, "budget")
	outcomes := make([]propOutcome, rapid.IntRange(1, 6).Draw(t, "outcomes"))
	for i := range outcomes {
		outcomes[i] = drawOutcome(t, "attempt")
	}

	fc := fakeclock.New(propStart)
	var calls, inflight, peak atomic.Int32
	l := newLedger(baseFunc(func(r *http.Request) (*http.Response, error) {
		n := int(calls.Add(1))
		cur := inflight.Add(1)
		defer inflight.Add(-1)
		for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
		}
		o := outcomes[min(n, len(outcomes))-1]
		if o.after != 0 {
			var fire <-chan time.Time
			if o.after > 0 {
				tm := fc.NewTimer(o.after)
				defer tm.Stop()
				fire = tm.C()
			}
			select {
			case <-fire:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
		return propKinds[o.kind](r)
	}))
	var end resilience.CallEndEvent
	opts := []transport.Option{
		transport.WithClock(fc), transport.WithMaxAttempts(maxAttempts),
		transport.WithHedging(hedgeDelay, maxHedges), transport.WithPerAttemptTimeout(perAttempt),
		transport.WithBackoff(resilience.Constant(backoff)),
		transport.WithHooks(transport.Hooks{OnCallEnd: func(e resilience.CallEndEvent) { end = e }}),
	}
	if !withBudget {
		opts = append(opts, transport.WithRetryBudget(0, 0))
	}
	tr := transport.New(l, opts...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://prop.test/", nil)
	done := make(chan fuzzResult, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		done <- fuzzResult{resp, err}
	}()
	var res fuzzResult
pump:
	for i := 0; ; i++ {
		select {
		case res = <-done:
			break pump
		default:
		}
		switch {
		case i == 1500: // hung attempts with no per-attempt timeout
			cancel()
		case i > 1500:
			select {
			case res = <-done:
				break pump
			case <-time.After(10 * time.Second):
				t.Fatalf("RoundTrip did not return after its context was cancelled")
			}
		}
		fc.Advance(time.Millisecond)
		runtime.Gosched()
		if i%16 == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
	if (res.resp == nil) == (res.err == nil) {
		t.Fatalf("RoundTrip returned resp=%v err=%v: exactly one must be set", res.resp, res.err)
	}
	if res.resp != nil {
		io.Copy(io.Discard, res.resp.Body)
		res.resp.Body.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for inflight.Load() != 0 || int(calls.Load()) != end.Attempts {
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts still in the base; base saw %d, OnCallEnd says %d", inflight.Load(), calls.Load(), end.Attempts)
		}
		time.Sleep(time.Millisecond)
	}
	l.waitBalanced(t)

	hedging := maxHedges > 0 && maxAttempts > 1
	limit := 1
	if hedging {
		limit = min(1+maxHedges, maxAttempts)
	}
	switch n := int(calls.Load()); {
	case n > maxAttempts:
		t.Fatalf("base saw %d attempts, MaxAttempts %d", n, maxAttempts)
	case int(peak.Load()) > limit:
		t.Fatalf("%d attempts in flight at once, limit %d (MaxHedges %d)", peak.Load(), limit, maxHedges)
	case end.Attempts != 1+end.Retries+end.Hedges:
		t.Fatalf("OnCallEnd: %d attempts but %d retries + %d hedges", end.Attempts, end.Retries, end.Hedges)
	case !hedging && end.Hedges != 0:
		t.Fatalf("%d hedges with hedging off", end.Hedges)
	}
}

func TestHedgesAndRetriesNeverExceedMaxAttemptsProperty(t *testing.T) {
	rapid.Check(t, checkAttemptLimits)
}

func FuzzHedgesAndRetriesNeverExceedMaxAttempts(f *testing.F) {
	// Seeds live in testdata/fuzz: rapid reads its draws from the bytes,
	// 8 bytes a draw, so a seed needs a few hundred of them.
	f.Fuzz(rapid.MakeFuzz(checkAttemptLimits))
}

type propIDKey struct{}
type propProbeKey struct{}

// probeCall is one attempt waiting in the base for the driver's answer.
type probeCall struct {
	id    int
	probe bool
	stale bool     // a probe of an earlier half-open period (see below)
	reply chan int // an index into propKinds
}

// probeEvent is an attempt arriving at the base, or a request ending.
type probeEvent struct {
	id   int
	call *probeCall
	done *fuzzResult
}

// checkProbes drives many concurrent requests to one host through a
// transport with a breaker, step by step: launch a request, answer one
// waiting attempt arbitrarily, or move the fake clock. After every step,
// whatever the order: no more than HalfOpenProbes probes of the current
// half-open period are in the base at once; a probe is sent only while the
// breaker is half-open and gets exactly one attempt; any other attempt is
// sent only while it is closed; and a request rejected with ErrCircuitOpen
// never reached the base.
//
// Probes still in flight from an earlier half-open period (one probe failed
// and reopened the breaker while another hung) are not counted here: the
// breaker forgets them, which TestBreakerStaleProbeHoldsItsSlot pins as a
// bug.
func checkProbes(t *rapid.T) {
	cfg := resilience.BreakerConfig{
		FailureThreshold: rapid.IntRange(1, 3).Draw(t, "FailureThreshold"),
		OpenDuration:     time.Second,
		HalfOpenProbes:   rapid.IntRange(1, 3).Draw(t, "HalfOpenProbes"),
	}
	maxAttempts := rapid.IntRange(1, 3).Draw(t, "MaxAttempts")
	fc := fakeclock.New(propStart)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan probeEvent, 16)
	base := baseFunc(func(r *http.Request) (*http.Response, error) {
		probe, _ := r.Context().Value(propProbeKey{}).(bool)
		c := &probeCall{id: r.Context().Value(propIDKey{}).(int), probe: probe, reply: make(chan int, 1)}
		events <- probeEvent{id: c.id, call: c}
		select {
		case k := <-c.reply:
			return propKinds[k](r)
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	})
	tr := transport.New(base, transport.WithClock(fc), transport.WithBreaker(cfg),
		transport.WithMaxAttempts(maxAttempts), transport.WithRetryBudget(0, 0), transport.WithBackoff(resilience.Constant(0)),
		transport.WithHooks(transport.Hooks{OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
			return context.WithValue(ctx, propProbeKey{}, e.Probe)
		}}))
	const host = "probe.test"

	var pending []*probeCall
	attempts := map[int]int{} // attempts per request
	running := 0
	// next waits for request id's next event and checks it.
	next := func(id int) probeEvent {
		var ev probeEvent
		select {
		case ev = <-events:
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d neither reached the base nor returned", id)
		}
		if ev.id != id {
			t.Fatalf("event from request %d while only request %d could move", ev.id, id)
		}
		if c := ev.call; c != nil {
			attempts[id]++
			state := breakerState(tr, host)
			switch {
			case c.probe && state != resilience.BreakerHalfOpen:
				t.Fatalf("probe sent with the breaker %v", state)
			case !c.probe && state != resilience.BreakerClosed:
				t.Fatalf("attempt %d of request %d sent with the breaker %v", attempts[id], id, state)
			case c.probe && attempts[id] > 1:
				t.Fatalf("a probe request made %d attempts", attempts[id])
			}
			pending = append(pending, c)
			probes := 0
			for _, p := range pending {
				if p.probe && !p.stale {
					probes++
				}
			}
			if probes > cfg.HalfOpenProbes {
				t.Fatalf("%d probes in flight, HalfOpenProbes %d", probes, cfg.HalfOpenProbes)
			}
			return ev
		}
		running--
		res := ev.done
		if (res.resp == nil) == (res.err == nil) {
			t.Fatalf("RoundTrip returned resp=%v err=%v", res.resp, res.err)
		}
		if res.resp != nil {
			res.resp.Body.Close()
		}
		if rejected := errors.Is(res.err, transport.ErrCircuitOpen); rejected != (attempts[id] == 0) {
			t.Fatalf("request %d: err %v after %d attempts", id, res.err, attempts[id])
		}
		return ev
	}
	launch := func(id int) {
		running++
		req, _ := http.NewRequestWithContext(context.WithValue(ctx, propIDKey{}, id), http.MethodGet, "http://"+host+"/", nil)
		go func() {
			resp, err := tr.RoundTrip(req)
			events <- probeEvent{id: id, done: &fuzzResult{resp, err}}
		}()
		next(id)
	}
	answer := func(i, kind int) {
		c := pending[i]
		pending = append(pending[:i], pending[i+1:]...)
		c.reply <- kind
		next(c.id)
		if c.probe && breakerState(tr, host) != resilience.BreakerHalfOpen {
			// The probe closed or reopened the breaker: a new period.
			for _, p := range pending {
				p.stale = p.stale || p.probe
			}
		}
	}

	id := 0
	for range rapid.IntRange(1, 100).Draw(t, "steps") {
		switch rapid.IntRange(0, 2).Draw(t, "action") {
		case 0:
			if running < 8 {
				id++
				launch(id)
			}
		case 1:
			if len(pending) > 0 {
				answer(rapid.IntRange(0, len(pending)-1).Draw(t, "which"), rapid.IntRange(0, len(propKinds)-1).Draw(t, "answer"))
			}
		case 2:
			fc.Advance(time.Duration(rapid.IntRange(0, 1500).Draw(t, "advance ms")) * time.Millisecond)
		}
	}
	for len(pending) > 0 {
		answer(0, 0)
	}
	if running != 0 {
		t.Fatalf("%d requests still running with nothing pending", running)
	}
}

func TestBreakerNeverAdmitsMoreThanHalfOpenProbesProperty(t *testing.T) {
	rapid.Check(t, checkProbes)
}

func FuzzBreakerNeverAdmitsMoreThanHalfOpenProbes(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(checkProbes))
}

// TestBreakerStaleProbeHoldsItsSlot pins the package doc's promise that a probe's
// slot is held until its attempt completes. With HalfOpenProbes 2: probe B
// hangs, probe C fails and reopens the breaker; once OpenDuration passes
// again, probe D is admitted. B and D are both at the host, so a third
// request E must be rejected.
func TestBreakerStaleProbeHoldsItsSlot(t *testing.T) {
	fc := fakeclock.New(propStart)
	arrived := make(chan string, 8)
	base := baseFunc(func(r *http.Request) (*http.Response, error) {
		arrived <- r.URL.Path
		switch r.URL.Path {
		case "/hang":
			<-r.Context().Done()
			return nil, r.Context().Err()
		case "/fail":
			return memResponse(r, 503, "down"), nil
		}
		return memResponse(r, 200, "up"), nil
	})
	tr := transport.New(base, transport.WithClock(fc), transport.WithMaxAttempts(1),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: time.Second, HalfOpenProbes: 2}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	send := func(path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://probe.test"+path, nil)
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		return resp, err
	}
	waitArrival := func(want string) {
		select {
		case got := <-arrived:
			if got != want {
				t.Fatalf("%s arrived, want %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never arrived", want)
		}
	}
	hung := make(chan error, 2)
	sendHung := func() {
		go func() { _, err := send("/hang"); hung <- err }()
		waitArrival("/hang")
	}

	sendFail := func(what string) {
		if resp, err := send("/fail"); err != nil || resp.StatusCode != 503 {
			t.Fatalf("%s: %v, %v; want the 503", what, resp, err)
		}
		waitArrival("/fail")
	}

	sendFail("A, which opens the breaker")
	fc.Advance(time.Second)
	sendHung() // B: probe 1 of 2, hangs
	sendFail("C, probe 2 of 2, which reopens the breaker")
	fc.Advance(time.Second)
	sendHung() // D: a probe of the new period; B is still at the host
	_, err := send("/ok")
	if !errors.Is(err, transport.ErrCircuitOpen) {
		t.Errorf("E with probes B and D in flight: err = %v, want ErrCircuitOpen (HalfOpenProbes 2)", err)
	}
	cancel()
	for range 2 {
		if err := within(t, hung, "a hung probe to end"); !errors.Is(err, context.Canceled) {
			t.Errorf("hung probe ended with %v, want context.Canceled", err)
		}
	}
}
