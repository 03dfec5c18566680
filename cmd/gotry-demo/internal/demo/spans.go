package demo

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/transport"
)

// Span recorder limits: traces kept, and spans kept per trace.
const (
	defaultMaxTraces = 2000
	maxSpansPerTrace = 64
)

// spanRecorder is a bounded in-memory sdktrace.SpanProcessor: it keeps the
// ended spans of the most recent traces, and separately the most
// interesting trace of the whole run, for the waterfall. Safe for concurrent
// use; OnEnd takes one mutex.
type spanRecorder struct {
	maxTraces int

	mu     sync.Mutex // guards everything below
	traces map[trace.TraceID]*traceRec
	order  []trace.TraceID // FIFO of traces, oldest first; ring of maxTraces
	head   int             // next slot of order to overwrite once full
	best   *traceRec       // highest score of the run; survives eviction
}

// traceRec is one trace's spans. Fields are guarded by spanRecorder.mu.
type traceRec struct {
	id      trace.TraceID
	spans   []sdktrace.ReadOnlySpan
	dropped int // spans past maxSpansPerTrace
	// rootEnd is when gotry's request span (the one carrying
	// gotry.attempts) ended, zero until it has; score ranks the trace.
	rootEnd time.Time
	score   int
	// heads is, per attempt span, how long the attempt took until its
	// response headers (or error): the span itself may stay open longer.
	heads map[trace.SpanID]time.Duration
}

// traceView is a copy of one trace for rendering.
type traceView struct {
	spans []sdktrace.ReadOnlySpan
	heads map[trace.SpanID]time.Duration
}

func (t *traceRec) view() traceView {
	v := traceView{spans: append([]sdktrace.ReadOnlySpan(nil), t.spans...), heads: map[trace.SpanID]time.Duration{}}
	for k, d := range t.heads {
		v.heads[k] = d
	}
	return v
}

var _ sdktrace.SpanProcessor = (*spanRecorder)(nil)

func newSpanRecorder(maxTraces int) *spanRecorder {
	if maxTraces <= 0 {
		maxTraces = defaultMaxTraces
	}
	return &spanRecorder{maxTraces: maxTraces, traces: map[trace.TraceID]*traceRec{}}
}

// OnStart does nothing: only ended spans are kept.
func (r *spanRecorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd keeps s with its trace.
func (r *spanRecorder) OnEnd(s sdktrace.ReadOnlySpan) {
	attempts, isRequest := requestAttempts(s)
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.traceLocked(s.SpanContext().TraceID())
	if len(t.spans) >= maxSpansPerTrace {
		t.dropped++
		return
	}
	t.spans = append(t.spans, s)
	if isRequest {
		t.rootEnd = s.EndTime()
		t.score = score(attempts, s)
		if r.best == nil || t.score >= r.best.score {
			r.best = t
		}
	}
}

// traceLocked returns the trace id, adding it if new. Requires r.mu.
func (r *spanRecorder) traceLocked(id trace.TraceID) *traceRec {
	t, ok := r.traces[id]
	if !ok {
		t = &traceRec{id: id}
		r.insertLocked(t)
	}
	return t
}

// hooks note each attempt's time to headers, keyed by its span: the attempt
// span of a response that may be returned stays open after it.
func (r *spanRecorder) hooks() transport.Hooks {
	return transport.Hooks{
		OnAttemptEnd: func(e resilience.AttemptEndEvent) {
			sc := trace.SpanContextFromContext(e.Context)
			if !sc.IsValid() || !sc.IsSampled() {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			t := r.traceLocked(sc.TraceID())
			if t.heads == nil {
				t.heads = map[trace.SpanID]time.Duration{}
			}
			if len(t.heads) < maxSpansPerTrace {
				t.heads[sc.SpanID()] = e.Duration
			}
		},
	}
}

// insertLocked adds t, evicting the oldest trace when full. Requires r.mu.
func (r *spanRecorder) insertLocked(t *traceRec) {
	r.traces[t.id] = t
	if len(r.order) < r.maxTraces {
		r.order = append(r.order, t.id)
		return
	}
	delete(r.traces, r.order[r.head])
	r.order[r.head] = t.id
	r.head = (r.head + 1) % r.maxTraces
}

// Shutdown and ForceFlush have nothing to flush.
func (r *spanRecorder) Shutdown(context.Context) error   { return nil }
func (r *spanRecorder) ForceFlush(context.Context) error { return nil }

// requestAttempts reports whether s is gotry's request span (it carries
// gotry.attempts) and how many attempts it made.
func requestAttempts(s sdktrace.ReadOnlySpan) (int, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == telemetry.KeyAttempts {
			return int(kv.Value.AsInt64()), true
		}
	}
	return 0, false
}

// score ranks a request for the waterfall: attempts first, then variety
// (a hedge, a retry, Retry-After), so the most instructive trace wins.
func score(attempts int, s sdktrace.ReadOnlySpan) int {
	sc := attempts * 100
	for _, kv := range s.Attributes() {
		switch kv.Key {
		case telemetry.KeyRetries, telemetry.KeyHedges:
			if kv.Value.AsInt64() > 0 {
				sc += 10
			}
		}
	}
	return sc
}

// pickRecent returns a copy of the highest-scoring trace whose
// request span ended in (now-window, now-settle], so the attempt spans that
// end after the request (the winner's, when its body is closed) are in.
// ok is false when no trace there made more than one attempt.
func (r *spanRecorder) pickRecent(now time.Time, window, settle time.Duration) (v traceView, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best *traceRec
	for _, t := range r.traces {
		if t.rootEnd.IsZero() || !t.rootEnd.After(now.Add(-window)) || t.rootEnd.After(now.Add(-settle)) {
			continue
		}
		if t.score < 200 {
			continue // a single attempt
		}
		if best == nil || t.score > best.score || (t.score == best.score && t.rootEnd.After(best.rootEnd)) {
			best = t
		}
	}
	if best == nil {
		return v, false
	}
	return best.view(), true
}

// pickBest returns a copy of the run's most interesting trace; ok is false
// when no request made more than one attempt.
func (r *spanRecorder) pickBest() (v traceView, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.best == nil || r.best.score < 200 {
		return v, false
	}
	return r.best.view(), true
}

// attr returns the value of key on s.
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}
