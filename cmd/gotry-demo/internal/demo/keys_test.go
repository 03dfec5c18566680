package demo

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/transport"
)

// TestDemoKeysAreTelemetrys: every key the demo declares for itself is one
// that telemetry writes on a span, a span event or a log line, so the
// waterfall and the log view never look for a name telemetry does not use.
func TestDemoKeysAreTelemetrys(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	core, logs := observer.New(zapcore.DebugLevel)
	tel := telemetry.New(telemetry.WithTracerProvider(tp), telemetry.WithLogger(zap.New(core)))

	var n atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1: // retried
			w.WriteHeader(http.StatusServiceUnavailable)
		case 3: // outrun by a hedge
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case 5: // opens the breaker
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	send := func(rt http.RoundTripper) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	send(transport.New(base, tel.Transport(), transport.WithBackoff(resilience.Constant(time.Millisecond))))
	send(transport.New(base, tel.Transport(), transport.WithHedging(20*time.Millisecond, 1), transport.WithMaxAttempts(2)))
	fc := clock.NewFake(time.Unix(1000, 0))
	probed := transport.New(base, tel.Transport(), transport.WithClock(fc), transport.WithMaxAttempts(1),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: time.Second}))
	send(probed) // 503: opens
	fc.Advance(time.Second)
	send(probed) // the half-open probe

	seen := map[attribute.Key]bool{}
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			seen[kv.Key] = true
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				seen[kv.Key] = true
			}
		}
	}
	for _, l := range logs.All() {
		for _, f := range l.Context {
			seen[attribute.Key(f.Key)] = true
		}
	}
	for _, k := range []attribute.Key{keyAttempt, keyAttemptDuration, keyRequestDuration, keyBackoffTotal,
		keyBackoffDelay, keyHedgeInFlight} {
		if !seen[k] {
			t.Errorf("the demo reads %s, which telemetry wrote nowhere", k)
		}
	}
}
