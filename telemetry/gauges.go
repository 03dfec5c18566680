package telemetry

// The gauges: what ObserveTransport and ObserveRetrier read at each
// collection (budget tokens, breaker states and their durations, the
// adaptive hedge delay and cap).

import (
	"context"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/MrVSiK/gotry/resilience"
)

// TransportState is what ObserveTransport reads at each collection:
// *transport.Transport has both methods.
type TransportState interface {
	// BudgetTokens returns the retry budget's tokens (+Inf when disabled).
	BudgetTokens() float64
	// EachBreaker calls fn for each tracked host's breaker.
	EachBreaker(fn func(host string, s resilience.BreakerState))
}

// BreakerTimes is what ObserveTransport reads for
// gotry.breaker.state.duration when the TransportState has it:
// *transport.Transport does.
type BreakerTimes interface {
	// EachBreakerFor calls fn for each tracked host's breaker with its
	// state and how long it has been in it.
	EachBreakerFor(fn func(host string, s resilience.BreakerState, in time.Duration))
}

// HedgeState is what ObserveTransport reads of adaptive hedging when the
// TransportState has it too: *transport.Transport does.
type HedgeState interface {
	// EachHedgeDelay calls fn for each host adaptive hedging tracks.
	EachHedgeDelay(fn func(host string, delay time.Duration, warm bool))
	// MaxExtraLoad returns the cap on extra load, 0 without adaptive hedging.
	MaxExtraLoad() float64
}

// ObserveTransport reports tr's budget (gotry.budget.tokens), breakers
// (gotry.breaker.state, and gotry.breaker.state.duration when tr is a
// BreakerTimes) and, when tr is a HedgeState with adaptive hedging
// on, each host's hedge delay (gotry.hedge.delay, the longest when several
// ports of one address are tracked) and the cap (gotry.hedge.max_extra_load)
// at each metric collection, labelled
// gotry.transport=name (omitted when name is ""). Nothing is reported for a
// disabled budget. Breakers are grouped by server.address (after the host
// guard); when several ports of one host have breakers, the most severe
// state (open, then half-open) is reported. Call Unregister on the result
// when tr is retired. The error is the meter provider's.
func (t *Telemetry) ObserveTransport(name string, tr TransportState) (metric.Registration, error) {
	in := &t.inst
	return in.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if tok := tr.BudgetTokens(); !math.IsInf(tok, 0) && !math.IsNaN(tok) {
			var buf [1]attribute.KeyValue
			o.ObserveFloat64(in.budgetTokens, tok, metric.WithAttributes(named(buf[:0], name)...))
		}
		type held struct {
			s  resilience.BreakerState
			in time.Duration
		}
		worst := map[string]held{}
		add := func(key string, s resilience.BreakerState, in time.Duration) {
			host, _ := splitKey(key)
			h, _ := t.hosts.get(host)
			if prev, ok := worst[h]; !ok || severity(s) > severity(prev.s) || (s == prev.s && in > prev.in) {
				worst[h] = held{s, in}
			}
		}
		fs, timed := tr.(BreakerTimes)
		if timed {
			fs.EachBreakerFor(add)
		} else {
			tr.EachBreaker(func(key string, s resilience.BreakerState) { add(key, s, 0) })
		}
		for h, w := range worst {
			who := KeyServerAddress.String(h)
			observeBreaker(o, in.breakerState, who, name, w.s)
			if timed {
				var buf [3]attribute.KeyValue
				kv := append(buf[:0], who, KeyBreakerState.String(breakerState(w.s)))
				o.ObserveFloat64(in.breakerFor, w.in.Seconds(), metric.WithAttributes(named(kv, name)...))
			}
		}
		if hs, ok := tr.(HedgeState); ok {
			t.observeHedging(o, name, hs)
		}
		return nil
	}, in.budgetTokens, in.breakerState, in.breakerFor, in.hedgeDelay, in.hedgeMaxExtraLoad)
}

// observeHedging writes hs's hedge delay per server.address and its cap;
// nothing without adaptive hedging.
func (t *Telemetry) observeHedging(o metric.Observer, name string, hs HedgeState) {
	in := &t.inst
	capLoad := hs.MaxExtraLoad()
	if capLoad <= 0 {
		return
	}
	var buf [2]attribute.KeyValue
	o.ObserveFloat64(in.hedgeMaxExtraLoad, capLoad, metric.WithAttributes(named(buf[:0], name)...))
	longest := map[string]time.Duration{}
	hs.EachHedgeDelay(func(key string, d time.Duration, _ bool) {
		host, _ := splitKey(key)
		h, _ := t.hosts.get(host)
		if prev, ok := longest[h]; !ok || d > prev {
			longest[h] = d
		}
	})
	for h, d := range longest {
		kv := append(buf[:0], KeyServerAddress.String(h))
		o.ObserveFloat64(in.hedgeDelay, d.Seconds(), metric.WithAttributes(named(kv, name)...))
	}
}

// RetrierState is what ObserveRetrier reads: *resilience.Retrier's engine.
type RetrierState interface{ Engine() *resilience.Engine }

// ObserveRetrier is ObserveTransport for a generic resilience.Retrier: its
// breakers (gotry.breaker.state and gotry.breaker.state.duration) are
// labelled gotry.operation (their key) instead of server.address.
func (t *Telemetry) ObserveRetrier(name string, r RetrierState) (metric.Registration, error) {
	in := &t.inst
	return in.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		e := r.Engine()
		if tok := e.BudgetTokens(); !math.IsInf(tok, 0) && !math.IsNaN(tok) {
			var buf [1]attribute.KeyValue
			o.ObserveFloat64(in.budgetTokens, tok, metric.WithAttributes(named(buf[:0], name)...))
		}
		e.EachBreakerFor(func(key string, s resilience.BreakerState, held time.Duration) {
			who := KeyOperation.String(key)
			observeBreaker(o, in.breakerState, who, name, s)
			var buf [3]attribute.KeyValue
			kv := append(buf[:0], who, KeyBreakerState.String(breakerState(s)))
			o.ObserveFloat64(in.breakerFor, held.Seconds(), metric.WithAttributes(named(kv, name)...))
		})
		return nil
	}, in.budgetTokens, in.breakerState, in.breakerFor)
}

// named appends gotry.transport unless name is empty.
func named(kv []attribute.KeyValue, name string) []attribute.KeyValue {
	if name == "" {
		return kv
	}
	return append(kv, KeyTransport.String(name))
}

// observeBreaker writes one series per state: 1 for s, 0 for the others.
func observeBreaker(o metric.Observer, g metric.Int64ObservableGauge, who attribute.KeyValue, name string, s resilience.BreakerState) {
	for _, st := range [...]resilience.BreakerState{resilience.BreakerClosed, resilience.BreakerOpen, resilience.BreakerHalfOpen} {
		var v int64
		if st == s {
			v = 1
		}
		var buf [3]attribute.KeyValue
		kv := append(buf[:0], who, KeyBreakerState.String(breakerState(st)))
		o.ObserveInt64(g, v, metric.WithAttributes(named(kv, name)...))
	}
}

// severity orders breaker states for grouping: open > half-open > closed.
func severity(s resilience.BreakerState) int {
	switch s {
	case resilience.BreakerOpen:
		return 2
	case resilience.BreakerHalfOpen:
		return 1
	}
	return 0
}
