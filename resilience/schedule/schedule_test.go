package schedule_test

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/MrVSiK/gotry/resilience/schedule"
)

// drawMin and drawMax pin a schedule's random draws to the ends of [0, n),
// so the jitter lands on either end of its closed range.
func drawMin(int64) int64   { return 0 }
func drawMax(n int64) int64 { return n - 1 }

// fataler is what mustSchedule needs of a *testing.T, *testing.B or *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustSchedule(t fataler, cfg schedule.Config) *schedule.Schedule {
	t.Helper()
	s, err := schedule.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return s
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		cfg    schedule.Config
		option string
	}{
		{"negative base", schedule.Config{Base: -1}, "Base"},
		{"NaN factor", schedule.Config{Factor: math.NaN()}, "Factor"},
		{"+Inf factor", schedule.Config{Factor: math.Inf(1)}, "Factor"},
		{"-Inf factor", schedule.Config{Factor: math.Inf(-1)}, "Factor"},
		{"factor below 1", schedule.Config{Factor: 0.5}, "Factor"},
		{"negative factor", schedule.Config{Factor: -2}, "Factor"},
		{"negative jitter", schedule.Config{Jitter: -time.Nanosecond}, "Jitter"},
		{"negative max delay", schedule.Config{MaxDelay: -time.Second}, "MaxDelay"},
		{"max delay below base", schedule.Config{Base: time.Second, MaxDelay: time.Millisecond}, "MaxDelay"},
		{"unknown strategy", schedule.Config{Strategy: schedule.JitterEqual + 1}, "Strategy"},
		{"negative strategy", schedule.Config{Strategy: -1}, "Strategy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := schedule.New(tt.cfg)
			var ce *schedule.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("New(%+v) = %v, %v; want a *ConfigError", tt.cfg, s, err)
			}
			if ce.Option != tt.option || ce.Config != "schedule.Config" {
				t.Errorf("error names %s.%s, want schedule.Config.%s (%v)", ce.Config, ce.Option, tt.option, err)
			}
		})
	}
}

