package telemetry

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"

	"github.com/MrVSiK/gotry/resilience"
)

// Metric names. OpenTelemetry has no semantic convention for retries,
// hedges, budgets or breakers, so every name here is invented and starts
// with "gotry."; the attributes on them follow the HTTP conventions where
// they exist. METRICS.md lists each with its Prometheus name (the OTel
// Prometheus exporter turns dots into underscores and adds the unit and
// _total suffixes: gotry.request.duration → gotry_request_duration_seconds).
const (
	// MetricHTTPClientRequestDuration is the HTTP client conventions'
	// http.client.request.duration (not ours: semconv's name, unit, advisory
	// buckets and attributes), recorded per physical attempt when gotry
	// makes the attempt spans; when otelhttp makes them (Telemetry.Transport
	// found it in the base) otelhttp records it and gotry does not, so no
	// attempt is counted twice.
	MetricHTTPClientRequestDuration = "http.client.request.duration"

	MetricRequestDuration    = "gotry.request.duration"
	MetricAttemptDuration    = "gotry.attempt.duration"
	MetricAttempts           = "gotry.attempts"
	MetricRetries            = "gotry.retries"
	MetricHedges             = "gotry.hedges"
	MetricRetriesSuppressed  = "gotry.retries.suppressed"
	MetricBackoffDelay       = "gotry.backoff.delay"
	MetricBudgetTokens       = "gotry.budget.tokens"
	MetricBudgetRefusals     = "gotry.budget.refusals"
	MetricBreakerState       = "gotry.breaker.state"
	MetricBreakerTransitions = "gotry.breaker.transitions"
	MetricBreakerRejections  = "gotry.breaker.rejections"
	// MetricHedgeDelay (invented) is each host's current adaptive hedge
	// delay, and MetricHedgeMaxExtraLoad (invented) the cap on the fraction
	// of requests that may get a hedge (WithAdaptiveHedging).
	MetricHedgeDelay = "gotry.hedge.delay"
	// MetricAttemptsInFlight (invented) is how many attempts are in flight
	// now (an up-down counter): what Envoy's upstream_rq_active shows.
	MetricAttemptsInFlight = "gotry.attempts.in_flight"
	// MetricBreakerStateDuration (invented) is how long each host's breaker
	// has been in its current state (labelled with it): "open for 40 s".
	MetricBreakerStateDuration = "gotry.breaker.state.duration"
	// MetricRequestRetries (invented) is the distribution of retries per
	// request, as Finagle's retries stat: hedges are not retries.
	MetricRequestRetries    = "gotry.request.retries"
	MetricHedgeMaxExtraLoad = "gotry.hedge.max_extra_load"
	// MetricLimitCurrent (invented) is each host's adaptive concurrency
	// limit now (transport.WithConcurrencyLimit), and MetricLimitInFlight
	// (invented) the attempts in flight under it: both up-down counters
	// read at collection, as the conventions' pool metrics
	// (db.client.connection.max and .count) are. The in-flight count is the
	// limit's own (exempt attempts included), read from the same snapshot
	// as the limit, so the two can be drawn against each other.
	MetricLimitCurrent  = "gotry.limit.current"
	MetricLimitInFlight = "gotry.limit.in_flight"
	// MetricLimitShed (invented) counts the attempts the concurrency limit
	// refused, by kind (a shed initial attempt ends its request as
	// "overloaded"; a shed retry ends it with the last result; a shed hedge
	// is not sent) and criticality.
	MetricLimitShed = "gotry.limit.shed"
	// MetricRequestTimeLeft (invented) is the distribution of what was left
	// of each request's context deadline when it started (the request
	// span's gotry.request.time_left, as a histogram): under
	// transport.Middleware, a deadline a trusted caller propagated counts.
	// Requests without a deadline record nothing. Its low end shows callers
	// that hand a downstream too little time.
	MetricRequestTimeLeft = "gotry.request.time_left"
)

