package telemetry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/MrVSiK/gotry/resilience"
)

// Log messages. The zap and slog adapters write the same messages with the
// same fields; field keys equal the span attribute keys
// (http.request.method, server.address, gotry.reason, error.type, ...),
// durations are float
// seconds like the span attributes, and "trace_id"/"span_id" are added when
// the event's context holds a valid span. Headers, bodies and URLs are never
// logged; "error" is the error's text without the URL a *url.Error carries.
const (
	// MsgAttempt (Debug) ends every attempt.
	MsgAttempt = "gotry: attempt finished"
	// MsgRetry (Info) is a scheduled retry.
	MsgRetry = "gotry: retry scheduled"
	// MsgHedge (Debug) is a hedge launch.
	MsgHedge = "gotry: hedge launched"
	// MsgGaveUp (Warn; Error when the request ended in an error; Info when
	// the caller cancelled) is a request that wanted another attempt but
	// ended: attempts or budget exhausted, breaker open, and so on. Lines
	// are aggregated per transport (or retrier) and (server address and
	// port, or operation; reason): the first is always written, then at
	// most one per WithGiveUpLogInterval (default a second), with
	// gotry.suppressed counting the like lines dropped since the last one
	// written.
	MsgGaveUp = "gotry: gave up"
	// MsgRequest (Debug) ends a request that did not give up.
	MsgRequest = "gotry: request finished"
	// MsgBudget (Warn) is a retry or hedge refused by the budget, at most
	// one line per second per transport (or retrier), with gotry.suppressed
	// counting the lines dropped since the last.
	MsgBudget = "gotry: retry budget exhausted"
	// MsgShed (Warn) is an attempt the concurrency limit refused, with the
	// host's limit and what was in flight. Lines are aggregated as the
	// give-up lines are, per transport (or retrier), host (or operation)
	// and attempt kind, at the same WithGiveUpLogInterval, with
	// gotry.suppressed counting the like lines dropped since the last one.
	// A shed initial attempt ends its request, so a give-up line with
	// reason "overloaded" follows (aggregated on its own).
	MsgShed = "gotry: attempt shed by the concurrency limit"
	// MsgBreakerState (Error when the breaker opens, Info otherwise) is a
	// breaker's state change.
	MsgBreakerState = "gotry: circuit breaker state changed"
	// MsgBreakerReject (Debug) is a request or attempt a breaker refused.
	MsgBreakerReject = "gotry: circuit breaker rejected"
	// MsgSpansBelow (Warn, once per transport) says that a transport's
	// attempts turned out to be traced below it, by otelhttp behind a
	// RoundTripper that has no Unwrap method (see Telemetry.Transport):
	// the attempts so far had two CLIENT spans each, gotry's and the one
	// below, and from this line on gotry makes none. It carries
	// gotry.transport (when named) and the host of the attempt that showed
	// it. With no logger configured (or none enabled at Warn) the same
	// words go to otel.Handle, so the line is never lost.
	MsgSpansBelow = "gotry: attempts are traced below this transport (otelhttp behind a RoundTripper without an Unwrap method?): gotry stops making its own attempt spans; give that RoundTripper an Unwrap() http.RoundTripper method so gotry sees otelhttp when the transport is built"

	// Log keys with no span attribute of their own.
	logKeyError   = "error"
	logKeyTraceID = "trace_id"
	logKeySpanID  = "span_id"
)

// level is a log level, mapped by each sink to its own.
type level int8

const (
	levelDebug level = iota
	levelInfo
	levelWarn
	levelError
)

// field is one typed log field; sinks convert it without boxing.
type field struct {
	key  string
	kind fieldKind
	s    string
	n    int64
	f    float64
}

type fieldKind uint8

const (
	kindString fieldKind = iota
	kindInt
	kindFloat
	kindBool
)

