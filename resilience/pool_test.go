package resilience

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestPooledRunIsClear: a run that goes back to the engine's pool holds
// nothing of its call. putRun clears only the run's callState; the rest of
// the run must be zero because only a handover sets it, and a run that
// handed over is never pooled. Each case is a call that returns with every
// attempt on the caller's goroutine, on each path a pooled run comes from.
func TestPooledRunIsClear(t *testing.T) {
	rec := &recorder{}
	br := &BreakerConfig{}
	cases := []struct {
		name  string
		cfg   EngineConfig
		pol   Policy
		steps []step
	}{
		{"plain engine, retried", EngineConfig{}, Policy{MaxAttempts: 3},
			[]step{{v: 503, retryable: true}, {v: 200}}},
		{"plain engine, gave up with a kept result", EngineConfig{}, Policy{MaxAttempts: 2},
			[]step{{v: 503, retryable: true}, {v: 503, retryable: true}}},
		{"hedging armed, timeout, breaker and hooks; retried", EngineConfig{Breaker: br, Hooks: rec.hooks()},
			Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Hour, PerAttemptTimeout: 2 * time.Hour},
			[]step{{v: 503, retryable: true}, {v: 200}}},
		{"timeout without hedging, failed", EngineConfig{Breaker: br}, Policy{MaxAttempts: 2, PerAttemptTimeout: time.Hour},
			[]step{{err: errors.New("boom")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine(tc.cfg)
			// sync.Pool may drop what is put (the race detector drops a
			// share on purpose): try until a run comes back.
			for range 100 {
				op := &scripted{steps: tc.steps}
				res := Execute[int](context.Background(), e, Call[int]{Key: "k", Op: op, Cancelable: true, Policy: tc.pol})
				res.Finish(nil)
				if res.Detached {
					t.Fatal("detached: no run is pooled")
				}
				r, ok := e.runs.Get().(*run[int])
				if !ok {
					continue
				}
				v := reflect.ValueOf(r).Elem()
				for i := range v.NumField() {
					switch f := v.Type().Field(i); f.Name {
					case "self", "spareHT": // kept on purpose: they hold no call's values
					default:
						if !v.Field(i).IsZero() {
							t.Errorf("pooled run's %s is not zero", f.Name)
						}
					}
				}
				return
			}
			t.Fatal("no run came back from the pool in 100 calls")
		})
	}
}
