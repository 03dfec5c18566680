package clock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

// NowFrom on the real clock is a reading between two time.Now calls around
// it, with a monotonic reading (so Sub against other readings is exact);
// on any other clock it is that clock's Now.
func TestNowFrom(t *testing.T) {
	start := time.Now()
	time.Sleep(2 * time.Millisecond)
	before := time.Now()
	got := clock.NowFrom(clock.Real(), start)
	after := time.Now()
	if got.Before(before) || got.After(after) {
		t.Errorf("NowFrom = %v, want within [%v, %v]", got, before, after)
	}
	if !strings.Contains(got.String(), " m=") { // Time.String shows a monotonic reading as "m=±…"
		t.Errorf("NowFrom = %v: no monotonic reading", got)
	}
	if d := got.Sub(start); d < 2*time.Millisecond {
		t.Errorf("NowFrom - start = %v, want ≥ 2ms", d)
	}

	fc := fakeclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t0 := fc.Now()
	fc.Advance(time.Second)
	if got, want := clock.NowFrom(fc, t0), t0.Add(time.Second); !got.Equal(want) {
		t.Errorf("fake clock: NowFrom = %v, want %v", got, want)
	}
}
