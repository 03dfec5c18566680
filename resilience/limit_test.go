package resilience

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// capacityDrop is the scenario of issue 23: a server serving 16 requests at
// a time at 5ms each (3,200/s), offered 70% of that at random, every
// request with a 100ms deadline; for 4 s the service time doubles.
var capacityDrop = overloadModel{workers: 16, service: 5 * time.Millisecond, load: 0.7, deadline: 100 * time.Millisecond,
	dropAt: 3 * time.Second, dropFor: 4 * time.Second, dropBy: 2, length: 12 * time.Second, seed: 1}

// TestLimitKeepsGoodputThroughCapacityDrop: with the limit, goodput during
// a capacity drop stays at ≥ 95% of what the server can serve, is back to
// ≥ 90% of normal within the first second after the drop, and the limit
// sheds (almost) nothing outside it — for several shapes of server, none of
// them tuned for. Without the limit, the same server collapses.
func TestLimitKeepsGoodputThroughCapacityDrop(t *testing.T) {
	shapes := []struct {
		name string
		m    overloadModel
	}{
		{"16 workers 5ms, service ×2", capacityDrop},
		{"16 workers 5ms, service ×4", with(capacityDrop, func(m *overloadModel) { m.dropBy, m.seed = 4, 2 })},
		{"4 workers 20ms, deadline 300ms", with(capacityDrop, func(m *overloadModel) {
			m.workers, m.service, m.deadline, m.seed = 4, 20*time.Millisecond, 300*time.Millisecond, 3
		})},
		{"64 workers 2ms, deadline 50ms", with(capacityDrop, func(m *overloadModel) {
			m.workers, m.service, m.deadline, m.seed = 64, 2*time.Millisecond, 50*time.Millisecond, 4
		})},
		{"lognormal service times", with(capacityDrop, func(m *overloadModel) { m.sigma, m.seed = 1, 7 })},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			m := s.m
			r := m.run()
			from, to := int(m.dropAt/time.Second), int((m.dropAt+m.dropFor)/time.Second)
			dropCap := float64(m.workers) / (m.service.Seconds() * m.dropBy) * float64(to-from)
			if good := float64(total(r.good, from, to)); good < 0.95*dropCap {
				t.Errorf("goodput during the drop %.0f/s, want ≥ 95%% of the %.0f/s the server can serve", good/float64(to-from), dropCap/float64(to-from))
			}
			normal := float64(total(r.good, 1, from)) / float64(from-1)
			if after := float64(r.good[to]); after < 0.9*normal {
				t.Errorf("goodput in the first second after the drop %.0f, want ≥ 90%% of normal %.0f", after, normal)
			}
			steady := total(r.shed, 1, from) + total(r.shed, to+1, len(r.shed)-1)
			offered := total(r.offered, 1, from) + total(r.offered, to+1, len(r.offered)-1)
			if float64(steady) > 1e-4*float64(offered) {
				t.Errorf("%d of %d requests shed outside the drop, want ≤ 0.01%%", steady, offered)
			}

			m.noLimit = true
			if nl := m.run(); float64(total(nl.good, from, to)) > 0.5*dropCap {
				t.Errorf("without the limit goodput during the drop was %d: the scenario no longer overloads the server", total(nl.good, from, to))
			}
		})
	}
}

// TestLimitShedsNothingInSteadyState: below capacity, with fixed or
// heavy-tailed service times, at most 0.01% of requests are shed.
func TestLimitShedsNothingInSteadyState(t *testing.T) {
	for _, m := range []overloadModel{
		with(capacityDrop, func(m *overloadModel) { m.dropBy, m.length, m.seed = 1, 30*time.Second, 5 }),
		with(capacityDrop, func(m *overloadModel) { m.dropBy, m.length, m.sigma, m.seed = 1, 30*time.Second, 1, 6 }),
		with(capacityDrop, func(m *overloadModel) { m.dropBy, m.length, m.sigma, m.load, m.seed = 1, 30*time.Second, 0.5, 0.8, 8 }),
	} {
		r := m.run()
		shed, offered := total(r.shed, 1, len(r.shed)), total(r.offered, 1, len(r.offered))
		if float64(shed) > 1e-4*float64(offered) {
			t.Errorf("σ %v, load %v: %d of %d requests shed in steady state, want ≤ 0.01%%", m.sigma, m.load, shed, offered)
		}
	}
}