// durationBuckets are the explicit histogram boundaries, in seconds, of every
// duration histogram: from 5ms to 30s, where retries and backoffs live.
func durationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
}

// timeLeftBuckets are the boundaries of gotry.request.time_left, in
// seconds: the duration buckets, so that the time requests start with reads
// against how long they take, and 60 s above them, a common client timeout.
// Under 5 ms a deadline leaves no room for a network round trip (a call to
// a peer with less than transport.MinHopTimeout left is not sent at all).
func timeLeftBuckets() []float64 { return append(durationBuckets(), 60) }

// retryBuckets are the boundaries of gotry.request.retries: each count of
// retries up to 5 on its own, then 10.
func retryBuckets() []float64 { return []float64{0, 1, 2, 3, 4, 5, 10} }

// instruments are the Telemetry's metric instruments, created once by New.
type instruments struct {
	meter metric.Meter

	requestDuration    metric.Float64Histogram
	requestTimeLeft    metric.Float64Histogram // only requests with a deadline
	attemptDuration    metric.Float64Histogram
	httpDuration       metric.Float64Histogram             // http.client.request.duration
	inFlight           metric.Int64ObservableUpDownCounter // read from Telemetry.inFlight
	requestRetries     metric.Int64Histogram
	attempts           metric.Int64Counter
	retries            metric.Int64Counter
	hedges             metric.Int64Counter
	suppressed         metric.Int64Counter
	backoffDelay       metric.Float64Histogram
	budgetRefusals     metric.Int64Counter
	breakerTransitions metric.Int64Counter
	breakerRejections  metric.Int64Counter
	budgetTokens       metric.Float64ObservableGauge
	breakerState       metric.Int64ObservableGauge
	hedgeDelay         metric.Float64ObservableGauge
	breakerFor         metric.Float64ObservableGauge
	hedgeMaxExtraLoad  metric.Float64ObservableGauge
	limitShed          metric.Int64Counter
	limitCurrent       metric.Int64ObservableUpDownCounter
	limitInFlight      metric.Int64ObservableUpDownCounter
}

