package bench

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestLadderQuick runs the ladder alone in quick mode (a few seconds), so
// `go test -run Ladder` checks it without the other scenarios.
func TestLadderQuick(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	res, err := Run(&out, Config{Quick: true, Only: []string{"ladder"}})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	for _, h := range []string{"Independent failures", "fleet bound", "Goals"} {
		if !strings.Contains(out.String(), h) {
			t.Errorf("output has no %q:\n%s", h, out.String())
		}
	}
	checkLadder(t, res.Ladder)
}

// TestFailsAtDrawsItsShare: the draws fail about p of arrivals (p = 0 none,
// p = 1 every one), and two seeds draw differently.
func TestFailsAtDrawsItsShare(t *testing.T) {
	const n = 20000
	for _, p := range append([]float64{0, 1}, ladderShares...) {
		fails, differ := 0, 0
		for i := int64(1); i <= n; i++ {
			a := failsAt(ladderSeed, i, p)
			if a {
				fails++
			}
			if a != failsAt(ladderSeed+1, i, p) {
				differ++
			}
		}
		// Within 4 standard errors: one is at most 0.5/√n, 0.0035.
		if share := float64(fails) / n; share < p-0.015 || share > p+0.015 {
			t.Errorf("p = %v: %d of %d arrivals failed (%.4f)", p, fails, n, share)
		}
		if p > 0 && p < 1 && differ == 0 {
			t.Errorf("p = %v: seeds %d and %d drew the same sequence", p, ladderSeed, ladderSeed+1)
		}
	}
}

// checkLadder checks what the ladder counted, never timings: every cell
// ran every candidate for the whole schedule; nothing without retries sends
// a second attempt and no retrier sends more than its attempts; no
// candidate succeeds for more requests than the server answered 200 to; in
// the outage nothing succeeds and gotry's fleets stay within the budget's
// fleet bound.
func checkLadder(t *testing.T, l *LadderResult) {
	t.Helper()
	if l == nil {
		t.Fatal("the ladder did not run")
	}
	if want := len(ladderShapes) * len(ladderShares); len(l.Cells) != want {
		t.Fatalf("%d cells, want %d", len(l.Cells), want)
	}
	for _, c := range l.Cells {
		want := int64(l.Rounds) * int64(float64(c.Shape.Clients)*c.Shape.PerClient*l.Cell.Seconds())
		if len(c.Rows) != len(ladderCandidates) {
			t.Fatalf("%d × %g/s, p = %v: %d rows, want %d", c.Shape.Clients, c.Shape.PerClient, c.P, len(c.Rows), len(ladderCandidates))
		}
		for i, r := range c.Rows {
			most := int64(ladderAttempts)
			if i == 0 {
				most = 1
			}
			if r.Requests != want || r.Server < r.Requests || r.Server > most*r.Requests || r.OK > r.Requests || r.OK == 0 || len(r.Rounds) != l.Rounds {
				t.Errorf("%d × %g/s, p = %v, %s: %d requests (want %d), %d at the server (at most %d each), %d succeeded, %d rounds",
					c.Shape.Clients, c.Shape.PerClient, c.P, r.Name, r.Requests, want, r.Server, most, r.OK, len(r.Rounds))
			}
		}
	}
	if len(l.Outage) != len(ladderOutageShapes) {
		t.Fatalf("%d outage rows, want %d", len(l.Outage), len(ladderOutageShapes))
	}
	for _, r := range l.Outage {
		if r.Requests == 0 || r.OK != 0 || r.Server < r.Requests || r.Server > r.Bound {
			t.Errorf("outage, %d × %g/s: %d requests, %d succeeded, %d attempts at the server; fleet bound %d",
				r.Shape.Clients, r.Shape.PerClient, r.Requests, r.OK, r.Server, r.Bound)
		}
	}
}
