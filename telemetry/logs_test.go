package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// lines returns the observed entries with message msg.
func lines(logs *observer.ObservedLogs, msg string) []observer.LoggedEntry {
	return logs.FilterMessage(msg).AllUntimed()
}

// wantFields checks exact field values; a nil value asserts absence.
func wantFields(t *testing.T, what string, got map[string]any, exp map[string]any) {
	t.Helper()
	for k, v := range exp {
		g, ok := got[k]
		switch {
		case v == nil && ok:
			t.Errorf("%s: field %s = %v, want absent", what, k, g)
		case v != nil && !ok:
			t.Errorf("%s: field %s absent, want %v", what, k, v)
		case v != nil && g != v:
			t.Errorf("%s: field %s = %#v, want %#v", what, k, g, v)
		}
	}
}

func TestLogsRetryAndGiveUp(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(503))
	tr := transport.New(base(t), r.tel.Transport(),
		transport.WithBackoff(resilience.Constant(time.Millisecond)))
	resp, err := get(t, tr, srv.URL+"/orders?token=secret")
	if err != nil {
		t.Fatal(err)
	}
	drain(t, resp)
	spans := r.waitEnded(t, 6)
	root := ordered(spans, "gotry GET")[0].SpanContext()
	atts := ordered(spans, "GET")
	port := int64(srv.port(t))

	retries := lines(r.logs, MsgRetry)
	if len(retries) != 2 {
		t.Fatalf("%d retry lines, want 2", len(retries))
	}
	for i, l := range retries {
		if l.Level != zapcore.InfoLevel {
			t.Errorf("retry line level %v, want info", l.Level)
		}
		wantFields(t, "retry line", l.ContextMap(), map[string]any{
			"http.request.method": "GET", "server.address": "127.0.0.1", "server.port": port,
			"gotry.attempt": int64(i + 1), "gotry.backoff.delay": 0.001, "gotry.retry.delay_source": "backoff",
			"gotry.retry.trigger": "5xx", "http.response.status_code": int64(503), "error.type": "503",
			"error": nil, "trace_id": root.TraceID().String(), "span_id": root.SpanID().String(),
		})
	}

	gaveUp := lines(r.logs, MsgGaveUp)
	if len(gaveUp) != 1 || gaveUp[0].Level != zapcore.WarnLevel {
		t.Fatalf("give-up lines %v, want one at warn", gaveUp)
	}
	wantFields(t, "give-up line", gaveUp[0].ContextMap(), map[string]any{
		"gotry.reason": "attempts_exhausted", "gotry.attempts": int64(3), "gotry.retries": int64(2),
		"gotry.hedges": int64(0), "http.response.status_code": int64(503), "error.type": "503",
		"trace_id": root.TraceID().String(), "span_id": root.SpanID().String(),
	})

	attempts := lines(r.logs, MsgAttempt)
	if len(attempts) != 3 {
		t.Fatalf("%d attempt lines, want 3", len(attempts))
	}
	for i, l := range attempts {
		if l.Level != zapcore.DebugLevel {
			t.Errorf("attempt line level %v, want debug", l.Level)
		}
		kind := "retry"
		if i == 0 {
			kind = "initial"
		}
		wantFields(t, "attempt line", l.ContextMap(), map[string]any{
			"gotry.attempt": int64(i + 1), "gotry.attempt.kind": kind, "gotry.attempt.outcome": "retryable",
			"http.response.status_code": int64(503), "span_id": atts[i].SpanContext().SpanID().String(),
		})
	}

	for _, l := range r.logs.AllUntimed() {
		for k, v := range l.ContextMap() {
			if s := fmt.Sprint(v); strings.Contains(s, "secret") || strings.Contains(s, "/orders") {
				t.Errorf("%q: field %s = %q leaks the URL", l.Message, k, s)
			}
		}
	}
}

// A give-up that ends in an error logs at Error, with the error's type and
// its text without the URL.
func TestLogsGiveUpWithError(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(200))
	u := srv.URL + "/x?token=secret"
	srv.Close() // nothing listens any more: connection refused
	tr := transport.New(base(t), r.tel.Transport(),
		transport.WithBackoff(resilience.Constant(time.Millisecond)))
	if _, err := get(t, tr, u); err == nil {
		t.Fatal("want an error")
	}
	gaveUp := lines(r.logs, MsgGaveUp)
	if len(gaveUp) != 1 || gaveUp[0].Level != zapcore.ErrorLevel {
		t.Fatalf("give-up lines %v, want one at error", gaveUp)
	}
	f := gaveUp[0].ContextMap()
	wantFields(t, "give-up line", f, map[string]any{
		"error.type": ErrorTypeConnectionRefused, "gotry.reason": "attempts_exhausted", "http.response.status_code": nil,
	})
	if msg, _ := f["error"].(string); msg == "" || strings.Contains(msg, "secret") {
		t.Errorf("error field %q: want the error's text without the URL", msg)
	}
}

