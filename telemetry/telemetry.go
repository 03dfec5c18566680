package telemetry

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// ScopeName is the instrumentation scope of every span and metric; the
// Prometheus exporter writes it to the otel_scope_name label.
const ScopeName = "github.com/MrVSiK/gotry/telemetry"

// Version is the instrumentation scope version of every span and metric (the
// Prometheus exporter's otel_scope_version label): the version of the gotry
// release that contains this package, which every module of the repository
// is tagged with. A release sets it in the commit it tags, with
// CHANGELOG.md's section, and a test holds the two, and METRICS.md, to one
// value.
const Version = "v0.1.0"

// Telemetry turns gotry's hooks into OpenTelemetry spans and metrics and
// into zap or slog log lines. Build one with New and share it: it is safe
// for concurrent use, and its instruments are created once. Its zero value
// is not usable.
type Telemetry struct {
	cfg    config
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	inst   instruments
	gauges gauges // the transports and retriers whose state the gauges report
	logs   []logSink
	hosts  hostGuard
	sets   [shapeInFlight]setCache // metric options per measured attributes, one cache per shape
	// inFlight counts gotry.attempts.in_flight per attribute set.
	inFlight *inFlightCells
	// scratches holds *scratch buffers; see scratch.
	scratches sync.Pool
	// Span kind options, made once: each costs an allocation, and a
	// variadic slice of them another.
	internalOpts []trace.SpanStartOption // [WithSpanKind(internal)]
	client       trace.SpanStartOption
	// stamp: spans take their times from cfg.clock, which is not the
	// wall clock (a test's fake), or from the transport's. With the wall
	// clock the SDK's own reading is the same time, and skipping the
	// option saves two allocations per span.
	stamp bool
}

// New returns a Telemetry. With no options it uses the otel global tracer
// provider, meter provider and propagator, and logs nothing. Instruments it
// cannot create are reported to otel.Handle and replaced by no-ops; New never
// fails.
func New(opts ...Option) *Telemetry {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	t := &Telemetry{
		cfg:          cfg,
		tracer:       cfg.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version), trace.WithSchemaURL(semconv.SchemaURL)),
		prop:         cfg.propagators,
		hosts:        hostGuard{label: cfg.hostLabel, limit: cfg.hostLimit},
		internalOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)},
		client:       trace.WithSpanKind(trace.SpanKindClient),
		stamp:        cfg.clock != clock.Real(),
	}
	t.inst = newInstruments(cfg.mp)
	t.inFlight = newInFlightCells(&t.inst)
	if cfg.zap != nil {
		t.logs = append(t.logs, zapSink{cfg.zap})
	}
	if cfg.slog != nil {
		t.logs = append(t.logs, slogSink{cfg.slog})
	}
	return t
}

// hookSet is the hook state of one transport or retrier: its name and log
// rate limiters.
type hookSet struct {
	t      *Telemetry
	name   string        // gotry.transport on every metric; "" for none
	budget rateLimiter   // "retry budget exhausted" lines
	gaveUp giveUpLimiter // "gave up" lines, per host and reason
	shed   giveUpLimiter // "attempt shed" lines, per host and attempt kind
	// below: something under the transport makes the attempt spans
	// (otelhttp, or another transport this Telemetry instruments), so
	// these hooks make none. Set at construction when the base shows it
	// (spansBelow), or at run time, once, when an attempt's request turns
	// out to have been traced again below gotry (tracedBelow).
	below atomic.Bool
}

// call is the telemetry of one request (or one generic call), made at
// OnCallStart and carried in the request's context. Fields above mu are
// written before the context is handed out and read-only after.
type call struct {
	hs   *hookSet
	span trace.Span // the request span; non-recording when unsampled or off

	// For HTTP: method is the conventions' method ("_OTHER" if unknown),
	// methodOrig the original when it differs; host and port name the
	// server; url is url.full, set only when the span records. For generic
	// calls: op is the key and method is "".
	method, methodOrig string
	host               string
	port               int
	url                string
	op                 string
	spanName           string // the request span's name
	attemptName        string // the attempt spans' name
	// timeLeft is what was left of the request context's deadline when the
	// call started (under transport.Middleware, the caller's propagated
	// deadline included), read on the engine's clock; 0 without one. The
	// request span and gotry.request.time_left report it.
	timeLeft time.Duration

	// mhost and mport are the metric server.address and server.port, after
	// the host guard; mport is 0 when the host was folded into OtherHost.
	mhost string
	mport int

	mu sync.Mutex // guards winner and retained
	// winner is the attempt that succeeded, and retained the latest
	// retryable attempt with a response; their spans stay open because the
	// transport may return their response, whose body ends the span.
	winner, retained *attempt

	// What one request would otherwise allocate piece by piece lives here,
	// in the call's one allocation. ctx is the context OnCallStart
	// returns. first is attempt 1, which every call makes at most once;
	// firstTaken hands it out once all the same.
	ctx        scope
	first      attempt
	firstTaken atomic.Bool
}

