package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/MrVSiK/gotry/telemetry/internal/traffic"
)

// rig is a Telemetry wired to in-memory exporters.
type rig struct {
	tel    *Telemetry
	rec    *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	logs   *observer.ObservedLogs
	prop   propagation.TextMapPropagator
}

func newRig(t *testing.T, opts ...Option) *rig {
	t.Helper()
	r := &rig{rec: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), prop: propagation.TraceContext{}}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	core, logs := observer.New(zapcore.DebugLevel)
	r.logs = logs
	base := []Option{WithTracerProvider(r.tp), WithMeterProvider(r.mp), WithPropagators(r.prop), WithLogger(zap.New(core))}
	r.tel = New(append(base, opts...)...)
	t.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = r.mp.Shutdown(context.Background())
	})
	return r
}

// collect reads the metrics once.
func (r *rig) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// waitEnded waits until n spans have ended (hedge losers end on their own
// goroutine, possibly after RoundTrip returned).
func (r *rig) waitEnded(t *testing.T, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ended := r.rec.Ended()
		if len(ended) >= n || time.Now().After(deadline) {
			if len(ended) != n {
				t.Fatalf("ended spans: got %d, want %d:\n%s", len(ended), n, tree(ended))
			}
			return ended
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tree renders spans as an indented tree, children in start order:
// "name kind" per line. Spans whose parent is not among them are roots.
func tree(spans []sdktrace.ReadOnlySpan) string {
	byParent := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent().SpanID(); p.IsValid() && ids[p] {
			byParent[p] = append(byParent[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var walk func(ss []sdktrace.ReadOnlySpan, depth int)
	walk = func(ss []sdktrace.ReadOnlySpan, depth int) {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].StartTime().Before(ss[j].StartTime()) })
		for _, s := range ss {
			fmt.Fprintf(&b, "%s%s %s\n", strings.Repeat("  ", depth), s.Name(), s.SpanKind())
			walk(byParent[s.SpanContext().SpanID()], depth+1)
		}
	}
	walk(roots, 0)
	return b.String()
}

// ordered returns the spans named name in start order.
func ordered(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartTime().Before(out[j].StartTime()) })
	return out
}

// attrs returns a span's attributes by key.
func attrs(kv []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, a := range kv {
		m[a.Key] = a.Value
	}
	return m
}

// want checks that kv has exactly the given values for the given keys; a
// nil value asserts that the key is absent.
func want(t *testing.T, what string, kv []attribute.KeyValue, exp map[attribute.Key]any) {
	t.Helper()
	m := attrs(kv)
	for k, v := range exp {
		got, ok := m[k]
		if v == nil {
			if ok {
				t.Errorf("%s: %s = %v, want absent", what, k, got.String())
			}
			continue
		}
		if !ok {
			t.Errorf("%s: %s absent, want %v", what, k, v)
			continue
		}
		if got.AsInterface() != v {
			t.Errorf("%s: %s = %#v, want %#v", what, k, got.AsInterface(), v)
		}
	}
}

// server is an httptest server on 127.0.0.1 that answers with a script of
// handlers, one per request (the last repeats), and records each request's
// traceparent.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	parents []string
	n       int
}

func newServer(t *testing.T, script ...http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		i := s.n
		s.n++
		s.parents = append(s.parents, r.Header.Get("Traceparent"))
		s.mu.Unlock()
		script[min(i, len(script)-1)](w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) traceparents() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.parents...)
}

func (s *server) port(t *testing.T) int {
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

// get sends a GET through rt and returns the response, body unread.
func get(t *testing.T, rt http.RoundTripper, u string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt.RoundTrip(req)
}

// drain reads and closes a response body.
func drain(t *testing.T, resp *http.Response) {
	t.Helper()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// traceparent is the W3C header value of a sampled span.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
}

// The test traffic shared with promexport's tests (internal/traffic).
var (
	status  = traffic.Status
	stall   = traffic.Stall
	base    = traffic.Base
	mustGet = traffic.MustGet
)

// breakerOpen is the tests' breaker OpenDuration, passed on a fake clock.
const breakerOpen = traffic.BreakerOpen

// wantTraceparents checks that the server saw, in order, exactly the
// traceparent of each attempt span (the span the server's work hangs under).
func wantTraceparents(t *testing.T, srv *server, atts []sdktrace.ReadOnlySpan) {
	t.Helper()
	parents := srv.traceparents()
	if len(parents) != len(atts) {
		t.Fatalf("server saw %d requests, want %d (one per attempt span)", len(parents), len(atts))
	}
	for i, s := range atts {
		if want := traceparent(s.SpanContext()); parents[i] != want {
			t.Errorf("attempt %d: server saw traceparent %q, want the attempt span's %q", i+1, parents[i], want)
		}
	}
}

// roundTripperFunc is a RoundTripper made of a func.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// settled reports whether every span started so far has ended.
func (r *rig) settled() bool { return len(r.rec.Started()) == len(r.rec.Ended()) }

// waitFor polls cond until it holds, failing the test after 5s (hedge
// losers end on goroutines of their own, after RoundTrip returned).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
