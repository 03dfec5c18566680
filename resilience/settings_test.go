package resilience

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Settings.Validate names the field that makes no sense, and accepts the
// zero value, the defaults and every sensible change to them.
func TestSettingsValidateNamesTheField(t *testing.T) {
	if err := DefaultSettings().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if err := (Settings{}).Validate(); err != nil {
		t.Fatalf("the zero value: %v", err)
	}
	ah := AdaptiveHedging{MaxExtraLoad: 0.05}
	for _, c := range []struct {
		field string // "" for valid settings
		set   func(*Settings)
	}{
		{"", func(s *Settings) { s.AdaptiveHedging, s.MaxHedges = &ah, 1 }},
		{"", func(s *Settings) { s.AdaptiveHedging, s.MaxHedges = &AdaptiveHedging{}, 0 }},
		{"", func(s *Settings) { s.BudgetRatio, s.BudgetReserve = Off, Off }},
		{"", func(s *Settings) { s.BudgetRatio, s.BudgetReserve = 0, 0 }},
		{"", func(s *Settings) { s.Breaker, s.ConcurrencyLimit = &BreakerConfig{}, &ConcurrencyLimit{} }},
		{"", func(s *Settings) { s.MaxRetryAfter = Off }},
		{"", func(s *Settings) { s.MaxAttempts, s.Backoff, s.MaxKeys, s.Clock = 0, nil, 0, nil }},
		{"MaxAttempts", func(s *Settings) { s.MaxAttempts = -1 }},
		{"Backoff", func(s *Settings) { s.Backoff = BackoffFunc(nil) }},
		{"PerAttemptTimeout", func(s *Settings) { s.PerAttemptTimeout = -1 }},
		{"HedgeDelay", func(s *Settings) { s.HedgeDelay = -1 }},
		{"MaxHedges", func(s *Settings) { s.MaxHedges = -1 }},
		{"HedgeDelay", func(s *Settings) { s.AdaptiveHedging, s.MaxHedges, s.HedgeDelay = &ah, 1, time.Millisecond }},
		{"AdaptiveHedging.MaxExtraLoad", func(s *Settings) { s.AdaptiveHedging, s.MaxHedges = &AdaptiveHedging{MaxExtraLoad: 1}, 1 }},
		{"Settings.BudgetRatio", func(s *Settings) { s.BudgetRatio = math.Inf(1) }},
		{"Settings.BudgetRatio", func(s *Settings) { s.BudgetRatio = -0.5 }},
		{"Settings.BudgetReserve", func(s *Settings) { s.BudgetReserve = 1001 }},
		{"Settings.BudgetReserve", func(s *Settings) { s.BudgetReserve = -2 }},
		{"BreakerConfig.OpenDuration", func(s *Settings) { s.Breaker = &BreakerConfig{OpenDuration: -time.Second} }},
		{"ConcurrencyLimit.InitialLimit", func(s *Settings) { s.ConcurrencyLimit = &ConcurrencyLimit{InitialLimit: 5, MinLimit: 10} }},
		{"MaxKeys", func(s *Settings) { s.MaxKeys = -1 }},
		{"MaxRetryAfter", func(s *Settings) { s.MaxRetryAfter = -2 }},
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

// Every Validate speaks in one shape: the struct and field, then what is
// wrong, then the value.
func TestValidateErrorsHaveOneShape(t *testing.T) {
	for _, err := range []error{
		Settings{MaxAttempts: -1}.Validate(),
		Settings{BudgetRatio: -3}.Validate(),
		BreakerConfig{HalfOpenProbes: -1}.Validate(),
		AdaptiveHedging{MinDelay: -1}.Validate(),
		ConcurrencyLimit{MinLimit: -1}.Validate(),
		Policy{MaxHedges: -2}.Validate(),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "resilience: ") || !strings.Contains(err.Error(), ".") || !strings.Contains(err.Error(), " must ") {
			t.Errorf("error %v: want resilience: Struct.Field must ..., got ...", err)
		}
	}
}

// The engine rejects a configuration struct with the same reason as the
// options do: there is one validation per struct.
func TestEngineAndSettingsGiveOneReason(t *testing.T) {
	for _, s := range []Settings{
		{Breaker: &BreakerConfig{HalfOpenProbes: -1}},
		{ConcurrencyLimit: &ConcurrencyLimit{MaxLimit: -2}},
		{AdaptiveHedging: &AdaptiveHedging{MaxExtraLoad: 2}},
		{BudgetRatio: -2},
	} {
		msg := func() (msg string) {
			defer func() { msg, _ = recover().(string) }()
			NewEngine(s)
			return ""
		}()
		err := s.Validate()
		if err == nil || msg != err.Error() {
			t.Errorf("NewEngine panicked with %q, Settings.Validate said %v", msg, err)
		}
	}
}

// Each configuration struct's zero value is its defaults, and what the
// engine (and so a Retrier and a transport) reports back is the values in
// effect.
func TestZeroSettingsAreTheDefaults(t *testing.T) {
	e := NewEngine(Settings{})
	got, want := e.Settings(), DefaultSettings()
	got.Backoff, want.Backoff = nil, nil // a fresh jitter source each time
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NewEngine(Settings{}).Settings() = %+v, want the defaults %+v", got, want)
	}
	if want.MaxAttempts != DefaultMaxAttempts || want.BudgetRatio != DefaultBudgetRatio || want.BudgetReserve != DefaultBudgetReserve ||
		want.MaxKeys != DefaultMaxKeys || want.MaxRetryAfter != DefaultMaxRetryAfter || want.Clock == nil {
		t.Errorf("DefaultSettings() = %+v", want)
	}
	s := NewEngine(Settings{AdaptiveHedging: &AdaptiveHedging{}, Breaker: &BreakerConfig{}, ConcurrencyLimit: &ConcurrencyLimit{}}).Settings()
	if *s.AdaptiveHedging != (AdaptiveHedging{MaxExtraLoad: DefaultMaxExtraLoad, StartingCredit: 20}) || s.MaxHedges != 1 {
		t.Errorf("adaptive hedging in effect: %+v, MaxHedges %d", *s.AdaptiveHedging, s.MaxHedges)
	}
	if *s.Breaker != (BreakerConfig{DefaultFailureThreshold, DefaultOpenDuration, DefaultHalfOpenProbes}) {
		t.Errorf("breaker in effect: %+v", *s.Breaker)
	}
	if l := *s.ConcurrencyLimit; l.InitialLimit != DefaultInitialLimit || l.MinLimit != DefaultMinLimit || l.MaxLimit != DefaultMaxLimit {
		t.Errorf("limit in effect: %+v", l)
	}
	// A Retrier built with the zero structs reports them in effect too,
	// and the adaptive hedging's zero value is accepted.
	r := NewRetrier(WithAdaptiveHedging(AdaptiveHedging{}, 1), WithBreaker(BreakerConfig{}), WithConcurrencyLimit(ConcurrencyLimit{}))
	rs := r.Settings()
	if rs.AdaptiveHedging.MaxExtraLoad != DefaultMaxExtraLoad || rs.Breaker.FailureThreshold != DefaultFailureThreshold ||
		rs.ConcurrencyLimit.InitialLimit != DefaultInitialLimit {
		t.Errorf("the Retrier's settings in effect: %+v", rs)
	}
	// Off stays Off: it is the value in effect.
	if s := NewRetrier(WithRetryBudget(0, 0), WithMaxRetryAfter(0)).Settings(); s.BudgetRatio != Off || s.BudgetReserve != Off || s.MaxRetryAfter != Off {
		t.Errorf("WithRetryBudget(0, 0) and WithMaxRetryAfter(0): %+v", s)
	}
}

// The engine's policy is its settings', and a call's zero Policy fields
// take it.
func TestPolicyZeroFieldsTakeTheEngines(t *testing.T) {
	s := Settings{AdaptiveHedging: &AdaptiveHedging{}, MaxHedges: 2, MaxAttempts: 4, PerAttemptTimeout: time.Second, MaxRetryAfter: time.Minute}
	e := NewEngine(s)
	p := e.Policy()
	if p.MaxHedges != 2 || p.HedgeDelay != 0 || p.MaxAttempts != 4 || p.PerAttemptTimeout != time.Second ||
		p.MaxRetryAfter != time.Minute || p.Backoff == nil || !p.adaptive(e) {
		t.Errorf("Policy %+v from %+v", p, s)
	}
	var q Policy
	e.fill(&q)
	if q != p {
		t.Errorf("a zero Policy filled: %+v, want the engine's %+v", q, p)
	}
	q = Policy{MaxHedges: Off, MaxAttempts: 1, HedgeDelay: time.Millisecond}
	e.fill(&q)
	if q.MaxHedges != Off || q.MaxAttempts != 1 || q.HedgeDelay != time.Millisecond || q.hedging(e) {
		t.Errorf("a Policy's own fields were overridden: %+v", q)
	}
}