// attempt is the telemetry of one attempt, carried in the attempt's context.
type attempt struct {
	c     *call
	num   int
	kind  resilience.AttemptKind
	probe bool
	span  trace.Span // gotry's attempt span; nil when the spans are made below
	// outer is otelhttp's span for the attempt, set by AttemptAnnotator on
	// the attempt's goroutine before OnAttemptEnd reads it (the engine
	// orders the two), or by OnAttemptEnd itself from the response when
	// there is no annotator (findOuter).
	outer trace.Span
	ended atomic.Bool // span has ended
	// inFlight holds the cell of gotry.attempts.in_flight the attempt was
	// counted in at its start, so that its end (once) takes it out of the
	// same one, without looking it up again.
	inFlight atomic.Pointer[inFlightCell]

	// ctx is the context OnAttemptStart returns; carrier writes the
	// span's context into the attempt's headers. Both live in the
	// attempt's one allocation.
	ctx     scope
	carrier headerCarrier
}

// scope is the context a call or an attempt hands on: its parent plus one
// value, as context.WithValue makes, but held inside the value it carries,
// so carrying it costs no allocation of its own (two per request before).
// Its fields are written before it is handed out and only read after.
type scope struct {
	context.Context
	key, val any
}

// carry sets s to parent carrying val under key and returns s.
func (s *scope) carry(parent context.Context, key, val any) context.Context {
	s.Context, s.key, s.val = parent, key, val
	return s
}

// Value returns the carried value for its key and asks the parent for any
// other. Keys are comparable (context.WithValue requires it), so the
// comparison cannot panic.
func (s *scope) Value(key any) any {
	if key == s.key {
		return s.val
	}
	return s.Context.Value(key)
}

// callKey and attemptKey carry a Telemetry's call and attempt in contexts.
// They hold the Telemetry, so two Telemetry values hooked into one
// transport never see each other's state; a pointer-shaped key costs no
// allocation.
type (
	callKey    struct{ t *Telemetry }
	attemptKey struct{ t *Telemetry }
)

func (t *Telemetry) callFrom(ctx context.Context) *call {
	if ctx == nil {
		return nil
	}
	c, _ := ctx.Value(callKey{t}).(*call)
	return c
}

func (t *Telemetry) attemptFrom(ctx context.Context) *attempt {
	if ctx == nil {
		return nil
	}
	a, _ := ctx.Value(attemptKey{t}).(*attempt)
	return a
}

// http reports whether c is a transport's request, not a generic call.
func (c *call) http() bool { return c.method != "" }

// newCall describes the call of e: an HTTP request when its Subject is one
// (the transport's), else a generic call named by its key. The span is
// started by startCall.
func (hs *hookSet) newCall(e resilience.Event) *call {
	if req := transport.RequestOf(e); req != nil {
		return hs.newHTTPCall(req)
	}
	return hs.newOpCall(e.Key)
}

// newHTTPCall describes req.
func (hs *hookSet) newHTTPCall(req *http.Request) *call {
	c := &call{hs: hs, span: noSpan()}
	c.method, c.spanName, c.attemptName = method(req.Method)
	if c.method == "_OTHER" {
		c.methodOrig = req.Method
	}
	c.host, c.port = hostPort(req.URL)
	var real bool
	c.mhost, real = hs.t.hosts.get(c.host)
	if real {
		c.mport = c.port
	}
	return c
}

// newOpCall describes a generic call named key.
func (hs *hookSet) newOpCall(key string) *call {
	return &call{hs: hs, span: noSpan(), op: key, spanName: "gotry " + key, attemptName: "gotry " + key + " attempt"}
}

// callFor returns the call in e's context, or a detached one describing e
// when a hook sees a context that did not pass through OnCallStart.
func (hs *hookSet) callFor(e resilience.Event) *call {
	if c := hs.t.callFrom(e.Context); c != nil {
		return c
	}
	return hs.newCall(e)
}

// newAttempt returns the telemetry of attempt n of c: c's own first
// attempt for n == 1 (once), else a new one.
func (c *call) newAttempt(n int, k resilience.AttemptKind, probe bool) *attempt {
	a := &c.first
	if n != 1 || !c.firstTaken.CompareAndSwap(false, true) {
		a = new(attempt)
	}
	a.c, a.num, a.kind, a.probe = c, n, k, probe
	return a
}

// attemptFor returns the attempt in e's context, or a detached one.
func (hs *hookSet) attemptFor(e resilience.AttemptEndEvent) *attempt {
	if a := hs.t.attemptFrom(e.Context); a != nil {
		return a
	}
	return &attempt{c: hs.callFor(e.Event), num: e.Attempt, kind: e.Kind, probe: e.Probe}
}

// noSpan returns a span that records nothing (no allocation), for calls
// without one.
func noSpan() trace.Span { return trace.SpanFromContext(context.Background()) }