// newInstruments creates every instrument; one that fails is reported to
// otel.Handle and replaced by a no-op, so recording never needs a nil check.
func newInstruments(mp metric.MeterProvider) instruments {
	m := mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version), metric.WithSchemaURL(semconv.SchemaURL))
	nm := noop.NewMeterProvider().Meter(ScopeName)
	histIn := func(name, desc string, bounds []float64) metric.Float64Histogram {
		opts := []metric.Float64HistogramOption{metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(bounds...)}
		h, err := m.Float64Histogram(name, opts...)
		if err != nil || h == nil {
			otel.Handle(err)
			h, _ = nm.Float64Histogram(name)
		}
		return h
	}
	hist := func(name, desc string) metric.Float64Histogram { return histIn(name, desc, durationBuckets()) }
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil || c == nil {
			otel.Handle(err)
			c, _ = nm.Int64Counter(name)
		}
		return c
	}
	in := instruments{
		meter:           m,
		requestDuration: hist(MetricRequestDuration, "Duration of whole requests through gotry, every attempt and backoff included."),
		requestTimeLeft: histIn(MetricRequestTimeLeft, "Time left of the request context's deadline when the request started; requests without a deadline record nothing.",
			timeLeftBuckets()),
		attemptDuration:    hist(MetricAttemptDuration, "Duration of single attempts, until response headers or an error."),
		attempts:           counter(MetricAttempts, "{attempt}", "Attempts launched, by kind and outcome."),
		retries:            counter(MetricRetries, "{retry}", "Retries scheduled, by trigger and delay source."),
		hedges:             counter(MetricHedges, "{hedge}", "Hedged attempts launched."),
		suppressed:         counter(MetricRetriesSuppressed, "{request}", "Requests that wanted another attempt but gave up, by reason."),
		backoffDelay:       hist(MetricBackoffDelay, "Delays scheduled before retries (0 for an immediate retry)."),
		budgetRefusals:     counter(MetricBudgetRefusals, "{attempt}", "Retries and hedges the retry budget refused."),
		breakerTransitions: counter(MetricBreakerTransitions, "{transition}", "Circuit breaker state changes."),
		breakerRejections:  counter(MetricBreakerRejections, "{request}", "Requests and attempts a circuit breaker refused."),
		limitShed:          counter(MetricLimitShed, "{attempt}", "Attempts the concurrency limit refused, by kind and criticality."),
	}
	var err error
	in.inFlight, err = m.Int64ObservableUpDownCounter(MetricAttemptsInFlight, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts in flight now."))
	if err != nil || in.inFlight == nil {
		otel.Handle(err)
		in.inFlight, _ = nm.Int64ObservableUpDownCounter(MetricAttemptsInFlight)
	}
	in.requestRetries, err = m.Int64Histogram(MetricRequestRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries per request (hedges not counted)."),
		metric.WithExplicitBucketBoundaries(retryBuckets()...))
	if err != nil || in.requestRetries == nil {
		otel.Handle(err)
		in.requestRetries, _ = nm.Int64Histogram(MetricRequestRetries)
	}
	hd, err := httpconv.NewClientRequestDuration(m)
	if err != nil || hd.Float64Histogram == nil {
		otel.Handle(err)
		hd.Float64Histogram, _ = nm.Float64Histogram(MetricHTTPClientRequestDuration)
	}
	in.httpDuration = hd.Float64Histogram
	in.budgetTokens, err = m.Float64ObservableGauge(MetricBudgetTokens, metric.WithUnit("{token}"),
		metric.WithDescription("Retries or hedges the retry budget would allow now."))
	if err != nil || in.budgetTokens == nil {
		otel.Handle(err)
		in.budgetTokens, _ = nm.Float64ObservableGauge(MetricBudgetTokens)
	}
	in.breakerState, err = m.Int64ObservableGauge(MetricBreakerState,
		metric.WithDescription("1 for each host's current breaker state, 0 for its other states."))
	if err != nil || in.breakerState == nil {
		otel.Handle(err)
		in.breakerState, _ = nm.Int64ObservableGauge(MetricBreakerState)
	}
	in.hedgeDelay, err = m.Float64ObservableGauge(MetricHedgeDelay, metric.WithUnit("s"),
		metric.WithDescription("Each host's current adaptive hedge delay: a request still unanswered after it gets a hedge."))
	if err != nil || in.hedgeDelay == nil {
		otel.Handle(err)
		in.hedgeDelay, _ = nm.Float64ObservableGauge(MetricHedgeDelay)
	}
	in.breakerFor, err = m.Float64ObservableGauge(MetricBreakerStateDuration, metric.WithUnit("s"),
		metric.WithDescription("How long each host's breaker has been in its current state."))
	if err != nil || in.breakerFor == nil {
		otel.Handle(err)
		in.breakerFor, _ = nm.Float64ObservableGauge(MetricBreakerStateDuration)
	}
	in.hedgeMaxExtraLoad, err = m.Float64ObservableGauge(MetricHedgeMaxExtraLoad, metric.WithUnit("1"),
		metric.WithDescription("Adaptive hedging's cap on the fraction of requests that may get a hedge."))
	if err != nil || in.hedgeMaxExtraLoad == nil {
		otel.Handle(err)
		in.hedgeMaxExtraLoad, _ = nm.Float64ObservableGauge(MetricHedgeMaxExtraLoad)
	}
	updown := func(name, desc string) metric.Int64ObservableUpDownCounter {
		c, err := m.Int64ObservableUpDownCounter(name, metric.WithUnit("{attempt}"), metric.WithDescription(desc))
		if err != nil || c == nil {
			otel.Handle(err)
			c, _ = nm.Int64ObservableUpDownCounter(name)
		}
		return c
	}
	in.limitCurrent = updown(MetricLimitCurrent, "Each host's adaptive concurrency limit: how many attempts may be in flight to it now.")
	in.limitInFlight = updown(MetricLimitInFlight, "Attempts in flight to each host under its concurrency limit.")
	return in
}

