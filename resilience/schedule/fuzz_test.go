package schedule_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience/schedule"
)

// scheduleValid is New's documented validity rule, written out
// independently, with the option it should blame.
func scheduleValid(cfg schedule.Config) (string, bool) {
	factor := cfg.Factor
	if factor == 0 {
		factor = 2
	}
	switch {
	case cfg.Base < 0:
		return "Base", false
	case math.IsNaN(factor) || math.IsInf(factor, 0) || factor < 1:
		return "Factor", false
	case cfg.Jitter < 0:
		return "Jitter", false
	case cfg.MaxDelay < 0, cfg.MaxDelay > 0 && cfg.MaxDelay < cfg.Base:
		return "MaxDelay", false
	case cfg.Strategy < schedule.JitterAdditive || cfg.Strategy > schedule.JitterEqual:
		return "Strategy", false
	}
	return "", true
}

// FuzzSchedule builds a Schedule from arbitrary parameters. New fails, with a *ConfigError naming the right option, exactly when the
// configuration is invalid, and never panics; a valid Schedule's Delay and
// Next stay in [0, MaxDelay] for any retry number and any number of steps,
// and without jitter the progression never decreases.
func FuzzSchedule(f *testing.F) {
	for _, s := range []struct {
		base, jitter, maxD int64
		factor             float64
		strategy           int
		retry              int
		steps              uint8
	}{
		{int64(100 * time.Millisecond), 0, int64(5 * time.Second), 2, 0, 3, 10},
		{1, 0, 0, 1e308, 0, 2, 5},
		{math.MaxInt64, math.MaxInt64, 0, 0, 0, math.MaxInt, 200},
		{int64(time.Second), int64(time.Second), int64(time.Minute), 1.0000001, 1, 1 << 40, 100},
		{int64(time.Second), 0, int64(time.Minute), 1.5, 2, 70, 70},
		{0, 0, 0, 0, 0, 0, 1},
		{1, 0, 0, math.NaN(), 0, 1, 1},
		{1, 0, 0, math.Inf(1), 0, 1, 1},
		{1, 0, 0, 0.5, 0, 1, 1},
		{10, 0, 5, 2, 0, 1, 1},
		{1, -1, 0, 2, 0, 1, 1},
		{1, 0, 0, 2, 7, 1, 1},
	} {
		f.Add(s.base, s.jitter, s.maxD, s.factor, s.strategy, s.retry, s.steps)
	}
	f.Fuzz(func(t *testing.T, base, jitter, maxD int64, factor float64, strategy int, retry int, steps uint8) {
		cfg := schedule.Config{
			Base: time.Duration(base), Factor: factor, Jitter: time.Duration(jitter),
			MaxDelay: time.Duration(maxD), Strategy: schedule.JitterStrategy(strategy),
		}
		s, err := schedule.New(cfg)
		option, valid := scheduleValid(cfg)
		if !valid {
			var ce *schedule.ConfigError
			if s != nil || !errors.As(err, &ce) || ce.Option != option {
				t.Fatalf("New(%+v) = %v, %v; want a *ConfigError for %s", cfg, s, err, option)
			}
			return
		}
		if err != nil {
			t.Fatalf("New(%+v) rejected a valid config: %v", cfg, err)
		}
		ceiling := cfg.MaxDelay
		if ceiling == 0 {
			ceiling = math.MaxInt64
		}
		noJitter := cfg.Strategy == schedule.JitterAdditive && cfg.Jitter == 0
		if d := s.Delay(retry, 0); d < 0 || d > ceiling {
			t.Fatalf("Delay(%d) = %v outside [0, %v]", retry, d, ceiling)
		} else if noJitter && d < cfg.Base {
			t.Fatalf("Delay(%d) = %v below Base %v without jitter", retry, d, cfg.Base)
		}
		if noJitter && retry < math.MaxInt && s.Delay(retry, 0) > s.Delay(retry+1, 0) {
			t.Fatalf("Delay(%d) = %v > Delay(%d) = %v without jitter", retry, s.Delay(retry, 0), retry+1, s.Delay(retry+1, 0))
		}
		var prev time.Duration
		for i := range int(steps) {
			d := s.Next()
			if d < 0 || d > ceiling {
				t.Fatalf("Next #%d = %v outside [0, %v]", i+1, d, ceiling)
			}
			if noJitter && (d < prev || i == 0 && d != cfg.Base) {
				t.Fatalf("Next #%d = %v after %v without jitter (Base %v)", i+1, d, prev, cfg.Base)
			}
			prev = d
		}
		s.Reset()
		if d := s.Next(); noJitter && d != cfg.Base {
			t.Fatalf("Next after Reset = %v, want Base %v", d, cfg.Base)
		}
	})
}
