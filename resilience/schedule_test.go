package resilience_test

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/MrVSiK/gotry/resilience"
)

// drawMin and drawMax pin a schedule's random draws to the ends of [0, n).
func drawMin(int64) int64   { return 0 }
func drawMax(n int64) int64 { return n - 1 }

// fataler is what mustSchedule needs of a *testing.T, *testing.B or *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustSchedule(t fataler, cfg resilience.ScheduleConfig) *resilience.Schedule {
	t.Helper()
	s, err := resilience.NewSchedule(cfg)
	if err != nil {
		t.Fatalf("NewSchedule(%+v): %v", cfg, err)
	}
	return s
}

func TestScheduleConfigRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name   string
		cfg    resilience.ScheduleConfig
		option string
	}{
		{"negative base", resilience.ScheduleConfig{Base: -1}, "Base"},
		{"NaN factor", resilience.ScheduleConfig{Factor: math.NaN()}, "Factor"},
		{"+Inf factor", resilience.ScheduleConfig{Factor: math.Inf(1)}, "Factor"},
		{"-Inf factor", resilience.ScheduleConfig{Factor: math.Inf(-1)}, "Factor"},
		{"factor below 1", resilience.ScheduleConfig{Factor: 0.5}, "Factor"},
		{"negative factor", resilience.ScheduleConfig{Factor: -2}, "Factor"},
		{"negative jitter", resilience.ScheduleConfig{Jitter: -time.Nanosecond}, "Jitter"},
		{"negative max delay", resilience.ScheduleConfig{MaxDelay: -time.Second}, "MaxDelay"},
		{"max delay below base", resilience.ScheduleConfig{Base: time.Second, MaxDelay: time.Millisecond}, "MaxDelay"},
		{"unknown strategy", resilience.ScheduleConfig{Strategy: resilience.JitterEqual + 1}, "Strategy"},
		{"negative strategy", resilience.ScheduleConfig{Strategy: -1}, "Strategy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := resilience.NewSchedule(tt.cfg)
			var ce *resilience.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("NewSchedule(%+v) = %v, %v; want a *ConfigError", tt.cfg, s, err)
			}
			if ce.Option != tt.option || ce.Config != "ScheduleConfig" {
				t.Errorf("error names %s.%s, want ScheduleConfig.%s (%v)", ce.Config, ce.Option, tt.option, err)
			}
		})
	}
}

