package transport_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// TestAdaptiveHedgingLearnsTheDelay: a cold host hedges after MaxDelay;
// once its recent attempts show ~2ms, a slow request is hedged after about
// 2ms (all it saw was 2ms), reported on the hedge event.
func TestAdaptiveHedgingLearnsTheDelay(t *testing.T) {
	fc := newClock()
	var stall atomic.Bool
	release := make(chan struct{})
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if stall.Load() && r.Header.Get("X-Hedge") == "" {
			stall.Store(false)
			select { // the slow first attempt: answers only when cancelled or released
			case <-r.Context().Done():
				return nil, r.Context().Err()
			case <-release:
			}
		}
		fc.Advance(2 * time.Millisecond) // every attempt takes 2ms on the fake clock
		return fakeResponse(r, 200, "ok"), nil
	})
	hedges := make(chan resilience.HedgeEvent, 4)
	tr := transport.New(base, transport.WithClock(fc),
		transport.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: 0.05, MaxDelay: time.Second}, 1),
		transport.WithHooks(transport.Hooks{
			OnHedge: func(e resilience.HedgeEvent) { hedges <- e },
			OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
				if e.Kind == resilience.KindHedge {
					transport.HeaderOf(e).Set("X-Hedge", "1")
				}
				return ctx
			},
		}))
	delays := func() map[string]time.Duration {
		m := map[string]time.Duration{}
		for _, h := range tr.Stats().Hosts {
			if h.HedgeWarm {
				m[h.Key] = h.HedgeDelay
			}
		}
		return m
	}
	// Cold: the first request's delay is MaxDelay.
	for range 200 {
		resp, err := tr.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(hedges) != 0 {
		t.Fatalf("%d hedges for fast requests", len(hedges))
	}
	d, ok := delays()["svc.test"]
	if !ok || d < 2*time.Millisecond || d > 3*time.Millisecond {
		t.Fatalf("learned delays %v, want svc.test warm at about 2ms", delays())
	}
	stall.Store(true)
	done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil))
	fc.WaitForTimers(1, wait)
	fc.Advance(d)
	h := recv(t, hedges, "the hedge")
	if !h.Adaptive || h.Delay != d {
		t.Errorf("hedge %+v, want adaptive after %v", h, d)
	}
	r := recv(t, done, "RoundTrip")
	if r.err != nil {
		t.Fatal(r.err)
	}
	closeResp(r)
	close(release)
}

// TestWithAdaptiveHedgingRejectsNonsense: bad configuration panics in the
// option, naming it and the field.
func TestWithAdaptiveHedgingRejectsNonsense(t *testing.T) {
	for _, tc := range []struct {
		cfg       resilience.AdaptiveHedging
		maxHedges int
	}{
		{resilience.AdaptiveHedging{MaxExtraLoad: -0.05}, 1},
		{resilience.AdaptiveHedging{MaxExtraLoad: 1.5}, 1},
		{resilience.AdaptiveHedging{MaxExtraLoad: 0.05, MinDelay: time.Second, MaxDelay: time.Millisecond}, 1},
		{resilience.AdaptiveHedging{MaxExtraLoad: 0.05}, 0},
	} {
		func() {
			defer func() {
				p := recover()
				if s, _ := p.(string); !strings.Contains(s, "WithAdaptiveHedging") {
					t.Errorf("%+v, %d: panic %v, want one naming WithAdaptiveHedging", tc.cfg, tc.maxHedges, p)
				}
			}()
			transport.WithAdaptiveHedging(tc.cfg, tc.maxHedges)
		}()
	}
}