func TestLogsBreakerStateChanges(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(503), status(200))
	fc := clock.NewFake(time.Unix(1000, 0))
	tr := transport.New(base(t), r.tel.Transport(), transport.WithMaxAttempts(1), transport.WithClock(fc),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: breakerOpen}))
	mustGet(t, tr, srv.URL)
	if _, err := get(t, tr, srv.URL); err == nil {
		t.Fatal("want a rejection")
	}
	fc.Advance(breakerOpen)
	mustGet(t, tr, srv.URL)

	var got []string
	for _, l := range lines(r.logs, MsgBreakerState) {
		f := l.ContextMap()
		got = append(got, fmt.Sprintf("%v %v->%v %v:%v", l.Level, f["gotry.breaker.from"], f["gotry.breaker.to"], f["server.address"], f["server.port"] != nil))
	}
	want := []string{"error closed->open 127.0.0.1:true", "info open->half-open 127.0.0.1:true", "info half-open->closed 127.0.0.1:true"}
	if !equal(got, want) {
		t.Errorf("breaker lines %q, want %q", got, want)
	}
	// Each transition is logged in the trace of the request that moved it.
	for _, l := range lines(r.logs, MsgBreakerState) {
		if id, _ := l.ContextMap()["trace_id"].(string); id == "" {
			t.Errorf("breaker line %v has no trace_id", l.ContextMap())
		}
	}
	rejected := lines(r.logs, MsgBreakerReject)
	if len(rejected) != 1 {
		t.Fatalf("%d rejection lines, want 1", len(rejected))
	}
	wantFields(t, "rejection", rejected[0].ContextMap(), map[string]any{"gotry.attempt": int64(0), "gotry.breaker.state": "open"})
	gaveUp := lines(r.logs, MsgGaveUp)
	if len(gaveUp) != 2 || gaveUp[1].ContextMap()["error.type"] != ErrorTypeCircuitOpen {
		t.Errorf("give-up lines %v, want the rejection with error.type circuit_open", gaveUp)
	}
}

// At most one budget line per second per transport, counting the rest.
func TestLogsBudgetRateLimited(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	r := newRig(t, WithClock(fc))
	h := r.tel.hooks("", false)
	req, _ := http.NewRequest(http.MethodGet, "http://api.example:8080/", nil)
	ctx := h.OnCallStart(context.Background(), resilience.CallStartEvent{Event: resilience.Event{Subject: req}, Start: fc.Now()})
	refuse := func() {
		h.OnBudgetExhausted(resilience.BudgetEvent{Event: resilience.Event{Context: ctx, Subject: req}, Attempt: 2, Kind: resilience.KindHedge})
	}
	refuse()
	refuse()
	refuse()
	fc.Advance(999 * time.Millisecond)
	refuse()
	fc.Advance(time.Millisecond)
	refuse()

	var got []string
	for _, l := range lines(r.logs, MsgBudget) {
		f := l.ContextMap()
		got = append(got, fmt.Sprintf("%v %v %v %v", l.Level, f["gotry.suppressed"], f["gotry.attempt.kind"], f["server.address"]))
	}
	if want := []string{"warn 0 hedge api.example", "warn 3 hedge api.example"}; !equal(got, want) {
		t.Errorf("budget lines %q, want %q", got, want)
	}
	// Another transport has its own limiter.
	h2 := r.tel.hooks("", false)
	ctx2 := h2.OnCallStart(context.Background(), resilience.CallStartEvent{Event: resilience.Event{Subject: req}, Start: fc.Now()})
	h2.OnBudgetExhausted(resilience.BudgetEvent{Event: resilience.Event{Context: ctx2, Subject: req}, Attempt: 2, Kind: resilience.KindRetry})
	if n := len(lines(r.logs, MsgBudget)); n != 3 {
		t.Errorf("%d budget lines after a second transport's refusal, want 3", n)
	}
}

