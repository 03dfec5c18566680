package resilience

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Settings.Validate names the field that makes no sense, and accepts the
// defaults and every sensible change to them.
func TestSettingsValidateNamesTheField(t *testing.T) {
	if err := DefaultSettings().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	ah := AdaptiveHedging{MaxExtraLoad: 0.05}
	for _, c := range []struct {
		field string // "" for valid settings
		set   func(*Settings)
	}{
		{"", func(s *Settings) { s.AdaptiveHedging, s.MaxHedges = &ah, 1 }},
		{"", func(s *Settings) { s.BudgetRatio, s.BudgetReserve = 0, 0 }},
		{"", func(s *Settings) { s.Breaker, s.ConcurrencyLimit = &BreakerConfig{}, &ConcurrencyLimit{} }},
		{"", func(s *Settings) { s.MaxRetryAfter = 0 }},
		{"MaxAttempts", func(s *Settings) { s.MaxAttempts = 0 }},
		{"Backoff", func(s *Settings) { s.Backoff = nil }},
		{"Backoff", func(s *Settings) { s.Backoff = BackoffFunc(nil) }},
		{"PerAttemptTimeout", func(s *Settings) { s.PerAttemptTimeout = -1 }},
		{"HedgeDelay", func(s *Settings) { s.HedgeDelay = -1 }},
		{"MaxHedges", func(s *Settings) { s.MaxHedges = -1 }},
		{"MaxHedges", func(s *Settings) { s.AdaptiveHedging, s.MaxHedges = &ah, 0 }},
		{"HedgeDelay", func(s *Settings) { s.AdaptiveHedging, s.MaxHedges, s.HedgeDelay = &ah, 1, time.Millisecond }},
		{"AdaptiveHedging.MaxExtraLoad", func(s *Settings) { s.AdaptiveHedging, s.MaxHedges = &AdaptiveHedging{MaxExtraLoad: 1}, 1 }},
		{"budget ratio", func(s *Settings) { s.BudgetRatio = math.Inf(1) }},
		{"budget reserve", func(s *Settings) { s.BudgetReserve = 1001 }},
		{"BreakerConfig.OpenDuration", func(s *Settings) { s.Breaker = &BreakerConfig{OpenDuration: -time.Second} }},
		{"ConcurrencyLimit.InitialLimit", func(s *Settings) { s.ConcurrencyLimit = &ConcurrencyLimit{InitialLimit: 5, MinLimit: 10} }},
		{"MaxKeys", func(s *Settings) { s.MaxKeys = 0 }},
		{"MaxRetryAfter", func(s *Settings) { s.MaxRetryAfter = -1 }},
		{"Clock", func(s *Settings) { s.Clock = nil }},
	} {
		s := DefaultSettings()
		c.set(&s)
		err := s.Validate()
		switch {
		case c.field == "" && err != nil:
			t.Errorf("valid settings %+v: %v", s, err)
		case c.field != "" && (err == nil || !strings.Contains(err.Error(), c.field)):
			t.Errorf("settings with a bad %s: error %v, want one naming it", c.field, err)
		}
	}
}

// The engine rejects a configuration struct with the same reason as the
// options do: there is one validation per struct.
func TestEngineAndSettingsGiveOneReason(t *testing.T) {
	bad := []struct {
		cfg EngineConfig
		s   func(*Settings)
	}{
		{EngineConfig{Breaker: &BreakerConfig{HalfOpenProbes: -1}}, func(s *Settings) { s.Breaker = &BreakerConfig{HalfOpenProbes: -1} }},
		{EngineConfig{Limit: &ConcurrencyLimit{MaxLimit: -2}}, func(s *Settings) { s.ConcurrencyLimit = &ConcurrencyLimit{MaxLimit: -2} }},
		{EngineConfig{Adaptive: &AdaptiveHedging{}}, func(s *Settings) { s.AdaptiveHedging, s.MaxHedges = &AdaptiveHedging{}, 1 }},
		{EngineConfig{BudgetRatio: -1}, func(s *Settings) { s.BudgetRatio = -1 }},
	}
	for _, b := range bad {
		msg := func() (msg string) {
			defer func() { msg, _ = recover().(string) }()
			NewEngine(b.cfg)
			return ""
		}()
		s := DefaultSettings()
		b.s(&s)
		err := s.Validate()
		if err == nil || msg != err.Error() {
			t.Errorf("NewEngine panicked with %q, Settings.Validate said %v", msg, err)
		}
	}
}

// Settings turns into the engine's configuration and a call's policy
// whole: nothing an option set is dropped on the way.
func TestSettingsBuildTheEngineAndPolicy(t *testing.T) {
	s := DefaultSettings()
	s.AdaptiveHedging, s.MaxHedges = &AdaptiveHedging{MaxExtraLoad: 0.05}, 2
	s.Breaker, s.ConcurrencyLimit, s.MaxKeys = &BreakerConfig{}, &ConcurrencyLimit{}, 7
	s.PerAttemptTimeout, s.MaxRetryAfter, s.BudgetReserve = time.Second, time.Minute, 4
	ec, p := s.EngineConfig(), s.Policy()
	if ec.Adaptive != s.AdaptiveHedging || ec.Breaker != s.Breaker || ec.Limit != s.ConcurrencyLimit || ec.MaxKeys != 7 ||
		ec.BudgetRatio != s.BudgetRatio || ec.BudgetReserve != 4 || ec.Clock != s.Clock {
		t.Errorf("EngineConfig %+v from %+v", ec, s)
	}
	if !p.Adaptive || p.MaxHedges != 2 || p.HedgeDelay != 0 || p.MaxAttempts != s.MaxAttempts || p.PerAttemptTimeout != time.Second ||
		p.MaxRetryAfter != time.Minute || p.Backoff != s.Backoff {
		t.Errorf("Policy %+v from %+v", p, s)
	}
	r := NewRetrier(WithAdaptiveHedging(*s.AdaptiveHedging, 2), WithMaxKeys(7))
	if r.policy != r.Settings().Policy() || !r.policy.adaptive(r.engine) {
		t.Errorf("the Retrier's policy %+v is not its settings'", r.policy)
	}
}