// metricIdentity appends the call's identity for metrics: method, guarded
// server.address and server.port for HTTP, gotry.operation otherwise, and
// gotry.transport when the hooks are named. Never the URL, path or attempt
// number.
func (c *call) metricIdentity(kv []attribute.KeyValue) []attribute.KeyValue {
	kv = named(kv, c.hs.name)
	if c.method == "" {
		return append(kv, KeyOperation.String(c.op))
	}
	kv = append(kv, keyMethod.String(c.method), keyServerAddress.String(c.mhost))
	if c.mport > 0 {
		kv = append(kv, keyServerPort.Int(c.mport))
	}
	return kv
}

// metricHost appends only the server (or operation), and the name.
func (c *call) metricHost(kv []attribute.KeyValue) []attribute.KeyValue {
	kv = named(kv, c.hs.name)
	if c.method == "" {
		return append(kv, KeyOperation.String(c.op))
	}
	return append(kv, keyServerAddress.String(c.mhost))
}

// keyHost is metricHost for a breaker key seen during c.
func (c *call) keyHost(kv []attribute.KeyValue, key string) []attribute.KeyValue {
	kv = named(kv, c.hs.name)
	if !c.http() {
		return append(kv, KeyOperation.String(key))
	}
	host, _ := splitKey(key)
	h, _ := c.hs.t.hosts.get(host)
	return append(kv, keyServerAddress.String(h))
}

// record records gotry.attempt.duration and gotry.attempts and, for an HTTP
// attempt whose span gotry makes, http.client.request.duration. Their
// options come from the Telemetry's cache, built on a key's first
// measurement.
func (a *attempt) record(ctx context.Context, code int, err error, dur time.Duration, o resilience.AttemptOutcome) {
	c := a.c
	in := &c.hs.t.inst
	k := c.setKey(shapeAttempt)
	k.a, k.b, k.code = a.kind.String(), o.String(), code
	// The conventions' metric has error.type on every failed request,
	// a cancelled one too; gotry's own leave it off a cancelled attempt.
	k.het = resultErrorType(code, err)
	if o != resilience.AttemptCancelled {
		k.et = k.het
	}
	m, _ := c.hs.t.sets[k.shape].get(k, func() (ms *measureSets) {
		ms = new(measureSets)
		var buf [8]attribute.KeyValue
		// Made for every HTTP key, whichever transport measures it first:
		// the cache is the Telemetry's, shared by transports with otelhttp
		// in their base and without.
		if c.http() {
			kv := c.metricIdentity(buf[:0])
			if code > 0 {
				kv = append(kv, keyStatusCode.Int(code))
			}
			if k.het != "" {
				kv = append(kv, KeyErrorType.String(k.het))
			}
			ms[2] = newMeasureOpts(kv)
		}
		kv := append(c.metricIdentity(buf[:0]), KeyAttemptKind.String(k.a), KeyAttemptOutcome.String(k.b))
		ms[0] = newMeasureOpts(kv) // sorts kv in place; appending stays correct
		if code > 0 {
			kv = append(kv, keyStatusCode.Int(code))
		}
		if k.et != "" {
			kv = append(kv, KeyErrorType.String(k.et))
		}
		ms[1] = newMeasureOpts(kv)
		return ms
	})
	in.attempts.Add(noExemplar, 1, m[0].add...)
	in.attemptDuration.Record(ctx, dur.Seconds(), m[1].rec...)
	if c.http() && a.span != nil {
		in.httpDuration.Record(ctx, dur.Seconds(), m[2].rec...)
	}
}

