package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestQuickRun runs every scenario in quick mode, so the comparison keeps
// compiling and working. It checks what the scenarios count, never timings.
func TestQuickRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	res, err := Run(&out, Config{Quick: true})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	for _, h := range []string{"in-memory base", "loopback server", "Tail latency", "Random stalls", "with a latency shift", "Lognormal latencies", "Bimodal latencies", "Stalls in bursts", "Latency shift", "total outage", "Recovery", "Scaling", "Overload", "Fleets in an outage", "A chain of services", "A slow, low-rate host", "Concurrency limit, many clients", "Independent failures", "Goals"} {
		if !strings.Contains(out.String(), h) {
			t.Errorf("output has no %q section:\n%s", h, out.String())
		}
	}

	t.Run("overhead measured every candidate", func(t *testing.T) {
		for bi := range res.Overhead.Bases {
			for mi := range res.Overhead.Modes {
				rows := res.Overhead.Rows[bi][mi]
				if want := 4 + len(peers); len(rows) != want { // bare, three gotry setups, the peers
					t.Fatalf("%d rows, want %d", len(rows), want)
				}
				for _, r := range rows {
					if !(r.NsPerOp > 0) || math.IsInf(r.Ratio, 0) || math.IsNaN(r.Ratio) {
						t.Errorf("%s %s %s: ns/op %v ratio %v", res.Overhead.Bases[bi], res.Overhead.Modes[mi], r.Name, r.NsPerOp, r.Ratio)
					}
				}
			}
		}
	})

	t.Run("hedging sent every request and never lost load", func(t *testing.T) {
		for _, r := range res.Hedging.Rows {
			if r.Client != int64(res.Hedging.Requests) || r.Errors != 0 {
				t.Errorf("%s: %d client requests, %d errors; want %d, 0", r.Name, r.Client, r.Errors, res.Hedging.Requests)
			}
			if r.Server < r.Client {
				t.Errorf("%s: server saw %d requests, fewer than the %d sent", r.Name, r.Server, r.Client)
			}
		}
	})

	t.Run("shift: every candidate sent requests without errors; the adaptive one reports its delay", func(t *testing.T) {
		if len(res.Shift.Rows) != 3 {
			t.Fatalf("%d rows, want 3", len(res.Shift.Rows))
		}
		for _, r := range res.Shift.Rows {
			if r.Errors != 0 || len(r.ExtraLoad) == 0 || r.P99After == 0 {
				t.Errorf("%s: %d errors, extra load %v, p99 after %v", r.Name, r.Errors, r.ExtraLoad, r.P99After)
			}
		}
		if len(res.Shift.Rows[0].Delays) == 0 {
			t.Errorf("the adaptive candidate reported no delays")
		}
	})

	t.Run("random latencies: every candidate sent every request without errors, none lost load", func(t *testing.T) {
		if len(res.Random) != len(randomScenarios) {
			t.Fatalf("%d random-latency scenarios, want %d", len(res.Random), len(randomScenarios))
		}
		for _, sc := range res.Random {
			for _, r := range sc.Rows {
				if r.Client != int64(sc.Requests*sc.Rounds) || r.Errors != 0 || r.Server < r.Client {
					t.Errorf("%s, %s: %d client requests (want %d), %d errors, %d server requests",
						sc.Scenario, r.Name, r.Client, sc.Requests*sc.Rounds, r.Errors, r.Server)
				}
			}
		}
	})

	t.Run("outage: without a budget every request makes 4 attempts", func(t *testing.T) {
		for _, r := range res.Outage.Rows[1:] {
			if r.PerRequest != 4 {
				t.Errorf("%s: %.3f attempts per request, want 4", r.Name, r.PerRequest)
			}
		}
		if g := res.Outage.Rows[0]; g.PerRequest >= 4 {
			t.Errorf("gotry's budget did not limit retries: %.3f attempts per request", g.PerRequest)
		}
		if !res.Outage.Breaker.Opened {
			t.Error("gotry's breaker never opened during a total outage")
		}
	})

	t.Run("recovery: peers without a breaker succeed as soon as the backend is up", func(t *testing.T) {
		for _, r := range res.Recovery.Rows[1:] {
			if r.RequestsAfterUp == 0 || r.FailuresAfterUp != 0 {
				t.Errorf("%s: %d of %d requests failed after recovery", r.Name, r.FailuresAfterUp, r.RequestsAfterUp)
			}
		}
	})

	t.Run("overload ran every candidate through the drop and without it", func(t *testing.T) {
		if len(res.Overload.Rows) != len(overloadCandidates()) {
			t.Fatalf("%d rows, want %d", len(res.Overload.Rows), len(overloadCandidates()))
		}
		for _, r := range res.Overload.Rows {
			if len(r.Drop) != 1 || len(r.Steady) != 1 {
				t.Fatalf("%s: %d drop runs, %d steady runs, want 1 each", r.Name, len(r.Drop), len(r.Steady))
			}
			if d := r.Drop[0]; d.Requests == 0 || !(d.Peak > 0) || !(d.Normal > 0) {
				t.Errorf("%s: %d requests, peak %v, normal goodput %v", r.Name, d.Requests, d.Peak, d.Normal)
			}
			if s := r.Steady[0]; s.Requests == 0 || !(s.Goodput > 0) {
				t.Errorf("%s steady: %d requests, goodput %v", r.Name, s.Requests, s.Goodput)
			}
		}
		if n := res.Overload.Rows[0]; n.Name != "no retries" || n.Drop[0].Shed != 0 {
			t.Errorf("first row %q shed %d, want no retries shedding nothing", n.Name, n.Drop[0].Shed)
		}
	})

	t.Run("crowd ran every candidate's clients through the drop and without it", func(t *testing.T) {
		if len(res.Crowd.Rows) != len(crowdCandidates()) {
			t.Fatalf("%d rows, want %d", len(res.Crowd.Rows), len(crowdCandidates()))
		}
		for _, r := range res.Crowd.Rows {
			if len(r.Drop) != 1 || len(r.Steady) != 1 {
				t.Fatalf("%s: %d drop runs, %d steady runs, want 1 each", r.Name, len(r.Drop), len(r.Steady))
			}
			if d := r.Drop[0]; d.Requests == 0 || d.GoodTotal == 0 || !(d.Peak > 0) || !(d.Normal > 0) || d.Fairness < 0 || d.Fairness > 1 {
				t.Errorf("%s: %d requests, %d good, peak %v, normal %v, fairness %v", r.Name, d.Requests, d.GoodTotal, d.Peak, d.Normal, d.Fairness)
			}
			if s := r.Steady[0]; s.Requests == 0 || s.GoodTotal == 0 {
				t.Errorf("%s steady: %d requests, %d good", r.Name, s.Requests, s.GoodTotal)
			}
		}
		if n := res.Crowd.Rows[0]; n.Name != "no retries" || n.Drop[0].Shed != 0 {
			t.Errorf("first row %q shed %d, want no retries shedding nothing", n.Name, n.Drop[0].Shed)
		}
	})

	t.Run("scaling measured every level", func(t *testing.T) {
		for _, r := range res.Scaling.Rows {
			for ci, v := range r.OpsPerSec {
				if !(v > 0) {
					t.Errorf("%d goroutines, %s: %v ops/s", r.Goroutines, res.Scaling.Names[ci], v)
				}
			}
		}
	})

	t.Run("fleet: the budget's bound holds for every fleet and chain", func(t *testing.T) { checkFleet(t, res.Fleet) })

	t.Run("ladder: every cell ran every candidate; the outage stays within the fleet bound", func(t *testing.T) { checkLadder(t, res.Ladder) })
}
