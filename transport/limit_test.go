package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// holdingBase answers "/hold" only when release is closed (or the request's
// context ends), everything else at once with code; it counts what reached
// it.
type holdingBase struct {
	release chan struct{}
	held    chan struct{} // receives once per request that started holding
	code    atomic.Int32
	hits    atomic.Int32
}

func newHoldingBase() *holdingBase {
	b := &holdingBase{release: make(chan struct{}), held: make(chan struct{}, 16)}
	b.code.Store(http.StatusOK)
	return b
}

func (b *holdingBase) RoundTrip(r *http.Request) (*http.Response, error) {
	b.hits.Add(1)
	if strings.HasPrefix(r.URL.Path, "/hold") {
		b.held <- struct{}{}
		select {
		case <-b.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return fakeResponse(r, int(b.code.Load()), "ok"), nil
}

// oneAtATime is a limit of exactly one attempt in flight.
var oneAtATime = resilience.ConcurrencyLimit{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, MaxWait: -1}

// hold starts a request to /hold through tr and waits until the base holds
// it; the returned channel gets its result once base.release is closed.
func hold(t *testing.T, tr http.RoundTripper, base *holdingBase) <-chan result {
	t.Helper()
	ch := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/hold", nil))
	recv(t, base.held, "the held request to reach the base")
	return ch
}

// TestShedRequestNeverReachesTheBase: with the limit reached, a request is
// refused at once: an error matching resilience.ErrOverloaded (an
// *OverloadError saying the limit and what was in flight), nothing sent,
// its body closed, OnShed fired and the call ended as "overloaded".
func TestShedRequestNeverReachesTheBase(t *testing.T) {
	base := newHoldingBase()
	var shed events[resilience.ShedEvent]
	var ends events[resilience.CallEndEvent]
	tr := transport.New(base, transport.WithConcurrencyLimit(oneAtATime), transport.WithHooks(transport.Hooks{
		OnShed:    shed.add,
		OnCallEnd: ends.add,
	}))
	held := hold(t, tr, base)

	body := newCallerBody(strings.NewReader("payload"))
	req := newRequest(t, testCtx(t), http.MethodPut, "http://svc.test/item", body)
	resp, err := tr.RoundTrip(req)
	if resp != nil || !errors.Is(err, resilience.ErrOverloaded) {
		t.Fatalf("RoundTrip at the limit = %v, %v; want nil and an error matching ErrOverloaded", resp, err)
	}
	var oe *resilience.OverloadError
	if !errors.As(err, &oe) || oe.Key != "svc.test" || oe.Limit != 1 || oe.InFlight != 1 {
		t.Errorf("error %#v, want an *OverloadError for svc.test at limit 1 with 1 in flight", err)
	}
	if n := base.hits.Load(); n != 1 {
		t.Errorf("the base saw %d requests, want only the held one", n)
	}
	if body.closes.Load() != 1 || body.reads.Load() != 0 {
		t.Errorf("shed request's body: %d closes, %d reads; want closed once, never read", body.closes.Load(), body.reads.Load())
	}
	if got := shed.get(); len(got) != 1 || got[0].Kind != resilience.KindInitial || got[0].Limit != 1 || got[0].InFlight != 1 {
		t.Errorf("OnShed events %+v, want one for the first attempt at limit 1", got)
	}
	if got := ends.get(); len(got) != 1 || got[0].Reason != resilience.ReasonOverloaded || got[0].Attempts != 0 {
		t.Errorf("OnCallEnd events %+v, want one with reason overloaded and no attempt", got)
	}

	close(base.release)
	closeResp(recv(t, held, "the held request"))
	if hs := tr.Stats().Hosts; len(hs) != 1 || hs[0].InFlight != 0 || hs[0].Shed != 1 {
		t.Errorf("Stats hosts %+v, want svc.test with nothing in flight and 1 shed", hs)
	}
}

// TestLimitWaitsForAPermit: a request over the limit waits (MaxWait, on the
// transport's clock) and goes ahead when a permit is released, firing
// OnLimitWait; one that waits MaxWait out is shed, with the wait in its
// error.
func TestLimitWaitsForAPermit(t *testing.T) {
	fc := newClock()
	base := newHoldingBase()
	var waits events[resilience.LimitWaitEvent]
	cfg := oneAtATime
	cfg.MaxWait = 50 * time.Millisecond
	tr := transport.New(base, transport.WithClock(fc), transport.WithConcurrencyLimit(cfg),
		transport.WithHooks(transport.Hooks{OnLimitWait: waits.add}))
	held := hold(t, tr, base)

	armed := fc.Armed()
	waiter := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/next", nil))
	waitArmed(t, fc, armed+1) // its wait's timer
	fc.Advance(10 * time.Millisecond)
	close(base.release)
	closeResp(recv(t, held, "the held request"))
	r := recv(t, waiter, "the waiting request")
	if r.err != nil {
		t.Fatalf("waiting request: %v, want it sent once a permit was free", r.err)
	}
	closeResp(r)
	if got := waits.get(); len(got) != 1 || got[0].Waited != 10*time.Millisecond {
		t.Errorf("OnLimitWait events %+v, want one that waited 10ms", got)
	}

	// Wait out MaxWait: shed, having waited it.
	base.release = make(chan struct{})
	held = hold(t, tr, base)
	armed = fc.Armed()
	waiter = goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/next", nil))
	waitArmed(t, fc, armed+1)
	fc.Advance(50 * time.Millisecond)
	r = recv(t, waiter, "the request waiting out MaxWait")
	var oe *resilience.OverloadError
	if !errors.As(r.err, &oe) || oe.Waited != 50*time.Millisecond {
		t.Errorf("after MaxWait: %v, want an *OverloadError that waited 50ms", r.err)
	}
	close(base.release)
	closeResp(recv(t, held, "the held request"))
}

// TestLimitWaitEndsWithTheCallersContext: a request waiting for a permit
// is shed as soon as its context ends, whatever MaxWait says.
func TestLimitWaitEndsWithTheCallersContext(t *testing.T) {
	base := newHoldingBase()
	cfg := oneAtATime
	cfg.MaxWait = time.Hour
	tr := transport.New(base, transport.WithConcurrencyLimit(cfg))
	held := hold(t, tr, base)
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Millisecond)
	defer cancel()
	_, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://svc.test/next", nil))
	var oe *resilience.OverloadError
	if !errors.As(err, &oe) || oe.Waited >= time.Hour {
		t.Errorf("waiting past the caller's deadline: %v, want shed when the deadline came, long before MaxWait", err)
	}
	close(base.release)
	closeResp(recv(t, held, "the held request"))
}

// TestRetryNeedsAPermit: a retry over the limit is not sent: the call ends
// as "overloaded" with the answer it had, and OnShed says it was a retry.
func TestRetryNeedsAPermit(t *testing.T) {
	fc := newClock()
	base := newHoldingBase()
	var shed events[resilience.ShedEvent]
	var ends events[resilience.CallEndEvent]
	tr := transport.New(base, transport.WithClock(fc), transport.WithConcurrencyLimit(oneAtATime),
		transport.WithBackoff(resilience.Constant(time.Second)),
		transport.WithHooks(transport.Hooks{OnShed: shed.add, OnCallEnd: ends.add}))

	base.code.Store(http.StatusBadGateway)
	armed := fc.Armed()
	first := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/a", nil))
	waitArmed(t, fc, armed+1) // its backoff: its permit is back
	base.code.Store(http.StatusOK)
	held := hold(t, tr, base) // takes the only permit
	fc.Advance(time.Second)
	r := recv(t, first, "the retrying request")
	if r.err != nil || r.resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("retry refused by the limit: %v, %v; want the 502 it had", r.resp, r.err)
	}
	closeResp(r)
	if got := shed.get(); len(got) != 1 || got[0].Kind != resilience.KindRetry || got[0].Attempt != 2 {
		t.Errorf("OnShed events %+v, want one for attempt 2, a retry", got)
	}
	if got := ends.get(); len(got) != 1 || got[0].Reason != resilience.ReasonOverloaded {
		t.Errorf("OnCallEnd events %+v, want reason overloaded", got)
	}
	if n := base.hits.Load(); n != 2 {
		t.Errorf("the base saw %d requests, want 2 (the first attempt and the held one)", n)
	}
	close(base.release)
	closeResp(recv(t, held, "the held request"))
}