// noExemplar is the context of the measurements that keep no exemplar: the
// retries and the time left per request (a request's trace is linked from
// its duration) and
// the attempt counter (each attempt's trace is linked from
// gotry.attempt.duration and http.client.request.duration, whose series
// carry the same kind and outcome, and which the dashboards show). A context
// holding a sampled span makes the SDK offer every measurement to the
// exemplar reservoir (a clock read and a copy of its attributes: ≈ 200 ns a
// measurement on the test VM); the latency histograms keep theirs. (The
// in-flight count, observed at collection, has none either.)
var noExemplar = context.Background()

// inFlightCell counts the attempts in flight of one attribute set of
// gotry.attempts.in_flight. The count is gotry's own: an attempt's start and
// end are each one atomic add, and the meter reads every cell at collection
// (the callback newInFlightCells registers). As two synchronous measurements per attempt the SDK
// resolved the attribute set, looked up its aggregation and offered an
// exemplar twice for a number only a collection reads. The instrument is
// still an up-down counter (a non-monotonic sum), as before.
type inFlightCell struct {
	n   atomic.Int64
	opt metric.ObserveOption
}

// inFlightCells holds the cells by metric attributes, at most cacheLimit
// of them; attempts of further attribute sets are counted in overflow,
// reported with otel.metric.overflow=true as the SDK reports the sets past
// its cardinality limit.
type inFlightCells struct {
	cells    cache[setKey, *inFlightCell]
	overflow inFlightCell
	spilled  atomic.Bool // overflow has counted: report it from then on, as a cell
}

// newInFlightCells returns the cells, registering their collection on in's
// meter; a registration error goes to otel.Handle and leaves the gauge
// unreported.
func newInFlightCells(in *instruments) *inFlightCells {
	f := &inFlightCells{}
	f.overflow.opt = metric.WithAttributeSet(attribute.NewSet(attribute.Bool("otel.metric.overflow", true)))
	_, err := in.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		f.cells.each(func(c *inFlightCell) {
			o.ObserveInt64(in.inFlight, c.n.Load(), c.opt)
		})
		if f.spilled.Load() {
			o.ObserveInt64(in.inFlight, f.overflow.n.Load(), f.overflow.opt)
		}
		return nil
	}, in.inFlight)
	if err != nil {
		otel.Handle(err)
	}
	return f
}

// attemptStarted adds 1 to gotry.attempts.in_flight and returns the cell it
// counted in, for attemptEnded.
func (c *call) attemptStarted() *inFlightCell {
	f := c.hs.t.inFlight
	cell, kept := f.cells.get(c.setKey(shapeInFlight), func() *inFlightCell {
		var buf [2]attribute.KeyValue
		return &inFlightCell{opt: metric.WithAttributeSet(attribute.NewSet(c.metricHost(buf[:0])...))}
	})
	if !kept { // the cache was full
		cell = &f.overflow
		f.spilled.Store(true)
	}
	cell.n.Add(1)
	return cell
}

// attemptEnded takes 1 from the cell attemptStarted returned.
func (c *call) attemptEnded(cell *inFlightCell) { cell.n.Add(-1) }

// recordRetry records gotry.retries and the scheduled delay in
// gotry.backoff.delay.
func (c *call) recordRetry(ctx context.Context, trigger, source string, delay time.Duration) {
	in := &c.hs.t.inst
	var buf [7]attribute.KeyValue
	kv := c.metricIdentity(buf[:0])
	kv = append(kv, KeyRetryTrigger.String(trigger), KeyDelaySource.String(source))
	in.retries.Add(ctx, 1, metric.WithAttributes(kv...))
	kv = c.metricHost(buf[:0])
	kv = append(kv, KeyDelaySource.String(source))
	in.backoffDelay.Record(ctx, delay.Seconds(), metric.WithAttributes(kv...))
}

