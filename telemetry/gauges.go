package telemetry

// The gauges: what a Telemetry reads at each collection from every
// transport and retrier it was wired into (budget tokens, breaker states
// and their durations, the adaptive hedge delay and cap, the concurrency
// limit and what is in flight under it), each read from one Stats snapshot.

import (
	"context"
	"math"
	"sync"
	"time"
	"weak"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// statsSource is what the gauges read: *transport.Transport and
// *resilience.Retrier are ones.
type statsSource interface {
	// Stats returns a snapshot of the source's budget, breakers and
	// adaptive hedging state.
	Stats() resilience.Stats
}

// gauges holds the sources a Telemetry reports at each collection. It
// refers to them weakly: a transport or retrier the program no longer uses
// drops out of the gauges once it is garbage collected, so nothing needs
// unregistering.
type gauges struct {
	once sync.Once // registers the callback, at the first source

	mu      sync.Mutex
	sources []gaugeSource // guarded by mu
}

// gaugeSource is one transport or retrier.
type gaugeSource struct {
	name string             // gotry.transport; "" for none
	op   bool               // its keys are operations (a Retrier), not hosts
	get  func() statsSource // the source, or nil once it has been collected
}

// weakly returns a func that gives p while it lives, without keeping it
// alive.
func weakly[T any, P interface {
	*T
	statsSource
}](p P) func() statsSource {
	w := weak.Make((*T)(p))
	return func() statsSource {
		if v := P(w.Value()); v != nil {
			return v
		}
		return nil
	}
}

// observe adds a source to t's gauges, registering the gauges' one
// callback with the meter at the first. An error registering it goes to
// otel.Handle, as an instrument's does.
func (t *Telemetry) observe(s gaugeSource) {
	g := &t.gauges
	g.mu.Lock()
	g.sources = append(g.sources, s)
	g.mu.Unlock()
	g.once.Do(func() {
		in := &t.inst
		_, err := in.meter.RegisterCallback(t.collect,
			in.budgetTokens, in.breakerState, in.breakerFor, in.hedgeDelay, in.hedgeMaxExtraLoad,
			in.limitCurrent, in.limitInFlight)
		if err != nil {
			otel.Handle(err)
		}
	})
}

// instruments reports whether src is among t's sources.
func (t *Telemetry) instruments(src statsSource) bool {
	_, ok := t.wiredAs(src)
	return ok
}

// wiredAs returns the name src was wired with (Name; "" for none) and
// whether it is among t's sources at all.
func (t *Telemetry) wiredAs(src statsSource) (string, bool) {
	g := &t.gauges
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sources {
		if s.get() == src {
			return s.name, true
		}
	}
	return "", false
}

var (
	_ statsSource = (*transport.Transport)(nil)
	_ statsSource = (*resilience.Retrier)(nil)
	_ statsSource = (*resilience.Engine)(nil)
)

// collect reports every live source, and forgets those that are gone.
func (t *Telemetry) collect(_ context.Context, o metric.Observer) error {
	g := &t.gauges
	g.mu.Lock()
	sources := append([]gaugeSource(nil), g.sources...)
	g.mu.Unlock()
	gone := false
	for _, s := range sources {
		src := s.get()
		if src == nil {
			gone = true
			continue
		}
		t.report(o, s, src.Stats())
	}
	if gone {
		g.mu.Lock()
		live := g.sources[:0]
		for _, s := range g.sources {
			if s.get() != nil {
				live = append(live, s)
			}
		}
		clear(g.sources[len(live):])
		g.sources = live
		g.mu.Unlock()
	}
	return nil
}

// report writes one source's snapshot: its budget (gotry.budget.tokens,
// nothing for a disabled budget), its breakers (gotry.breaker.state and
// gotry.breaker.state.duration) and, with adaptive hedging, each host's
// hedge delay (gotry.hedge.delay) and the cap (gotry.hedge.max_extra_load),
// labelled gotry.transport=name when it has a name. A transport's breakers
// and delays are grouped by server.address (after the host guard): when
// several ports of one host are tracked, the most severe breaker state
// (open, then half-open; the longest held on a tie) and the longest delay
// are reported. With a concurrency limit (Stats.Limited), each host's
// limit (gotry.limit.current) and attempts in flight under it
// (gotry.limit.in_flight), summed over the ports of one address: each port
// has a limit of its own, and together they bound what the address gets. A
// retrier's are labelled gotry.operation, its key.
func (t *Telemetry) report(o metric.Observer, s gaugeSource, st resilience.Stats) {
	in := &t.inst
	if tok := st.BudgetTokens; !math.IsInf(tok, 0) && !math.IsNaN(tok) {
		var buf [1]attribute.KeyValue
		o.ObserveFloat64(in.budgetTokens, tok, metric.WithAttributes(named(buf[:0], s.name)...))
	}
	type held struct {
		s  resilience.BreakerState
		in time.Duration
	}
	worst := map[string]held{}
	longest := map[string]time.Duration{}
	type limited struct{ limit, inFlight int }
	limits := map[string]limited{}
	for _, h := range st.Hosts {
		who := h.Key
		if !s.op {
			host, _ := splitKey(h.Key)
			who, _ = t.hosts.get(host)
		}
		if st.Breakers {
			if prev, ok := worst[who]; !ok || severity(h.Breaker) > severity(prev.s) || (h.Breaker == prev.s && h.BreakerFor > prev.in) {
				worst[who] = held{h.Breaker, h.BreakerFor}
			}
		}
		if st.Limited {
			l := limits[who]
			l.limit += h.Limit
			l.inFlight += h.InFlight
			limits[who] = l
		}
		if st.MaxExtraLoad > 0 && h.HedgeDelay > 0 {
			if prev, ok := longest[who]; !ok || h.HedgeDelay > prev {
				longest[who] = h.HedgeDelay
			}
		}
	}
	label := func(who string) attribute.KeyValue {
		if s.op {
			return KeyOperation.String(who)
		}
		return keyServerAddress.String(who)
	}
	for who, w := range worst {
		kv := label(who)
		observeBreaker(o, in.breakerState, kv, s.name, w.s)
		var buf [3]attribute.KeyValue
		attrs := append(buf[:0], kv, KeyBreakerState.String(breakerState(w.s)))
		o.ObserveFloat64(in.breakerFor, w.in.Seconds(), metric.WithAttributes(named(attrs, s.name)...))
	}
	for who, l := range limits {
		var buf [2]attribute.KeyValue
		opt := metric.WithAttributes(named(append(buf[:0], label(who)), s.name)...)
		o.ObserveInt64(in.limitCurrent, int64(l.limit), opt)
		o.ObserveInt64(in.limitInFlight, int64(l.inFlight), opt)
	}
	if st.MaxExtraLoad > 0 {
		var buf [2]attribute.KeyValue
		o.ObserveFloat64(in.hedgeMaxExtraLoad, st.MaxExtraLoad, metric.WithAttributes(named(buf[:0], s.name)...))
		for who, d := range longest {
			attrs := append(buf[:0], label(who))
			o.ObserveFloat64(in.hedgeDelay, d.Seconds(), metric.WithAttributes(named(attrs, s.name)...))
		}
	}
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