// TestLimitFallsToItsFloorAndRisesToItsCeiling: a key answering only
// overload answers takes the limit down to MinLimit; a fast key under a
// load far above InitialLimit takes it up, never past MaxLimit.
func TestLimitFallsToItsFloorAndRisesToItsCeiling(t *testing.T) {
	down := with(capacityDrop, func(m *overloadModel) {
		m.limit = ConcurrencyLimit{MinLimit: 3}
		m.overload = func(at time.Duration) bool { return at >= 2*time.Second }
		m.dropBy, m.length = 1, 6*time.Second
	})
	if r := down.run(); r.limits[4] != 3 {
		t.Errorf("limit %d after 2 s of 503s, want MinLimit 3 (limits per second %v)", r.limits[4], r.limits)
	}

	up := with(capacityDrop, func(m *overloadModel) {
		m.workers, m.service, m.dropBy, m.length = 400, 5*time.Millisecond, 1, 3*time.Second
		m.limit = ConcurrencyLimit{InitialLimit: 5, MaxLimit: 150}
	})
	r := up.run()
	if r.limits[1] != 150 {
		t.Errorf("limit %d with 280 requests in flight wanted, want MaxLimit 150 (limits %v)", r.limits[1], r.limits)
	}
	// Within a second the limit has risen from 5 above what the load
	// needs (about 280 in flight: MaxLimit 150 is below it, so it sheds).
	up.limit.MaxLimit = 1000
	r = up.run()
	if r.shed[1] > 0 || r.limits[1] < 280 {
		t.Errorf("second 1: limit %d, %d shed; want the limit above the ~280 in flight and nothing shed", r.limits[1], r.shed[1])
	}
}

// TestLimitRecoversAfterOverloadAnswers: once the key stops answering 503,
// the limit climbs back and sheds nothing within a second.
func TestLimitRecoversAfterOverloadAnswers(t *testing.T) {
	m := with(capacityDrop, func(m *overloadModel) {
		m.overload = func(at time.Duration) bool { return at >= 2*time.Second && at < 4*time.Second }
		m.dropBy, m.length = 1, 7*time.Second
	})
	r := m.run()
	if r.limits[3] > DefaultInitialLimit {
		t.Errorf("limit %d after 2 s of 503s, want it below %d", r.limits[3], DefaultInitialLimit)
	}
	if r.shed[5] > 0 || float64(r.good[5]) < 0.9*float64(r.offered[5]) {
		t.Errorf("second after the 503s stopped: %d good of %d offered, %d shed", r.good[5], r.offered[5], r.shed[5])
	}
}

// TestLimitAdmissionNeverExceedsTheLimit is a property over any sequence
// of admissions, releases and results: an admission leaves at most the
// limit in flight (for its criticality), the limit stays within
// [MinLimit, MaxLimit], and the in-flight count is exactly what was
// admitted and not released.
func TestLimitAdmissionNeverExceedsTheLimit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := ConcurrencyLimit{MinLimit: rapid.IntRange(1, 5).Draw(t, "min"), MaxLimit: rapid.IntRange(5, 40).Draw(t, "max"), MaxWait: -1}.withDefaults()
		l := newLimiter(&cfg)
		now := time.Unix(1_700_000_000, 0)
		held := 0
		for range rapid.IntRange(1, 400).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				c := Criticality(rapid.IntRange(-1, 1).Draw(t, "crit"))
				lim := int(l.limit.Load())
				if l.tryAcquire(c) {
					held++
					if held > lim {
						t.Fatalf("%d in flight after an admission at limit %d", held, lim)
					}
				}
			case 2:
				if held > 0 {
					held--
					d := time.Duration(rapid.IntRange(1, 200).Draw(t, "ms")) * time.Millisecond
					l.release(now, d, limitResult(rapid.IntRange(0, 2).Draw(t, "result")))
				}
			case 3:
				now = now.Add(time.Duration(rapid.IntRange(1, 100).Draw(t, "advance")) * time.Millisecond)
			}
			if got := l.inFlight(); got != held {
				t.Fatalf("in flight %d, want %d", got, held)
			}
			if lim := l.Limit(); lim < cfg.MinLimit || lim > cfg.MaxLimit {
				t.Fatalf("limit %d outside [%d, %d]", lim, cfg.MinLimit, cfg.MaxLimit)
			}
		}
	})
}

func TestConcurrencyLimitDefaultsAndNonsense(t *testing.T) {
	got := ConcurrencyLimit{}.withDefaults()
	if want := (ConcurrencyLimit{InitialLimit: DefaultInitialLimit, MinLimit: DefaultMinLimit, MaxLimit: DefaultMaxLimit}); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		cfg  ConcurrencyLimit
		want string
	}{
		{ConcurrencyLimit{InitialLimit: -1}, "InitialLimit"},
		{ConcurrencyLimit{MinLimit: -1}, "MinLimit"},
		{ConcurrencyLimit{MaxLimit: -1}, "MaxLimit"},
		{ConcurrencyLimit{MinLimit: 10, MaxLimit: 5}, "MinLimit 10 is above MaxLimit 5"},
		{ConcurrencyLimit{InitialLimit: 50, MaxLimit: 40}, "InitialLimit 50 is outside"},
	} {
		if msg := panicMessage(func() { c.cfg.withDefaults() }); !strings.Contains(msg, c.want) {
			t.Errorf("%+v: panic %q, want it to name %q", c.cfg, msg, c.want)
		}
	}
}

func with(m overloadModel, f func(*overloadModel)) overloadModel {
	f(&m)
	return m
}