// TestHedgeNeedsAPermit: at the limit a hedge is not sent; the call goes
// on with its first attempt.
func TestHedgeNeedsAPermit(t *testing.T) {
	fc := newClock()
	base := newHoldingBase()
	var shed events[resilience.ShedEvent]
	var hedges events[resilience.HedgeEvent]
	tr := transport.New(base, transport.WithClock(fc), transport.WithConcurrencyLimit(oneAtATime),
		transport.WithHedging(10*time.Millisecond, 1),
		transport.WithHooks(transport.Hooks{OnShed: shed.add, OnHedge: hedges.add}))
	armed := fc.Armed()
	held := hold(t, tr, base)
	waitArmed(t, fc, armed+1) // the hedge timer
	fc.Advance(10 * time.Millisecond)
	if !waitFor(func() bool { return len(shed.get()) == 1 }) {
		t.Fatalf("no OnShed for the hedge")
	}
	close(base.release)
	r := recv(t, held, "the hedged request")
	if r.err != nil {
		t.Fatal(r.err)
	}
	closeResp(r)
	if got := shed.get(); got[0].Kind != resilience.KindHedge {
		t.Errorf("OnShed %+v, want a hedge", got[0])
	}
	if n := len(hedges.get()); n != 0 || base.hits.Load() != 1 {
		t.Errorf("%d hedges launched, base saw %d requests; want none and 1", n, base.hits.Load())
	}
}