func (c *call) recordHedge(ctx context.Context, trigger string) {
	var buf [5]attribute.KeyValue
	kv := append(c.metricIdentity(buf[:0]), KeyHedgeTrigger.String(trigger))
	c.hs.t.inst.hedges.Add(ctx, 1, metric.WithAttributes(kv...))
}

func (c *call) recordBudgetRefusal(ctx context.Context, k resilience.AttemptKind) {
	var buf [3]attribute.KeyValue
	kv := append(c.metricHost(buf[:0]), KeyAttemptKind.String(k.String()))
	c.hs.t.inst.budgetRefusals.Add(ctx, 1, metric.WithAttributes(kv...))
}

// recordShed counts an attempt of kind k the concurrency limit refused, in
// gotry.limit.shed. Its options come from the Telemetry's cache, as the
// attempt's do: under overload a host sheds many attempts a second.
func (c *call) recordShed(ctx context.Context, k resilience.AttemptKind, cr resilience.Criticality) {
	key := c.setKey(shapeShed)
	key.method, key.port = "", 0 // per host, as the limit is
	key.a, key.b = k.String(), cr.String()
	m, _ := c.hs.t.sets[key.shape].get(key, func() *measureSets {
		var buf [4]attribute.KeyValue
		kv := append(c.metricHost(buf[:0]), KeyAttemptKind.String(key.a), KeyCriticality.String(key.b))
		return &measureSets{newMeasureOpts(kv)}
	})
	c.hs.t.inst.limitShed.Add(ctx, 1, m[0].add...)
}

func (c *call) recordBreakerReject(ctx context.Context) {
	var buf [2]attribute.KeyValue
	c.hs.t.inst.breakerRejections.Add(ctx, 1, metric.WithAttributes(c.metricHost(buf[:0])...))
}

func (c *call) recordTransition(ctx context.Context, key string, from, to resilience.BreakerState) {
	var buf [4]attribute.KeyValue
	kv := append(c.keyHost(buf[:0], key), KeyBreakerFrom.String(breakerState(from)), KeyBreakerTo.String(breakerState(to)))
	c.hs.t.inst.breakerTransitions.Add(ctx, 1, metric.WithAttributes(kv...))
}

// recordEnd records gotry.request.duration and gotry.request.retries,
// gotry.request.time_left for a request that had a deadline and, for a
// give-up, gotry.retries.suppressed. The time left is known from the start
// but recorded here, with the set gotry.request.retries uses (the identity
// known at the start): one cache lookup serves all four.
func (c *call) recordEnd(ctx context.Context, e callEnd) {
	in := &c.hs.t.inst
	k := c.setKey(shapeEnd)
	k.a, k.code, k.et = e.reason.String(), e.code, resultErrorType(e.code, e.err)
	m, _ := c.hs.t.sets[k.shape].get(k, func() (ms *measureSets) {
		ms = new(measureSets)
		// NewSet sorts its argument in place: build each from scratch.
		var buf [7]attribute.KeyValue
		reason := KeyReason.String(k.a)
		ms[1] = newMeasureOpts(append(c.metricIdentity(buf[:0]), reason))
		ms[2] = newMeasureOpts(c.metricIdentity(buf[:0]))
		kv := append(c.metricIdentity(buf[:0]), reason)
		if e.code > 0 {
			kv = append(kv, keyStatusCode.Int(e.code))
		}
		if k.et != "" {
			kv = append(kv, KeyErrorType.String(k.et))
		}
		ms[0] = newMeasureOpts(kv)
		return ms
	})
	in.requestDuration.Record(ctx, e.dur.Seconds(), m[0].rec...)
	in.requestRetries.Record(noExemplar, int64(e.retries), m[2].rec...)
	if c.timeLeft > 0 {
		in.requestTimeLeft.Record(noExemplar, c.timeLeft.Seconds(), m[2].rec...)
	}
	if e.reason.GaveUp() {
		in.suppressed.Add(ctx, 1, m[1].add...)
	}
}

