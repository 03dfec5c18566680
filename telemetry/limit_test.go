package telemetry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry/internal/traffic"
	"github.com/MrVSiK/gotry/transport"
)

// eventNamed returns the attributes of the span event called name.
func eventNamed(s sdktrace.ReadOnlySpan, name string) ([]attribute.KeyValue, bool) {
	for _, e := range s.Events() {
		if e.Name == name {
			return e.Attributes, true
		}
	}
	return nil, false
}

// TestOverloadShedIsObservable: a request the concurrency limit sheds shows
// everywhere a user looks: its request span ends "overloaded" (gotry.reason
// and error.type) with a gotry.limit.shed event saying the limit and what
// was in flight, and no attempt span; gotry.limit.shed counts it by kind and
// criticality, gotry.retries.suppressed by the reason "overloaded"; the
// gauges show the host's limit against its in-flight count; a shed line and
// a give-up line are logged.
func TestOverloadShedIsObservable(t *testing.T) {
	r := newRig(t)
	b := traffic.NewHoldBase()
	tr := transport.New(b, r.tel.Transport(Name("pay")), transport.WithConcurrencyLimit(traffic.OneAtATime))
	held := traffic.Send(t, tr, "http://pay.test/hold")
	traffic.Await(t, b.Held, "the held request to reach the base")

	gauges := func() map[string]float64 {
		rm := r.collect(t)
		_, cur := find(t, rm, MetricLimitCurrent)
		_, in := find(t, rm, MetricLimitInFlight)
		out := map[string]float64{}
		for k, v := range sums(cur) {
			out["limit "+k] = v
		}
		for k, v := range sums(in) {
			out["in_flight "+k] = v
		}
		return out
	}
	if got, want := gauges(), map[string]float64{
		"limit gotry.transport=pay,server.address=pay.test":     1,
		"in_flight gotry.transport=pay,server.address=pay.test": 1,
	}; !maps.Equal(got, want) {
		t.Errorf("gauges while one request is held: %v, want %v", got, want)
	}

	err := traffic.Await(t, traffic.Send(t, tr, "http://pay.test/item"), "the shed request")
	if !errors.Is(err, resilience.ErrOverloaded) {
		t.Fatalf("request at the limit: %v, want one matching ErrOverloaded", err)
	}
	close(b.Release)
	if err := traffic.Await(t, held, "the held request"); err != nil {
		t.Fatal(err)
	}

	var shed sdktrace.ReadOnlySpan
	for _, s := range r.waitEnded(t, 3) { // the held request and its attempt, the shed request
		if s.Name() == "gotry GET" && attrs(s.Attributes())[KeyReason].AsString() == "overloaded" {
			shed = s
		}
	}
	if shed == nil {
		t.Fatalf("no request span ended overloaded:\n%s", tree(r.rec.Ended()))
	}
	if got := attrs(shed.Attributes())[KeyErrorType].AsString(); got != ErrorTypeOverloaded {
		t.Errorf("shed request span error.type = %q, want %q", got, ErrorTypeOverloaded)
	}
	ev, ok := eventNamed(shed, EventLimitShed)
	if !ok {
		t.Fatalf("shed request span has no %s event: %v", EventLimitShed, shed.Events())
	}
	want(t, "shed event", ev, map[attribute.Key]any{
		keyAttempt: int64(1), KeyAttemptKind: "initial", KeyCriticality: "default",
		KeyLimitCurrent: int64(1), KeyLimitInFlight: int64(1), KeyLimitWaited: 0.0,
	})
	for _, s := range r.rec.Ended() {
		if s.Parent().SpanID() == shed.SpanContext().SpanID() {
			t.Errorf("shed request has a child span %q: nothing was sent", s.Name())
		}
	}

	rm := r.collect(t)
	_, ps := find(t, rm, MetricLimitShed)
	if got, want := sums(ps), map[string]float64{
		"gotry.attempt.kind=initial,gotry.criticality=default,gotry.transport=pay,server.address=pay.test": 1,
	}; !maps.Equal(got, want) {
		t.Errorf("%s = %v, want %v", MetricLimitShed, got, want)
	}
	_, ps = find(t, rm, MetricRetriesSuppressed)
	if got := sums(ps); got["gotry.reason=overloaded,gotry.transport=pay,http.request.method=GET,server.address=pay.test,server.port=P"] != 1 {
		t.Errorf("%s = %v, want one request given up as overloaded", MetricRetriesSuppressed, got)
	}
	if got, want := gauges(), map[string]float64{
		"limit gotry.transport=pay,server.address=pay.test":     1,
		"in_flight gotry.transport=pay,server.address=pay.test": 0,
	}; !maps.Equal(got, want) {
		t.Errorf("gauges once idle: %v, want %v", got, want)
	}

	ls := lines(r.logs, MsgShed)
	if len(ls) != 1 {
		t.Fatalf("%d shed lines, want 1", len(ls))
	}
	wantFields(t, "shed line", ls[0].ContextMap(), map[string]any{
		"server.address": "pay.test", "gotry.attempt": int64(1), "gotry.attempt.kind": "initial",
		"gotry.criticality": "default", "gotry.limit.current": int64(1), "gotry.limit.in_flight": int64(1),
		"gotry.limit.waited": 0.0, "gotry.suppressed": int64(0),
	})
	if ls[0].Level.String() != "warn" {
		t.Errorf("shed line at %s, want warn", ls[0].Level)
	}
	gave := lines(r.logs, MsgGaveUp)
	if len(gave) != 1 || gave[0].ContextMap()["gotry.reason"] != "overloaded" {
		t.Errorf("give-up lines %v, want one with gotry.reason overloaded", gave)
	}
}