// TestCriticalityAndExemption: sheddable requests are refused once three
// quarters of the limit is in use, default ones only at the limit, and a
// request with Policy.NoLimit passes even then (and is counted in flight).
func TestCriticalityAndExemption(t *testing.T) {
	base := newHoldingBase()
	four := resilience.ConcurrencyLimit{InitialLimit: 4, MinLimit: 4, MaxLimit: 4, MaxWait: -1}
	tr := transport.New(base, transport.WithConcurrencyLimit(four))
	var helds []<-chan result
	for range 3 {
		helds = append(helds, hold(t, tr, base))
	}
	send := func(p transport.Policy) error {
		resp, err := tr.RoundTrip(newRequest(t, transport.WithPolicy(testCtx(t), p), http.MethodGet, "http://svc.test/now", nil))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := send(transport.Policy{Criticality: resilience.CriticalitySheddable}); !errors.Is(err, resilience.ErrOverloaded) {
		t.Errorf("sheddable request with 3 of 4 in flight: %v, want shed", err)
	}
	if err := send(transport.Policy{}); err != nil {
		t.Errorf("default request with 3 of 4 in flight: %v, want sent", err)
	}
	helds = append(helds, hold(t, tr, base)) // 4 of 4
	if err := send(transport.Policy{Criticality: resilience.CriticalityCritical}); !errors.Is(err, resilience.ErrOverloaded) {
		t.Errorf("critical request at the limit with MaxWait off: %v, want shed", err)
	}
	if err := send(transport.Policy{NoLimit: true}); err != nil {
		t.Errorf("exempt request at the limit: %v, want sent", err)
	}
	close(base.release)
	for _, h := range helds {
		closeResp(recv(t, h, "a held request"))
	}
	if _, err := tr.RoundTrip(newRequest(t, transport.WithPolicy(testCtx(t), transport.Policy{Criticality: 7}), http.MethodGet, "http://svc.test/", nil)); err == nil || !strings.Contains(err.Error(), "Policy.Criticality") {
		t.Errorf("an invalid criticality: %v, want an error naming Policy.Criticality", err)
	}
}

// TestPanickingHookReturnsThePermit: a hook that panics during an attempt
// does not keep its permit: the panic propagates, and the next request is
// admitted.
func TestPanickingHookReturnsThePermit(t *testing.T) {
	var boom atomic.Bool
	boom.Store(true)
	tr := transport.New(newHoldingBase(), transport.WithConcurrencyLimit(oneAtATime), transport.WithHooks(transport.Hooks{
		OnAttemptStart: func(ctx context.Context, _ resilience.AttemptStartEvent) context.Context {
			if boom.Load() {
				panic("hook")
			}
			return ctx
		},
	}))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the hook's panic did not propagate")
			}
		}()
		_, _ = tr.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil)) //nolint:bodyclose // it panics
	}()
	boom.Store(false)
	resp, err := tr.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil))
	if err != nil {
		t.Fatalf("after a panicking hook: %v, want the permit back", err)
	}
	resp.Body.Close()
}

// TestWithConcurrencyLimitRejectsNonsense names the option and the field.
func TestWithConcurrencyLimitRejectsNonsense(t *testing.T) {
	for _, c := range []struct {
		f    func()
		want string
	}{
		{func() { transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{MinLimit: -1}) }, "WithConcurrencyLimit: ConcurrencyLimit.MinLimit"},
		{func() { transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{MinLimit: 9, MaxLimit: 3}) }, "MinLimit 9 is above MaxLimit 3"},
		{func() { transport.WithMaxKeys(0) }, "WithMaxKeys"},
	} {
		if msg := panicMessage(c.f); !strings.Contains(msg, c.want) {
			t.Errorf("panic %q, want it to contain %q", msg, c.want)
		}
	}
}

// waitFor polls cond for up to wait; a safety net for a failing test only.
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}