func TestScheduleNextProgression(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name string
		cfg  resilience.ScheduleConfig
		want []time.Duration
	}{
		{"doubling capped", resilience.ScheduleConfig{Base: 100 * ms, Factor: 2, MaxDelay: time.Second},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"zero factor means 2", resilience.ScheduleConfig{Base: ms},
			[]time.Duration{ms, 2 * ms, 4 * ms, 8 * ms}},
		{"factor 1 is constant", resilience.ScheduleConfig{Base: 3 * ms, Factor: 1},
			[]time.Duration{3 * ms, 3 * ms, 3 * ms}},
		{"fractional factor", resilience.ScheduleConfig{Base: 100 * ms, Factor: 1.5},
			[]time.Duration{100 * ms, 150 * ms, 225 * ms, 337500 * time.Microsecond}},
		{"huge factor jumps to the cap", resilience.ScheduleConfig{Base: ms, Factor: 1e300, MaxDelay: time.Minute},
			[]time.Duration{ms, time.Minute, time.Minute}},
		{"huge factor without a cap", resilience.ScheduleConfig{Base: ms, Factor: 1e300},
			[]time.Duration{ms, math.MaxInt64, math.MaxInt64}},
		{"base equal to cap", resilience.ScheduleConfig{Base: time.Second, MaxDelay: time.Second},
			[]time.Duration{time.Second, time.Second}},
		{"zero config", resilience.ScheduleConfig{},
			[]time.Duration{0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSchedule(t, tt.cfg)
			for i, want := range tt.want {
				if got := s.Next(); got != want {
					t.Errorf("Next #%d = %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

// Regression: an integer accumulator doubled 64 times wraps negative, and a
// negative sleep returns at once. The schedule must saturate instead.
func TestScheduleNextSaturatesInsteadOfWrappingNegative(t *testing.T) {
	s := mustSchedule(t, resilience.ScheduleConfig{Base: time.Nanosecond, Factor: 2})
	prev := time.Duration(0)
	for i := range 500 {
		d := s.Next()
		if d < prev {
			t.Fatalf("Next #%d = %v, below the previous %v", i+1, d, prev)
		}
		prev = d
	}
	if prev != math.MaxInt64 {
		t.Errorf("after 500 doublings Next = %v, want the largest Duration", prev)
	}
}

// Regression: 1ns·2^63 is exactly 2^63 as a float64, one past the largest
// Duration; converting it without clamping first yields a negative number.
func TestScheduleDelayClampsAtTheTopOfTheRange(t *testing.T) {
	s := mustSchedule(t, resilience.ScheduleConfig{Base: time.Nanosecond, Factor: 2})
	for n := 1; n <= 200; n++ {
		want := time.Duration(math.MaxInt64)
		if n <= 63 {
			want = time.Duration(1) << (n - 1)
		}
		if got := s.Delay(n, 0); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestScheduleResetRestartsAtBase(t *testing.T) {
	s := mustSchedule(t, resilience.ScheduleConfig{Base: time.Second, MaxDelay: time.Hour})
	for range 20 {
		s.Next()
	}
	s.Reset()
	if got := s.Next(); got != time.Second {
		t.Errorf("first Next after Reset = %v, want %v", got, time.Second)
	}
	if got := s.Next(); got != 2*time.Second {
		t.Errorf("second Next after Reset = %v, want %v", got, 2*time.Second)
	}
}

func TestScheduleDelayMatchesNextAndIgnoresItsState(t *testing.T) {
	tests := []struct {
		name string
		cfg  resilience.ScheduleConfig
	}{
		{"doubling", resilience.ScheduleConfig{Base: time.Millisecond, MaxDelay: time.Minute}},
		{"factor 3 uncapped", resilience.ScheduleConfig{Base: 7 * time.Microsecond, Factor: 3}},
		{"factor 1.5", resilience.ScheduleConfig{Base: time.Second, Factor: 1.5, MaxDelay: time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSchedule(t, tt.cfg)
			for n := 1; n <= 100; n++ {
				next := s.Next()
				if got := s.Delay(n, 0); got != next {
					t.Fatalf("Delay(%d) = %v, but Next #%d = %v", n, got, n, next)
				}
			}
			if got := s.Delay(1, time.Hour); got != tt.cfg.Base {
				t.Errorf("Delay(1) after 100 Next calls = %v, want Base %v", got, tt.cfg.Base)
			}
			if got := s.Delay(-3, 0); got != tt.cfg.Base {
				t.Errorf("Delay(-3) = %v, want Base %v (retry below 1 counts as 1)", got, tt.cfg.Base)
			}
		})
	}
}

func TestScheduleJitterStrategyBounds(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name  string
		cfg   resilience.ScheduleConfig
		draw  func(int64) int64
		delay time.Duration // result of the first Next
	}{
		{"additive low", resilience.ScheduleConfig{Base: 100 * ms, Jitter: 10 * ms}, drawMin, 100 * ms},
		{"additive high", resilience.ScheduleConfig{Base: 100 * ms, Jitter: 10 * ms}, drawMax, 110*ms - 1},
		{"additive clamped at the cap", resilience.ScheduleConfig{Base: time.Second, MaxDelay: time.Second, Jitter: 10 * ms}, drawMax, time.Second},
		{"additive saturates without a cap", resilience.ScheduleConfig{Base: math.MaxInt64 - 5, Factor: 1, Jitter: time.Second}, drawMax, math.MaxInt64},
		{"full low", resilience.ScheduleConfig{Base: 100 * ms, Jitter: time.Hour, Strategy: resilience.JitterFull}, drawMin, 0},
		{"full high", resilience.ScheduleConfig{Base: 100 * ms, Jitter: time.Hour, Strategy: resilience.JitterFull}, drawMax, 100*ms - 1},
		{"full of zero", resilience.ScheduleConfig{Strategy: resilience.JitterFull}, drawMax, 0},
		{"equal low", resilience.ScheduleConfig{Base: 100 * ms, Strategy: resilience.JitterEqual}, drawMin, 50 * ms},
		{"equal high", resilience.ScheduleConfig{Base: 100 * ms, Strategy: resilience.JitterEqual}, drawMax, 100*ms - 1},
		{"equal of one nanosecond", resilience.ScheduleConfig{Base: 1, Strategy: resilience.JitterEqual}, drawMax, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSchedule(t, resilience.ScheduleConfigWithRand(tt.cfg, tt.draw))
			if got := s.Next(); got != tt.delay {
				t.Errorf("Next = %v, want %v", got, tt.delay)
			}
			if got := s.Delay(1, 0); got != tt.delay {
				t.Errorf("Delay(1) = %v, want %v", got, tt.delay)
			}
		})
	}
}

func TestJitterStrategyString(t *testing.T) {
	tests := []struct {
		s    resilience.JitterStrategy
		want string
	}{
		{resilience.JitterAdditive, "additive"},
		{resilience.JitterFull, "full"},
		{resilience.JitterEqual, "equal"},
		{7, "JitterStrategy(7)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("JitterStrategy(%d).String() = %q, want %q", int(tt.s), got, tt.want)
		}
	}
}

// genScheduleConfig draws a valid configuration, leaning towards the
// extremes: tiny and huge bases, factors a hair above 1 and up to the largest
// float64, no cap and caps at the base.
func genScheduleConfig(t *rapid.T) resilience.ScheduleConfig {
	base := rapid.OneOf(
		rapid.Int64Range(0, 1000),
		rapid.Int64Range(0, int64(time.Hour)),
		rapid.Int64Range(0, math.MaxInt64),
	).Draw(t, "base")
	factor := rapid.OneOf(
		rapid.Just(0.0),
		rapid.Just(1.0),
		rapid.Float64Range(1, 1+1e-12),
		rapid.Float64Range(1, 10),
		rapid.Float64Range(1, 1e300),
		rapid.Just(math.MaxFloat64),
	).Draw(t, "factor")
	maxDelay := rapid.OneOf(
		rapid.Just(int64(0)),
		rapid.Just(base),
		rapid.Int64Range(max(base, 1), math.MaxInt64),
	).Draw(t, "maxDelay")
	jitter := rapid.OneOf(
		rapid.Just(int64(0)),
		rapid.Int64Range(0, int64(time.Minute)),
		rapid.Int64Range(0, math.MaxInt64),
	).Draw(t, "jitter")
	strategy := rapid.SampledFrom([]resilience.JitterStrategy{
		resilience.JitterAdditive, resilience.JitterFull, resilience.JitterEqual,
	}).Draw(t, "strategy")
	return resilience.ScheduleConfig{
		Base:     time.Duration(base),
		Factor:   factor,
		Jitter:   time.Duration(jitter),
		MaxDelay: time.Duration(maxDelay),
		Strategy: strategy,
	}
}

// genDraw picks the random source: the real one, or one pinned to either end.
func genDraw(t *rapid.T) func(int64) int64 {
	return rapid.SampledFrom([]func(int64) int64{nil, drawMin, drawMax}).Draw(t, "draw")
}

func scheduleCap(cfg resilience.ScheduleConfig) time.Duration {
	if cfg.MaxDelay == 0 {
		return math.MaxInt64
	}
	return cfg.MaxDelay
}

func TestScheduleNextStaysInBoundsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genScheduleConfig(t)
		steps := rapid.IntRange(0, 10000).Draw(t, "steps")
		jittered := mustSchedule(t, resilience.ScheduleConfigWithRand(cfg, genDraw(t)))
		// The same progression without jitter exposes the raw delays.
		rawCfg := cfg
		rawCfg.Jitter, rawCfg.Strategy = 0, resilience.JitterAdditive
		raw := mustSchedule(t, rawCfg)
		limit := scheduleCap(cfg)
		prev := time.Duration(0)
		for i := range steps {
			d := jittered.Next()
			if d < 0 || d > limit {
				t.Fatalf("Next #%d = %v, outside [0, %v]", i+1, d, limit)
			}
			r := raw.Next()
			if r < prev {
				t.Fatalf("raw Next #%d = %v, below the previous %v", i+1, r, prev)
			}
			if r < cfg.Base || r > limit {
				t.Fatalf("raw Next #%d = %v, outside [Base %v, %v]", i+1, r, cfg.Base, limit)
			}
			prev = r
		}
	})
}

func TestScheduleDelayStaysInBoundsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genScheduleConfig(t)
		s := mustSchedule(t, resilience.ScheduleConfigWithRand(cfg, genDraw(t)))
		retry := rapid.OneOf(rapid.IntRange(-10, 200), rapid.Int()).Draw(t, "retry")
		prev := time.Duration(rapid.Int64().Draw(t, "prev"))
		limit := scheduleCap(cfg)
		if d := s.Delay(retry, prev); d < 0 || d > limit {
			t.Fatalf("Delay(%d, %v) = %v, outside [0, %v]", retry, prev, d, limit)
		}
	})
}

func TestAddJitterProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := time.Duration(rapid.Int64().Draw(t, "d"))
		jitter := time.Duration(rapid.OneOf(rapid.Int64(), rapid.Int64Range(-10, 10)).Draw(t, "jitter"))
		draw := genDraw(t)
		var got time.Duration
		if draw == nil {
			got = resilience.AddJitter(d, jitter)
		} else {
			got = resilience.AddJitterWithRand(d, jitter, draw)
		}
		floor := max(d, 0)
		switch {
		case got < floor:
			t.Fatalf("AddJitter(%v, %v) = %v, below %v", d, jitter, got, floor)
		case jitter <= 0 && got != floor:
			t.Fatalf("AddJitter(%v, %v) = %v, want %v unchanged", d, jitter, got, floor)
		case jitter > 0 && floor <= math.MaxInt64-jitter && got >= floor+jitter:
			t.Fatalf("AddJitter(%v, %v) = %v, not below %v", d, jitter, got, floor+jitter)
		}
	})
}

func TestAddJitterSaturates(t *testing.T) {
	got := resilience.AddJitterWithRand(math.MaxInt64-5, time.Second, drawMax)
	if got != math.MaxInt64 {
		t.Errorf("AddJitter near the top = %v, want the largest Duration", got)
	}
}