func fstr(k attribute.Key, s string) field { return field{key: string(k), s: s} }
func fint(k attribute.Key, n int) field    { return field{key: string(k), kind: kindInt, n: int64(n)} }
func fsec(k attribute.Key, d time.Duration) field {
	return field{key: string(k), kind: kindFloat, f: d.Seconds()}
}
func fbool(k attribute.Key, b bool) field {
	f := field{key: string(k), kind: kindBool}
	if b {
		f.n = 1
	}
	return f
}

// logSink is a logger adapter: zapSink or slogSink.
type logSink interface {
	// enabled reports whether a line at l would be written; it must be
	// cheap, since it guards building the fields.
	enabled(ctx context.Context, l level) bool
	write(ctx context.Context, l level, msg string, fs []field)
}

// logEnabled reports whether any sink writes level l.
func (t *Telemetry) logEnabled(ctx context.Context, l level) bool {
	for _, s := range t.logs {
		if s.enabled(ctx, l) {
			return true
		}
	}
	return false
}

// emit writes a line to every sink enabled at l, adding trace_id and
// span_id from ctx's span when it is valid.
func (t *Telemetry) emit(ctx context.Context, l level, msg string, fs []field) {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			fs = append(fs, field{key: logKeyTraceID, s: sc.TraceID().String()},
				field{key: logKeySpanID, s: sc.SpanID().String()})
		}
	}
	for _, s := range t.logs {
		if s.enabled(ctx, l) {
			s.write(ctx, l, msg, fs)
		}
	}
}

// logIdentity appends the call's identity: method, real server address and
// port for HTTP, gotry.operation otherwise.
func (c *call) logIdentity(fs []field) []field {
	if c.method == "" {
		return append(fs, fstr(KeyOperation, c.op))
	}
	fs = append(fs, fstr(keyMethod, c.method), fstr(keyServerAddress, c.host))
	if c.port > 0 {
		fs = append(fs, fint(keyServerPort, c.port))
	}
	return fs
}

// logResult appends the status code and error.type and text, as present.
func logResult(fs []field, code int, err error) []field {
	if code > 0 {
		fs = append(fs, fint(keyStatusCode, code))
	}
	if et := resultErrorType(code, err); et != "" {
		fs = append(fs, fstr(KeyErrorType, et))
	}
	if err != nil {
		fs = append(fs, field{key: logKeyError, s: errorMessage(err)})
	}
	return fs
}

func (a *attempt) log(ctx context.Context, code int, err error, dur time.Duration, o resilience.AttemptOutcome, pushback bool) {
	t := a.c.hs.t
	if !t.logEnabled(ctx, levelDebug) {
		return
	}
	fs := make([]field, 0, 14)
	fs = a.c.logIdentity(fs)
	fs = append(fs, fint(keyAttempt, a.num), fstr(KeyAttemptKind, a.kind.String()),
		fstr(KeyAttemptOutcome, o.String()), fsec(keyAttemptDuration, dur))
	if a.probe {
		fs = append(fs, fbool(KeyAttemptProbe, true))
	}
	if pushback {
		fs = append(fs, fbool(KeyAttemptPushback, true))
	}
	if o == resilience.AttemptCancelled {
		fs = logResult(fs, code, nil) // not an error
	} else {
		fs = logResult(fs, code, err)
	}
	t.emit(ctx, levelDebug, MsgAttempt, fs)
}

func (c *call) logRetry(ctx context.Context, n int, delay time.Duration, trigger, source string, code int, err error) {
	t := c.hs.t
	if !t.logEnabled(ctx, levelInfo) {
		return
	}
	fs := make([]field, 0, 14)
	fs = c.logIdentity(fs)
	fs = append(fs, fint(keyAttempt, n), fsec(keyBackoffDelay, delay),
		fstr(KeyDelaySource, source), fstr(KeyRetryTrigger, trigger))
	fs = logResult(fs, code, err)
	t.emit(ctx, levelInfo, MsgRetry, fs)
}