// recordHandler is a slog.Handler that keeps every record.
type recordHandler struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.recs = append(*h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// The slog adapter writes the zap adapter's lines: same messages, levels,
// keys and values.
func TestLogsSlogMatchesZap(t *testing.T) {
	var recs []slog.Record
	var mu sync.Mutex
	r := newRig(t, WithSlogLogger(slog.New(recordHandler{&mu, &recs})))
	srv := newServer(t, status(503), status(429, "Retry-After", "0"), status(200))
	tr := transport.New(base(t), r.tel.Transport(),
		transport.WithBackoff(resilience.Constant(time.Millisecond)))
	mustGet(t, tr, srv.URL)

	var fromZap, fromSlog []string
	for _, l := range r.logs.AllUntimed() {
		var kv []string
		for k, v := range l.ContextMap() {
			kv = append(kv, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(kv)
		fromZap = append(fromZap, strings.ToUpper(l.Level.String())+" "+l.Message+" "+strings.Join(kv, " "))
	}
	mu.Lock()
	for _, rec := range recs {
		var kv []string
		rec.Attrs(func(a slog.Attr) bool {
			kv = append(kv, fmt.Sprintf("%s=%v", a.Key, a.Value.Any()))
			return true
		})
		sort.Strings(kv)
		fromSlog = append(fromSlog, rec.Level.String()+" "+rec.Message+" "+strings.Join(kv, " "))
	}
	mu.Unlock()
	if len(fromZap) < 5 {
		t.Fatalf("only %d zap lines", len(fromZap))
	}
	if !equal(fromZap, fromSlog) {
		t.Errorf("zap and slog differ:\nzap:\n%s\nslog:\n%s", strings.Join(fromZap, "\n"), strings.Join(fromSlog, "\n"))
	}
}

// Below the logger's level, hooks build no fields: a disabled logger costs
// what no logger costs.
func TestLogsDisabledLevelAllocatesNothing(t *testing.T) {
	measure := func(opts ...Option) float64 {
		tel := New(append([]Option{WithTracerProvider(nil)}, opts...)...)
		h := tel.hooks("", false)
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/", nil)
		ctx := h.OnCallStart(context.Background(), resilience.CallStartEvent{Event: resilience.Event{Subject: req}, Start: time.Now()})
		return testing.AllocsPerRun(100, func() {
			h.OnHedge(resilience.HedgeEvent{Event: resilience.Event{Context: ctx, Subject: req}, Attempt: 2, InFlight: 2})
		})
	}
	none := measure()
	off := measure(WithLogger(zap.NewNop()), WithSlogLogger(slog.New(slog.DiscardHandler)))
	if off != none {
		t.Errorf("a hedge costs %v allocations with disabled loggers, %v without loggers", off, none)
	}
}

// In an outage, give-up lines are aggregated per host and reason: the first
// is written at once, then at most one per interval, counting the rest.
func TestLogsGiveUpsAggregated(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	r := newRig(t, WithClock(fc))
	h := r.tel.hooks("", false)
	giveUp := func(host string, reason resilience.EndReason) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
		ctx := h.OnCallStart(context.Background(), resilience.CallStartEvent{Event: resilience.Event{Subject: req}, Start: fc.Now()})
		h.OnCallEnd(resilience.CallEndEvent{Event: resilience.Event{Context: ctx, Subject: req}, Start: fc.Now(),
			Reason: reason, Err: &resilience.CircuitOpenError{Key: host, State: resilience.BreakerOpen}})
	}
	for range 200 {
		giveUp("pay.example", resilience.ReasonCircuitOpen)
	}
	giveUp("pay.example", resilience.ReasonBudgetExhausted) // another reason: its own first line
	giveUp("shop.example", resilience.ReasonCircuitOpen)    // another host: its own first line
	fc.Advance(999 * time.Millisecond)
	giveUp("pay.example", resilience.ReasonCircuitOpen)
	fc.Advance(time.Millisecond)
	giveUp("pay.example", resilience.ReasonCircuitOpen)

	var got []string
	for _, l := range lines(r.logs, MsgGaveUp) {
		f := l.ContextMap()
		got = append(got, fmt.Sprintf("%v %v %v %v", l.Level, f["server.address"], f["gotry.reason"], f["gotry.suppressed"]))
	}
	want := []string{
		"error pay.example circuit_open 0",
		"error pay.example budget_exhausted 0",
		"error shop.example circuit_open 0",
		"error pay.example circuit_open 200",
	}
	if !equal(got, want) {
		t.Errorf("give-up lines %q, want %q", got, want)
	}
}

// WithGiveUpLogInterval(0) writes every give-up line, without a count.
func TestLogsGiveUpsNotAggregated(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	r := newRig(t, WithClock(fc), WithGiveUpLogInterval(0))
	h := r.tel.hooks("", false)
	req, _ := http.NewRequest(http.MethodGet, "http://pay.example/", nil)
	for range 5 {
		ctx := h.OnCallStart(context.Background(), resilience.CallStartEvent{Event: resilience.Event{Subject: req}, Start: fc.Now()})
		h.OnCallEnd(resilience.CallEndEvent{Event: resilience.Event{Context: ctx, Subject: req}, Start: fc.Now(),
			Reason: resilience.ReasonCircuitOpen, Err: resilience.ErrCircuitOpen})
	}
	ls := lines(r.logs, MsgGaveUp)
	if len(ls) != 5 {
		t.Fatalf("%d give-up lines, want 5", len(ls))
	}
	if _, ok := ls[0].ContextMap()["gotry.suppressed"]; ok {
		t.Errorf("unaggregated line has gotry.suppressed")
	}
}
