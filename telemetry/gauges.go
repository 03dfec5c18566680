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

// collect reports every live source, and forgets those that are gone. The
// sources' snapshots are added up before anything is observed: an
// asynchronous gauge keeps one value per attribute set and collection (the
// last one observed), so two transports reporting the same set (two
// unnamed transports, or two of one name, calling one host) must be
// reported as one observation, or all but one would be lost.
func (t *Telemetry) collect(_ context.Context, o metric.Observer) error {
	g := &t.gauges
	g.mu.Lock()
	sources := append([]gaugeSource(nil), g.sources...)
	g.mu.Unlock()
	gone := false
	var set gaugeSet
	for _, s := range sources {
		src := s.get()
		if src == nil {
			gone = true
			continue
		}
		t.add(&set, s, src.Stats())
	}
	set.observe(o, &t.inst)
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

// gaugeKey is one attribute set of the per-host gauges: the transport's
// name, and the host (server.address) or, for a retrier, the operation.
type gaugeKey struct {
	name, who string
	op        bool // who is an operation (gotry.operation), not a host
}

// held is a breaker's state and how long it has held it.
type held struct {
	s  resilience.BreakerState
	in time.Duration
}

// limited is a concurrency limit and the attempts in flight under it.
type limited struct{ limit, inFlight int }

// gaugeSet is one collection's gauges, every source added in: the budget
// tokens the transports of one name hold together (each has a budget of
// its own), the most severe breaker state of a host (open, then half-open;
// the longest held on a tie) and its longest hedge delay, the sum of its
// limits and of what is in flight under them, and the largest hedging cap.
type gaugeSet struct {
	tokens  map[string]float64 // by gotry.transport
	maxLoad map[string]float64 // by gotry.transport
	worst   map[gaugeKey]held
	longest map[gaugeKey]time.Duration
	limits  map[gaugeKey]limited
}

// add adds one source's snapshot to set: its budget (nothing for a
// disabled budget), its breakers and, with adaptive hedging, each host's
// hedge delay and the cap, under gotry.transport=name when it has a name.
// A transport's breakers and delays are grouped by server.address (after
// the host guard), as several transports' are: when several ports of one
// host are tracked, the most severe breaker state and the longest delay
// count. With a concurrency limit (Stats.Limited), each host's limit and
// attempts in flight under it, summed over the ports of one address and
// over the transports: each port of each transport has a limit of its own,
// and together they bound what the address gets. A retrier's are keyed by
// gotry.operation, its key.
func (t *Telemetry) add(set *gaugeSet, s gaugeSource, st resilience.Stats) {
	if tok := st.BudgetTokens; !math.IsInf(tok, 0) && !math.IsNaN(tok) {
		if set.tokens == nil {
			set.tokens = map[string]float64{}
		}
		set.tokens[s.name] += tok
	}
	for _, h := range st.Hosts {
		who := h.Key
		if !s.op {
			host, _ := splitKey(h.Key)
			who, _ = t.hosts.get(host)
		}
		k := gaugeKey{name: s.name, who: who, op: s.op}
		if st.Breakers {
			if set.worst == nil {
				set.worst = map[gaugeKey]held{}
			}
			if prev, ok := set.worst[k]; !ok || severity(h.Breaker) > severity(prev.s) || (h.Breaker == prev.s && h.BreakerFor > prev.in) {
				set.worst[k] = held{h.Breaker, h.BreakerFor}
			}
		}
		if st.Limited {
			if set.limits == nil {
				set.limits = map[gaugeKey]limited{}
			}
			l := set.limits[k]
			l.limit += h.Limit
			l.inFlight += h.InFlight
			set.limits[k] = l
		}
		if st.MaxExtraLoad > 0 && h.HedgeDelay > 0 {
			if set.longest == nil {
				set.longest = map[gaugeKey]time.Duration{}
			}
			if prev, ok := set.longest[k]; !ok || h.HedgeDelay > prev {
				set.longest[k] = h.HedgeDelay
			}
		}
	}
	if st.MaxExtraLoad > 0 {
		if set.maxLoad == nil {
			set.maxLoad = map[string]float64{}
		}
		set.maxLoad[s.name] = max(set.maxLoad[s.name], st.MaxExtraLoad)
	}
}

// observe writes set's gauges, one observation per attribute set:
// gotry.budget.tokens, gotry.breaker.state and gotry.breaker.state.duration,
// gotry.limit.current and gotry.limit.in_flight, gotry.hedge.max_extra_load
// and gotry.hedge.delay.
func (set *gaugeSet) observe(o metric.Observer, in *instruments) {
	for name, tok := range set.tokens {
		var buf [1]attribute.KeyValue
		o.ObserveFloat64(in.budgetTokens, tok, metric.WithAttributes(named(buf[:0], name)...))
	}
	label := func(k gaugeKey) attribute.KeyValue {
		if k.op {
			return KeyOperation.String(k.who)
		}
		return keyServerAddress.String(k.who)
	}
	for k, w := range set.worst {
		kv := label(k)
		observeBreaker(o, in.breakerState, kv, k.name, w.s)
		var buf [3]attribute.KeyValue
		attrs := append(buf[:0], kv, KeyBreakerState.String(breakerState(w.s)))
		o.ObserveFloat64(in.breakerFor, w.in.Seconds(), metric.WithAttributes(named(attrs, k.name)...))
	}
	for k, l := range set.limits {
		var buf [2]attribute.KeyValue
		opt := metric.WithAttributes(named(append(buf[:0], label(k)), k.name)...)
		o.ObserveInt64(in.limitCurrent, int64(l.limit), opt)
		o.ObserveInt64(in.limitInFlight, int64(l.inFlight), opt)
	}
	for name, load := range set.maxLoad {
		var buf [1]attribute.KeyValue
		o.ObserveFloat64(in.hedgeMaxExtraLoad, load, metric.WithAttributes(named(buf[:0], name)...))
	}
	for k, d := range set.longest {
		var buf [2]attribute.KeyValue
		attrs := append(buf[:0], label(k))
		o.ObserveFloat64(in.hedgeDelay, d.Seconds(), metric.WithAttributes(named(attrs, k.name)...))
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
