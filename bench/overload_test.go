package bench

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestQueueServerHasTheCapacityItClaims checks the overload scenario's
// server against its own arithmetic: offered 70% of its capacity it answers
// every request in about its service time (no retries, no drop); driven far
// beyond it by clients that never give up, it serves Capacity/Service
// requests a second and no more (slower only if the machine is too busy to
// keep up, hence the generous lower bound); and a request whose client gave
// up costs its service time all the same.
func TestQueueServerHasTheCapacityItClaims(t *testing.T) {
	defer goleak.VerifyNone(t)
	o := OverloadConfig{Capacity: 8, Service: 10 * time.Millisecond, Steady: time.Second}
	o.setDefaults(false)

	t.Run("70% load, no retries: goodput is what is offered", func(t *testing.T) {
		c := overloadCandidates()[0]
		if c.name != "no retries" {
			t.Fatalf("first candidate %q, want no retries", c.name)
		}
		run := overloadSteady(&o, c, 1)
		if run.Requests < 400 || run.Goodput < 0.97*run.Offered {
			t.Errorf("%d requests, goodput %.0f/s of %.0f/s offered; want at least 97%%", run.Requests, run.Goodput, run.Offered)
		}
		if run.P50 < o.Service || run.P50 > 5*o.Service {
			t.Errorf("p50 %v, want about the service time %v", run.P50, o.Service)
		}
	})

	t.Run("saturated: it serves its capacity and no more", func(t *testing.T) {
		const d = time.Second
		t0 := time.Now()
		srv := newQueueServer(&o, t0, d, 0, 0)
		defer srv.Close()
		base := newH2CBase()
		defer base.CloseIdleConnections()
		client := &http.Client{Transport: base}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		var answered atomic.Int64
		var wg sync.WaitGroup
		for range 4 * o.Capacity { // closed loop, never giving up before d
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL(), nil)
					resp, err := client.Do(req)
					if err == nil && resp.StatusCode == http.StatusOK {
						answered.Add(1)
					}
					finish(resp)
				}
			})
		}
		wg.Wait()
		capacity := o.capacity() * d.Seconds() // 800
		if n := float64(answered.Load()); n > capacity+float64(o.Capacity) || n < 0.6*capacity {
			t.Errorf("answered %.0f in %v, want about %.0f and never more than %.0f", n, d, capacity, capacity+float64(o.Capacity))
		}
	})

	t.Run("a request whose client left still costs its service time", func(t *testing.T) {
		t0 := time.Now()
		srv := newQueueServer(&o, t0, time.Second, 0, 0)
		defer srv.Close()
		now := time.Now()
		var last time.Time
		for range 3 * o.Capacity { // three service times of work, all booked at once
			last = srv.book(now)
		}
		if got, want := last.Sub(now), 3*o.Service; got != want {
			t.Errorf("the last of %d requests ends after %v, want %v", 3*o.Capacity, got, want)
		}
	})

	t.Run("during the drop service takes Factor times as long", func(t *testing.T) {
		t0 := time.Now()
		srv := newQueueServer(&o, t0, time.Second, 0, time.Hour)
		defer srv.Close()
		now := time.Now()
		if got, want := srv.book(now).Sub(now), time.Duration(float64(o.Service)*o.Factor); got != want {
			t.Errorf("one request during the drop takes %v, want %v", got, want)
		}
	})
}