func TestScheduleIsSafeForConcurrentUse(t *testing.T) {
	const goroutines, calls = 20, 50
	s := mustSchedule(t, resilience.ScheduleConfig{Base: time.Millisecond, MaxDelay: time.Second})
	valid := map[time.Duration]bool{}
	for d := time.Millisecond; d < time.Second; d *= 2 {
		valid[d] = true
	}
	valid[time.Second] = true

	var wg sync.WaitGroup
	results := make(chan time.Duration, goroutines*calls)
	for range goroutines {
		wg.Go(func() {
			for n := range calls {
				results <- s.Next()
				_ = s.Delay(n+1, 0)
			}
		})
	}
	wg.Wait()
	close(results)
	for d := range results {
		if !valid[d] {
			t.Errorf("concurrent Next returned %v, not a step of the progression", d)
		}
	}
	// 1000 shared steps are far past the cap.
	if got := s.Next(); got != time.Second {
		t.Errorf("Next after %d concurrent calls = %v, want the cap", goroutines*calls, got)
	}
}

func BenchmarkScheduleNext(b *testing.B) {
	s := mustSchedule(b, resilience.ScheduleConfig{Base: time.Millisecond, Jitter: time.Millisecond, MaxDelay: time.Hour})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%32 == 0 {
			s.Reset()
		}
		s.Next()
	}
}

func BenchmarkScheduleDelay(b *testing.B) {
	s := mustSchedule(b, resilience.ScheduleConfig{Base: time.Millisecond, Strategy: resilience.JitterFull, MaxDelay: time.Hour})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Delay(i%32+1, 0)
	}
}