// TestOverloadWaitIsASpanEvent: a request that waited for a permit and got
// one has a gotry.limit.wait event on its request span, with how long it
// waited by the transport's clock.
func TestOverloadWaitIsASpanEvent(t *testing.T) {
	r := waitForPermit(t)
	var found bool
	for _, s := range r.waitEnded(t, 4) {
		if ev, ok := eventNamed(s, EventLimitWait); ok {
			found = true
			want(t, "wait event", ev, map[attribute.Key]any{
				KeyCriticality: "default", KeyLimitCurrent: int64(1), KeyLimitInFlight: int64(1), KeyLimitWaited: 0.03,
			})
		}
	}
	if !found {
		t.Errorf("no span has a %s event:\n%s", EventLimitWait, tree(r.rec.Ended()))
	}
	if n := len(lines(r.logs, MsgShed)); n != 0 {
		t.Errorf("%d shed lines for a request that got its permit", n)
	}
}

// waitForPermit sends two requests through a limit of one, on a fake
// clock: the second waits 30ms for the first's permit, then is sent.
func waitForPermit(t *testing.T) *rig {
	t.Helper()
	fc := clock.NewFake(time.Unix(1000, 0))
	r := newRig(t, WithClock(fc))
	b := traffic.NewHoldBase()
	cfg := traffic.OneAtATime
	cfg.MaxWait = time.Second
	tr := transport.New(b, r.tel.Transport(), transport.WithClock(fc), transport.WithConcurrencyLimit(cfg))
	held := traffic.Send(t, tr, "http://pay.test/hold")
	traffic.Await(t, b.Held, "the held request to reach the base")
	armed := fc.Armed()
	waiter := traffic.Send(t, tr, "http://pay.test/next")
	if !fc.WaitForArmed(armed+1, 10*time.Second) {
		t.Fatal("the second request never started waiting")
	}
	fc.Advance(30 * time.Millisecond)
	close(b.Release)
	if err := traffic.Await(t, held, "the held request"); err != nil {
		t.Fatal(err)
	}
	if err := traffic.Await(t, waiter, "the waiting request"); err != nil {
		t.Fatalf("waiting request: %v, want it sent once the permit was free", err)
	}
	return r
}