// cacheLimit bounds each of the Telemetry's option caches. Past it,
// options are built per use, as they were before the caches; nothing is
// evicted.
const cacheLimit = 4096

// cache keeps options built from attributes, per key, so the hot path
// reuses them instead of building them per request. Its keys are made of
// attribute values; cacheLimit caps it, so hostile cardinality (unknown
// methods, unbounded hosts on spans or WithHostLimit(0) on metrics) cannot
// grow it without end. Safe for concurrent use.
//
// A lookup first compares k with the key of the latest entry the map gave
// out (last): a transport's requests mostly repeat one key (one host, and
// the same answer), and comparing a key's fields costs a fraction of
// hashing them for the map (seven strings and three numbers: ≈ 100 ns a
// lookup on the 2-CPU test VM, three lookups a request). A miss looks in
// the map and, on a hit there, points last at that entry: no allocation.
type cache[K comparable, V any] struct {
	m    sync.Map     // K -> *cacheEntry[K, V]
	n    atomic.Int64 // entries stored
	last atomic.Pointer[cacheEntry[K, V]]
}

type cacheEntry[K comparable, V any] struct {
	k K
	v V
}

// get returns k's value, made by build on a miss and kept unless the cache
// is full; kept reports whether the value returned is the cache's.
func (c *cache[K, V]) get(k K, build func() V) (v V, kept bool) {
	if e := c.last.Load(); e != nil && e.k == k {
		return e.v, true
	}
	if x, ok := c.m.Load(k); ok {
		e := x.(*cacheEntry[K, V])
		c.last.Store(e)
		return e.v, true
	}
	v = build()
	if c.n.Load() >= cacheLimit {
		return v, false
	}
	x, loaded := c.m.LoadOrStore(k, &cacheEntry[K, V]{k, v})
	if !loaded {
		c.n.Add(1)
	}
	e := x.(*cacheEntry[K, V])
	c.last.Store(e)
	return e.v, true
}

// each calls fn with every value kept.
func (c *cache[K, V]) each(fn func(V)) {
	c.m.Range(func(_, x any) bool {
		fn(x.(*cacheEntry[K, V]).v)
		return true
	})
}

// setCache keeps the measurement options of the per-request and
// per-attempt metrics. Building them (sorting and copying the attributes
// into a Set, boxing the option, the variadic slice) cost 18 allocations
// per request; a hit costs none. The keys are the metric attributes,
// already bounded by the host guard.
type setCache = cache[setKey, *measureSets]

// measureSets are the options of up to three measurements made together
// (which three, the key's shape says).
type measureSets [3]measureOpts

// measureOpts carries one attribute set as the options of a counter's Add
// and of a histogram's Record: one boxed option shared by both slices, so
// a measurement passes them on without building anything.
type measureOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// newMeasureOpts makes the options of a measurement carrying kv. NewSet
// sorts kv in place.
func newMeasureOpts(kv []attribute.KeyValue) measureOpts {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return measureOpts{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

// setKey is what determines a measurement's attributes.
type setKey struct {
	shape  uint8
	name   string // gotry.transport
	method string
	host   string
	port   int
	op     string
	a, b   string // kind and outcome, or the reason
	code   int
	et     string
	het    string // error.type of http.client.request.duration
}

const (
	shapeAttempt  uint8 = iota // [gotry.attempts, gotry.attempt.duration, http.client.request.duration]
	shapeEnd                   // [gotry.request.duration, gotry.retries.suppressed, gotry.request.retries and gotry.request.time_left]
	shapeShed                  // [gotry.limit.shed]
	shapeInFlight              // gotry.attempts.in_flight's cell (inFlightCells)
)

// setKey returns the key of c's measurements of shape s, with the call's
// identity filled in.
func (c *call) setKey(s uint8) setKey {
	return setKey{shape: s, name: c.hs.name, method: c.method, host: c.mhost, port: c.mport, op: c.op}
}
