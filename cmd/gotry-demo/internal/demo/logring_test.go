package demo

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/MrVSiK/gotry/telemetry"
)

// stepClock is a zapcore.Clock whose time the test sets.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time                         { return c.now }
func (c *stepClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

func TestRingCoreRateLimits(t *testing.T) {
	ring := newLogRing(16)
	clk := &stepClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	l := zap.New(ringCore{ring: ring}, zap.WithClock(clk))

	l.Info(telemetry.MsgRetry) // info, not a breaker move: not kept
	for range 5 {
		l.Error(telemetry.MsgGaveUp, zap.String("gotry.reason", "circuit_open"), zap.Int64("gotry.retries", 0))
	}
	l.Info(telemetry.MsgBreakerState, zap.String("gotry.breaker.to", "half-open"))
	l.Error(telemetry.MsgBreakerState, zap.String("gotry.breaker.to", "open"))
	clk.now = clk.now.Add(time.Second)
	l.Error(telemetry.MsgGaveUp, zap.Float64("gotry.request.duration", 0.25))

	got, seq := ring.since(0)
	want := []string{
		"03:04:05.000 ERROR gave up reason=circuit_open",
		"03:04:05.000 INFO  circuit breaker state changed breaker.to=half-open",
		"03:04:05.000 ERROR circuit breaker state changed breaker.to=open",
		"03:04:06.000 ERROR gave up request.duration=250ms (+4 like it)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ring holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if more, _ := ring.since(seq); len(more) != 0 {
		t.Fatalf("since(last) = %q, want nothing", more)
	}
}

// The ring keeps the newest lines once full.
func TestLogRingWraps(t *testing.T) {
	r := newLogRing(3)
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		r.add(s)
	}
	if got := strings.Join(r.last(10), ""); got != "cde" {
		t.Fatalf("last = %q, want cde", got)
	}
	if got, _ := r.since(3); strings.Join(got, "") != "de" {
		t.Fatalf("since(3) = %q, want de", got)
	}
}