// TestLogsShedAggregated: shed lines are aggregated per host and attempt
// kind at the give-up interval, counting the dropped ones.
func TestLogsShedAggregated(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	r := newRig(t, WithClock(fc))
	h := r.tel.hooks("", false)
	shed := func(host string, k resilience.AttemptKind) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
		ctx := h.OnCallStart(context.Background(), resilience.CallStartEvent{Event: resilience.Event{Subject: req}, Start: fc.Now()})
		h.OnShed(resilience.ShedEvent{Event: resilience.Event{Context: ctx, Subject: req}, Attempt: 1, Kind: k, Limit: 8, InFlight: 8})
	}
	for range 100 {
		shed("pay.example", resilience.KindInitial)
	}
	shed("pay.example", resilience.KindHedge)    // another kind: its own first line
	shed("shop.example", resilience.KindInitial) // another host: its own first line
	fc.Advance(time.Second)
	shed("pay.example", resilience.KindInitial)

	var got []string
	for _, l := range lines(r.logs, MsgShed) {
		f := l.ContextMap()
		got = append(got, fmt.Sprintf("%v %v %v", f["server.address"], f["gotry.attempt.kind"], f["gotry.suppressed"]))
	}
	want := []string{
		"pay.example initial 0",
		"pay.example hedge 0",
		"shop.example initial 0",
		"pay.example initial 99",
	}
	if !equal(got, want) {
		t.Errorf("shed lines %q, want %q", got, want)
	}
}

// fixedStats is a gauge source with a given snapshot.
type fixedStats struct{ st resilience.Stats }

func (f *fixedStats) Stats() resilience.Stats { return f.st }

// TestLimitGaugesPerAddress: the limit's gauges come only from a limited
// source, one series per address, the ports of one address summed (each has
// a limit of its own); a retrier's are labelled by operation.
func TestLimitGaugesPerAddress(t *testing.T) {
	r := newRig(t)
	unlimited := &fixedStats{resilience.Stats{Hosts: []resilience.HostStats{{Key: "a.test"}}}}
	limited := &fixedStats{resilience.Stats{Limited: true, Hosts: []resilience.HostStats{
		{Key: "a.test", Limit: 10, InFlight: 4},
		{Key: "a.test:8443", Limit: 6, InFlight: 6},
		{Key: "b.test", Limit: 20, InFlight: 0},
	}}}
	ops := &fixedStats{resilience.Stats{Limited: true, Hosts: []resilience.HostStats{{Key: "jobs", Limit: 3, InFlight: 2}}}}
	r.tel.observe(gaugeSource{name: "u", get: func() statsSource { return unlimited }})
	r.tel.observe(gaugeSource{name: "l", get: func() statsSource { return limited }})
	r.tel.observe(gaugeSource{op: true, get: func() statsSource { return ops }})
	rm := r.collect(t)
	_, cur := find(t, rm, MetricLimitCurrent)
	_, in := find(t, rm, MetricLimitInFlight)
	if got, want := sums(cur), map[string]float64{
		"gotry.transport=l,server.address=a.test": 16,
		"gotry.transport=l,server.address=b.test": 20,
		"gotry.operation=jobs":                    3,
	}; !maps.Equal(got, want) {
		t.Errorf("%s = %v, want %v", MetricLimitCurrent, got, want)
	}
	if got, want := sums(in), map[string]float64{
		"gotry.transport=l,server.address=a.test": 10,
		"gotry.transport=l,server.address=b.test": 0,
		"gotry.operation=jobs":                    2,
	}; !maps.Equal(got, want) {
		t.Errorf("%s = %v, want %v", MetricLimitInFlight, got, want)
	}
	runtime.KeepAlive(unlimited)
}