func (c *call) logHedge(ctx context.Context, n, inFlight int) {
	t := c.hs.t
	if !t.logEnabled(ctx, levelDebug) {
		return
	}
	fs := make([]field, 0, 8)
	fs = c.logIdentity(fs)
	fs = append(fs, fint(keyAttempt, n), fint(keyHedgeInFlight, inFlight))
	t.emit(ctx, levelDebug, MsgHedge, fs)
}

func (c *call) logEnd(ctx context.Context, e callEnd) {
	t := c.hs.t
	l := levelDebug
	msg := MsgRequest
	if e.reason.GaveUp() {
		msg = MsgGaveUp
		switch {
		case e.reason == resilience.ReasonCanceled:
			// The caller chose to stop; not gotry's failure.
			l = levelInfo
		case e.err != nil:
			l = levelError
		default:
			l = levelWarn
		}
	}
	if !t.logEnabled(ctx, l) {
		return
	}
	dropped := -1 // no gotry.suppressed field
	if msg == MsgGaveUp {
		var ok bool
		if dropped, ok = c.aggregated(&c.hs.gaveUp, giveUpKey{host: c.host, port: c.port, op: c.op, reason: e.reason}); !ok {
			return
		}
	}
	fs := make([]field, 0, 17)
	fs = c.logIdentity(fs)
	if dropped >= 0 {
		fs = append(fs, fint(keySuppressed, dropped))
	}
	fs = append(fs, fstr(KeyReason, e.reason.String()), fint(KeyAttempts, e.attempts),
		fint(KeyRetries, e.retries), fint(KeyHedges, e.hedges),
		fsec(keyBackoffTotal, e.backoff), fsec(keyRequestDuration, e.dur))
	fs = logResult(fs, e.code, e.err)
	t.emit(ctx, l, msg, fs)
}

func (c *call) logBudget(ctx context.Context, n int, k resilience.AttemptKind) {
	t := c.hs.t
	if !t.logEnabled(ctx, levelWarn) {
		return
	}
	dropped, ok := c.hs.budget.allow(t.cfg.clock.Now(), time.Second)
	if !ok {
		return
	}
	fs := make([]field, 0, 10)
	fs = c.logIdentity(fs)
	fs = append(fs, fint(keyAttempt, n), fstr(KeyAttemptKind, k.String()), fint(keySuppressed, dropped))
	t.emit(ctx, levelWarn, MsgBudget, fs)
}

func (c *call) logShed(ctx context.Context, e resilience.ShedEvent) {
	t := c.hs.t
	if !t.logEnabled(ctx, levelWarn) {
		return
	}
	dropped, ok := c.aggregated(&c.hs.shed, giveUpKey{host: c.host, port: c.port, op: c.op, reason: resilience.ReasonOverloaded, kind: e.Kind})
	if !ok {
		return
	}
	fs := make([]field, 0, 16)
	fs = c.logIdentity(fs)
	if dropped >= 0 {
		fs = append(fs, fint(keySuppressed, dropped))
	}
	fs = append(fs, fint(keyAttempt, e.Attempt), fstr(KeyAttemptKind, e.Kind.String()),
		fstr(KeyCriticality, e.Criticality.String()), fint(KeyLimitCurrent, e.Limit),
		fint(KeyLimitInFlight, e.InFlight), fsec(KeyLimitWaited, e.Waited))
	t.emit(ctx, levelWarn, MsgShed, fs)
}

func (c *call) logBreakerReject(ctx context.Context, n int, s resilience.BreakerState) {
	t := c.hs.t
	if !t.logEnabled(ctx, levelDebug) {
		return
	}
	fs := make([]field, 0, 8)
	fs = c.logIdentity(fs)
	fs = append(fs, fint(keyAttempt, n), fstr(KeyBreakerState, breakerState(s)))
	t.emit(ctx, levelDebug, MsgBreakerReject, fs)
}

