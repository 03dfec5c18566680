package resilience_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"github.com/MrVSiK/gotry/resilience"
)

// TestPanicDuringProbeReturnsTheProbeSlot pins issue 25's item 4: a hook
// (or the attempt itself) that panics while a half-open breaker's probe is
// in flight propagates, and leaves no probe slot behind: the next request
// is admitted as a probe again, instead of being rejected for good.
func TestPanicDuringProbeReturnsTheProbeSlot(t *testing.T) {
	tests := []struct {
		name string
		// hooks panic when arm is set; fn panics when its argument is true.
		hooks     func(arm *atomic.Bool) resilience.Hooks
		panicInDo bool
		// wantProbe: the next call is a probe. OnAttemptEnd fires after
		// the probe settled (and closed the breaker), so the next call
		// finds it closed.
		wantProbe bool
	}{
		{name: "OnAttemptStart", hooks: func(arm *atomic.Bool) resilience.Hooks {
			return resilience.Hooks{OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
				if arm.Load() && e.Probe {
					panic("hook")
				}
				return ctx
			}}
		}, wantProbe: true},
		{name: "OnBreakerStateChange to half-open", hooks: func(arm *atomic.Bool) resilience.Hooks {
			return resilience.Hooks{OnBreakerStateChange: func(e resilience.BreakerStateEvent) {
				if arm.Load() && e.To == resilience.BreakerHalfOpen {
					panic("hook")
				}
			}}
		}, wantProbe: true},
		{name: "OnAttemptEnd", hooks: func(arm *atomic.Bool) resilience.Hooks {
			return resilience.Hooks{OnAttemptEnd: func(e resilience.AttemptEndEvent) {
				if arm.Load() && e.Probe {
					panic("hook")
				}
			}}
		}},
		{name: "the attempt", panicInDo: true, wantProbe: true, hooks: func(*atomic.Bool) resilience.Hooks { return resilience.Hooks{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeclock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
			var arm atomic.Bool
			probes := 0
			hooks := tc.hooks(&arm)
			hooks = resilience.Combine(hooks, resilience.Hooks{OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
				if e.Probe {
					probes++
				}
				return ctx
			}})
			r := resilience.NewRetrier(
				resilience.WithMaxAttempts(1),
				resilience.WithClock(fc),
				resilience.WithHooks(hooks),
				resilience.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: time.Second}),
			)
			fail := errors.New("down")
			if _, err := resilience.Retry(context.Background(), r, "h", func(context.Context) (int, error) { return 0, fail }); !errors.Is(err, fail) {
				t.Fatalf("first call: %v, want its failure", err)
			}
			if got := breakerOf(r, "h"); got != resilience.BreakerOpen {
				t.Fatalf("breaker %v after the failure, want open", got)
			}
			fc.Advance(2 * time.Second)

			arm.Store(true)
			func() {
				defer func() {
					if recover() == nil {
						t.Error("the panic did not propagate")
					}
				}()
				_, _ = resilience.Retry(context.Background(), r, "h", func(context.Context) (int, error) {
					if tc.panicInDo {
						panic("do")
					}
					return 1, nil
				})
			}()
			arm.Store(false)

			before := probes
			v, err := resilience.Retry(context.Background(), r, "h", func(context.Context) (int, error) { return 7, nil })
			if err != nil || v != 7 {
				t.Fatalf("call after the panic: %v, %v; want it admitted (the probe slot was kept)", v, err)
			}
			if got := probes > before; got != tc.wantProbe {
				t.Errorf("the call after the panic was a probe: %v, want %v", got, tc.wantProbe)
			}
			if got := breakerOf(r, "h"); got != resilience.BreakerClosed {
				t.Errorf("breaker %v after a successful probe, want closed", got)
			}
		})
	}
}

// breakerOf returns key's breaker state in r's Stats.
func breakerOf(r *resilience.Retrier, key string) resilience.BreakerState {
	h, _ := r.Stats().Host(key)
	return h.Breaker
}