func TestScheduleNextProgression(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name string
		cfg  schedule.Config
		want []time.Duration
	}{
		{"doubling capped", schedule.Config{Base: 100 * ms, Factor: 2, MaxDelay: time.Second},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"zero factor means 2", schedule.Config{Base: ms},
			[]time.Duration{ms, 2 * ms, 4 * ms, 8 * ms}},
		{"factor 1 is constant", schedule.Config{Base: 3 * ms, Factor: 1},
			[]time.Duration{3 * ms, 3 * ms, 3 * ms}},
		{"fractional factor", schedule.Config{Base: 100 * ms, Factor: 1.5},
			[]time.Duration{100 * ms, 150 * ms, 225 * ms, 337500 * time.Microsecond}},
		{"huge factor jumps to the cap", schedule.Config{Base: ms, Factor: 1e300, MaxDelay: time.Minute},
			[]time.Duration{ms, time.Minute, time.Minute}},
		{"huge factor without a cap", schedule.Config{Base: ms, Factor: 1e300},
			[]time.Duration{ms, math.MaxInt64, math.MaxInt64}},
		{"base equal to cap", schedule.Config{Base: time.Second, MaxDelay: time.Second},
			[]time.Duration{time.Second, time.Second}},
		{"zero config", schedule.Config{},
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
	s := mustSchedule(t, schedule.Config{Base: time.Nanosecond, Factor: 2})
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
	s := mustSchedule(t, schedule.Config{Base: time.Nanosecond, Factor: 2})
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
	s := mustSchedule(t, schedule.Config{Base: time.Second, MaxDelay: time.Hour})
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
		cfg  schedule.Config
	}{
		{"doubling", schedule.Config{Base: time.Millisecond, MaxDelay: time.Minute}},
		{"factor 3 uncapped", schedule.Config{Base: 7 * time.Microsecond, Factor: 3}},
		{"factor 1.5", schedule.Config{Base: time.Second, Factor: 1.5, MaxDelay: time.Hour}},
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
		cfg   schedule.Config
		draw  func(int64) int64
		delay time.Duration // result of the first Next
	}{
		{"additive low", schedule.Config{Base: 100 * ms, Jitter: 10 * ms}, drawMin, 100 * ms},
		{"additive high", schedule.Config{Base: 100 * ms, Jitter: 10 * ms}, drawMax, 110 * ms},
		{"additive clamped at the cap", schedule.Config{Base: time.Second, MaxDelay: time.Second, Jitter: 10 * ms}, drawMax, time.Second},
		{"additive saturates without a cap", schedule.Config{Base: math.MaxInt64 - 5, Factor: 1, Jitter: time.Second}, drawMax, math.MaxInt64},
		{"full low", schedule.Config{Base: 100 * ms, Jitter: time.Hour, Strategy: schedule.JitterFull}, drawMin, 0},
		{"full high", schedule.Config{Base: 100 * ms, Jitter: time.Hour, Strategy: schedule.JitterFull}, drawMax, 100 * ms},
		{"full of zero", schedule.Config{Strategy: schedule.JitterFull}, drawMax, 0},
		{"equal low", schedule.Config{Base: 100 * ms, Strategy: schedule.JitterEqual}, drawMin, 50 * ms},
		{"equal high", schedule.Config{Base: 100 * ms, Strategy: schedule.JitterEqual}, drawMax, 100 * ms},
		{"equal of one nanosecond low", schedule.Config{Base: 1, Strategy: schedule.JitterEqual}, drawMin, 0},
		{"equal of one nanosecond high", schedule.Config{Base: 1, Strategy: schedule.JitterEqual}, drawMax, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSchedule(t, schedule.ConfigWithRand(tt.cfg, tt.draw))
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
		s    schedule.JitterStrategy
		want string
	}{
		{schedule.JitterAdditive, "additive"},
		{schedule.JitterFull, "full"},
		{schedule.JitterEqual, "equal"},
		{7, "JitterStrategy(7)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("JitterStrategy(%d).String() = %q, want %q", int(tt.s), got, tt.want)
		}
	}
}

// genConfig draws a valid configuration, leaning towards the
// extremes: tiny and huge bases, factors a hair above 1 and up to the largest
// float64, no cap and caps at the base.
func genConfig(t *rapid.T) schedule.Config {
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
	strategy := rapid.SampledFrom([]schedule.JitterStrategy{
		schedule.JitterAdditive, schedule.JitterFull, schedule.JitterEqual,
	}).Draw(t, "strategy")
	return schedule.Config{
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

func scheduleCap(cfg schedule.Config) time.Duration {
	if cfg.MaxDelay == 0 {
		return math.MaxInt64
	}
	return cfg.MaxDelay
}

func TestScheduleNextStaysInBoundsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		steps := rapid.IntRange(0, 10000).Draw(t, "steps")
		jittered := mustSchedule(t, schedule.ConfigWithRand(cfg, genDraw(t)))
		// The same progression without jitter exposes the raw delays.
		rawCfg := cfg
		rawCfg.Jitter, rawCfg.Strategy = 0, schedule.JitterAdditive
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
		cfg := genConfig(t)
		s := mustSchedule(t, schedule.ConfigWithRand(cfg, genDraw(t)))
		retry := rapid.OneOf(rapid.IntRange(-10, 200), rapid.Int()).Draw(t, "retry")
		prev := time.Duration(rapid.Int64().Draw(t, "prev"))
		limit := scheduleCap(cfg)
		if d := s.Delay(retry, prev); d < 0 || d > limit {
			t.Fatalf("Delay(%d, %v) = %v, outside [0, %v]", retry, prev, d, limit)
		}
	})
}

// The bounds themselves are pinned in internal/jitter; this checks that
// AddJitter draws from the real source within them.
func TestAddJitterStaysWithinItsClosedRange(t *testing.T) {
	for range 1000 {
		if d := schedule.AddJitter(time.Second, 10); d < time.Second || d > time.Second+10 {
			t.Fatalf("AddJitter(1s, 10ns) = %v, outside [1s, 1s+10ns]", d)
		}
	}
}

func TestScheduleIsSafeForConcurrentUse(t *testing.T) {
	const goroutines, calls = 20, 50
	s := mustSchedule(t, schedule.Config{Base: time.Millisecond, MaxDelay: time.Second})
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
	s := mustSchedule(b, schedule.Config{Base: time.Millisecond, Jitter: time.Millisecond, MaxDelay: time.Hour})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%32 == 0 {
			s.Reset()
		}
		s.Next()
	}
}

func BenchmarkScheduleDelay(b *testing.B) {
	s := mustSchedule(b, schedule.Config{Base: time.Millisecond, Strategy: schedule.JitterFull, MaxDelay: time.Hour})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Delay(i%32+1, 0)
	}
}
