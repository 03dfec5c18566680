package demo

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/MrVSiK/gotry/telemetry"
)

var testTrace = trace.TraceID{1, 2, 3}

func sc(id byte) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: testTrace, SpanID: trace.SpanID{id}, TraceFlags: trace.FlagsSampled})
}

// retriedTrace is a request whose first attempt got a 503, slept 40ms and
// succeeded on the retry, as the telemetry package records it.
func retriedTrace() traceView {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	stubs := tracetest.SpanStubs{
		{Name: "gotry PUT", SpanContext: sc(1), SpanKind: trace.SpanKindInternal, StartTime: ms(0), EndTime: ms(50),
			Attributes: []attribute.KeyValue{semconv.HTTPRequestMethodKey.String("PUT"), semconv.ServerAddressKey.String("payments"),
				telemetry.KeyAttempts.Int(2), telemetry.KeyRetries.Int(1),
				keyBackoffTotal.Float64(0.04), telemetry.KeyReason.String("success"), semconv.HTTPResponseStatusCodeKey.Int(200)},
			Events: []sdktrace.Event{{Name: eventRetry, Time: ms(2), Attributes: []attribute.KeyValue{
				keyAttempt.Int(1), telemetry.KeyRetryTrigger.String("5xx"),
				telemetry.KeyDelaySource.String(telemetry.DelayBackoff), keyBackoffDelay.Float64(0.04)}}}},
		{Name: "PUT", SpanContext: sc(2), Parent: sc(1), SpanKind: trace.SpanKindClient, StartTime: ms(0), EndTime: ms(45),
			Attributes: []attribute.KeyValue{semconv.URLFullKey.String("http://payments/payments/7"),
				telemetry.KeyAttemptOutcome.String("retryable"), semconv.HTTPResponseStatusCodeKey.Int(503)}}, // the first attempt: no kind
		{Name: "PUT", SpanContext: sc(3), Parent: sc(2), SpanKind: trace.SpanKindServer, StartTime: ms(1), EndTime: ms(2),
			Attributes: []attribute.KeyValue{semconv.ServerAddressKey.String("payments"), semconv.HTTPResponseStatusCodeKey.Int(503)}},
		{Name: telemetry.BackoffSpanName, SpanContext: sc(4), Parent: sc(1), StartTime: ms(2), EndTime: ms(42),
			Attributes: []attribute.KeyValue{keyBackoffDelay.Float64(0.04)}},
		{Name: "PUT", SpanContext: sc(5), Parent: sc(1), SpanKind: trace.SpanKindClient, StartTime: ms(42), EndTime: ms(50),
			Attributes: []attribute.KeyValue{semconv.URLFullKey.String("http://payments/payments/7"), semconv.HTTPRequestResendCountKey.Int(1),
				telemetry.KeyAttemptKind.String("retry"), telemetry.KeyAttemptOutcome.String("success"), semconv.HTTPResponseStatusCodeKey.Int(200)}},
	}
	return traceView{spans: stubs.Snapshots(), heads: map[trace.SpanID]time.Duration{{2}: 2 * time.Millisecond}}
}

func TestRenderWaterfall(t *testing.T) {
	lines := renderWaterfall(retriedTrace(), 20)
	out := strings.Join(lines, "\n")
	t.Log("\n" + out)
	want := []string{
		"PUT http://payments/payments/7 → 200 success · 2 attempts (1 retry, 0 hedges) · backoff 40ms · 50ms",
		"gotry PUT payments → 200 success",
		"├─ PUT #1 initial → retryable 503",
		"│  └─ server payments PUT → 503",
		"├─ ◆ #1 got 5xx → wait 40ms (backoff)",
		"├─ backoff 40ms",
		"└─ PUT #2 retry resend=1 → success 200",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("waterfall lacks %q", w)
		}
	}
	// Rows appear in time order under the request span.
	for i, w := range want[2:] {
		if j := strings.Index(out, w); i > 0 && j < strings.Index(out, want[2+i-1]) {
			t.Errorf("%q comes before %q", w, want[2+i-1])
		}
	}
}

// An attempt's bar is solid until its headers and light while its span stays
// open; an event is one diamond at its offset.
func TestRenderWaterfallBars(t *testing.T) {
	lines := renderWaterfall(retriedTrace(), 20)
	bars := map[string]string{}
	for _, l := range lines {
		if i := strings.Index(l, "|"); i >= 0 && strings.Count(l, "|") == 2 {
			label := strings.TrimSpace(l[:i])
			bars[label[strings.LastIndex(label, "  ")+2:]] = l[i+1 : strings.LastIndex(l, "|")]
		}
	}
	tests := []struct{ label, bar string }{
		{"gotry PUT payments → 200 success", "████████████████████"},
		{"├─ PUT #1 initial → retryable 503", "█░░░░░░░░░░░░░░░░░  "},
		{"├─ ◆ #1 got 5xx → wait 40ms (backoff)", "◆                   "},
		{"├─ backoff 40ms", "█████████████████   "},
		{"└─ PUT #2 retry resend=1 → success 200", "                ████"},
	}
	for _, tt := range tests {
		t.Run(tt.label, func(t *testing.T) {
			got, ok := bars[tt.label]
			if !ok {
				t.Fatalf("no row %q in %q", tt.label, bars)
			}
			if got != tt.bar {
				t.Fatalf("bar %q, want %q", got, tt.bar)
			}
		})
	}
}

func TestRenderWaterfallEmpty(t *testing.T) {
	if lines := renderWaterfall(traceView{}, 20); lines != nil {
		t.Fatalf("empty trace rendered %q", lines)
	}
}

// The recorder keeps the request with the most attempts of the run, even
// after its trace is evicted from the recent ones.
func TestSpanRecorderBest(t *testing.T) {
	r := newSpanRecorder(2)
	for _, s := range retriedTrace().spans {
		r.OnEnd(s)
	}
	for i := byte(10); i < 14; i++ {
		one := tracetest.SpanStub{Name: "gotry GET", SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{i}, SpanID: trace.SpanID{i}, TraceFlags: trace.FlagsSampled}),
			StartTime: time.Unix(1000, 0), EndTime: time.Unix(1001, 0),
			Attributes: []attribute.KeyValue{telemetry.KeyAttempts.Int(1)}}
		r.OnEnd(one.Snapshot())
	}
	if n := len(r.traces); n != 2 {
		t.Fatalf("recorder holds %d traces, want 2", n)
	}
	best, ok := r.pickBest()
	if !ok || len(best.spans) != 5 {
		t.Fatalf("pickBest = %d spans, %v; want the 5-span retried trace", len(best.spans), ok)
	}
	if _, ok := r.pickRecent(time.Unix(1002, 0), 10*time.Second, 0); ok {
		t.Fatalf("pickRecent found a multi-attempt trace among single attempts")
	}
}