// logTransition logs a transition of key's breaker, seen during c; the
// line carries the trace of the call that moved it.
func (c *call) logTransition(ctx context.Context, key string, from, to resilience.BreakerState) {
	t := c.hs.t
	l := levelInfo
	if to == resilience.BreakerOpen {
		l = levelError
	}
	if !t.logEnabled(ctx, l) {
		return
	}
	fs := make([]field, 0, 8)
	if c.http() {
		host, port := splitKey(key)
		fs = append(fs, fstr(keyServerAddress, host))
		if port > 0 {
			fs = append(fs, fint(keyServerPort, port))
		}
	} else {
		fs = append(fs, fstr(KeyOperation, key))
	}
	fs = append(fs, fstr(KeyBreakerFrom, breakerState(from)), fstr(KeyBreakerTo, breakerState(to)))
	t.emit(ctx, l, MsgBreakerState, fs)
}

// rateLimiter lets one line through per interval and counts the rest.
type rateLimiter struct {
	mu      sync.Mutex
	last    time.Time // when a line last went through; zero before the first
	dropped int       // lines dropped since then
}

// allow reports whether a line may be written at now, at most one per
// every, and, if so, how many were dropped before it.
func (r *rateLimiter) allow(now time.Time, every time.Duration) (dropped int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() && now.Sub(r.last) < every {
		r.dropped++
		return 0, false
	}
	dropped, r.dropped, r.last = r.dropped, 0, now
	return dropped, true
}

// aggregated reports whether a line of key may be written now, under
// WithGiveUpLogInterval, and how many lines of key it stands for that were
// held back (-1 with no aggregation: no gotry.suppressed field).
func (c *call) aggregated(l *giveUpLimiter, key giveUpKey) (dropped int, ok bool) {
	t := c.hs.t
	if t.cfg.giveUpEvery <= 0 {
		return -1, true
	}
	return l.allow(key, t.cfg.clock.Now(), t.cfg.giveUpEvery)
}

// giveUpKey is what give-up and shed lines are aggregated by.
type giveUpKey struct {
	host   string // server.address, "" for a generic call
	port   int
	op     string // the generic call's operation, "" for HTTP
	reason resilience.EndReason
	kind   resilience.AttemptKind // the shed attempt's kind; KindInitial for give-ups
}

// maxGiveUpKeys bounds the keys a giveUpLimiter tracks; lines of a key past
// it are written, not aggregated, so unbounded hosts cannot grow memory.
const maxGiveUpKeys = 1024

// giveUpLimiter rate-limits give-up lines per key. Safe for concurrent use.
type giveUpLimiter struct {
	mu   sync.Mutex                 // guards keys and each limiter's fields
	keys map[giveUpKey]*rateLimiter // at most maxGiveUpKeys entries
}

// allow is rateLimiter.allow for k's lines.
func (g *giveUpLimiter) allow(k giveUpKey, now time.Time, every time.Duration) (dropped int, ok bool) {
	g.mu.Lock()
	r := g.keys[k]
	if r == nil {
		if len(g.keys) >= maxGiveUpKeys {
			g.mu.Unlock()
			return 0, true
		}
		if g.keys == nil {
			g.keys = map[giveUpKey]*rateLimiter{}
		}
		r = new(rateLimiter)
		g.keys[k] = r
	}
	g.mu.Unlock()
	return r.allow(now, every)
}

// warnSpansBelow writes MsgSpansBelow for the transport of hs, about call
// c's attempt: to the loggers enabled at Warn, else to otel.Handle.
func (hs *hookSet) warnSpansBelow(ctx context.Context, c *call) {
	t := hs.t
	if !t.logEnabled(ctx, levelWarn) {
		otel.Handle(fmt.Errorf("%s (%s=%q, %s=%q)", MsgSpansBelow, KeyTransport, hs.name, keyServerAddress, c.host))
		return
	}
	fs := make([]field, 0, 6)
	if hs.name != "" {
		fs = append(fs, fstr(KeyTransport, hs.name))
	}
	fs = c.logIdentity(fs)
	t.emit(ctx, levelWarn, MsgSpansBelow, fs)
}
