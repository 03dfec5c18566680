package resilience

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// A deterministic simulation of adaptive hedging on one key: closed-loop
// workers send calls whose every attempt draws its latency on its own, on
// simulated time, through the key's real record, current, deposit, take and
// untake. It measures what the engine would do without a network or a
// scheduler in the way, so algorithm changes can be compared exactly.

// simModel draws one attempt's latency; shifted says the call started
// after the shift.
type simModel func(r *rand.Rand, shifted bool) time.Duration

// simStalls: 1ms (plus a little jitter, as a loaded loopback has), each
// draw 5% likely to take 20–200ms more; once shifted, a base of 15–22ms.
func simStalls(r *rand.Rand, shifted bool) time.Duration {
	base := time.Millisecond + time.Duration(r.ExpFloat64()*float64(200*time.Microsecond))
	if shifted {
		base = 15*time.Millisecond + time.Duration(r.Float64()*float64(7*time.Millisecond))
	}
	if r.Float64() < 0.05 {
		base += 20*time.Millisecond + time.Duration(r.Float64()*float64(180*time.Millisecond))
	}
	return base
}

func simLognormal(r *rand.Rand, _ bool) time.Duration {
	return time.Duration(float64(time.Millisecond) * math.Exp(1.25*r.NormFloat64()))
}

type simResult struct {
	lat            []time.Duration // per call, in start order
	hedges, capped int
	hedgesAfter    int             // from the shift on
	delays         []time.Duration // the delay each call used
}

// simulate runs n calls from workers closed-loop workers. fixed > 0 hedges
// after fixed instead (no key).
func simulate(cfg AdaptiveHedging, fixed time.Duration, model simModel, n, workers int, seed uint64, shiftCall int) simResult {
	r := rand.New(rand.NewPCG(seed, 1))
	k := newHedgeKey(&cfg)
	free := make([]time.Duration, workers) // when each worker is next free
	type pending struct {
		at  time.Duration
		dur time.Duration
		ok  bool
	}
	last := make([]pending, workers)
	var res simResult
	for i := range n {
		w := 0
		for j := range free {
			if free[j] < free[w] {
				w = j
			}
		}
		t := free[w]
		if p := last[w]; p.ok && fixed == 0 {
			k.record(adaptiveStart.Add(p.at), p.dur)
		}
		shifted := shiftCall >= 0 && i >= shiftCall
		draw := func() time.Duration { return model(r, shifted) }
		d := fixed
		if fixed == 0 {
			k.deposit()
			d = k.current(adaptiveStart.Add(t))
		}
		res.delays = append(res.delays, d)
		l0 := draw()
		total := l0
		if l0 > d {
			if fixed > 0 || k.take() {
				res.hedges++
				if shifted {
					res.hedgesAfter++
				}
				total = min(l0, d+draw())
			} else {
				res.capped++
			}
		}
		res.lat = append(res.lat, total)
		free[w] = t + total
		last[w] = pending{at: t + total, dur: total, ok: true}
		if total < l0 {
			last[w].dur = lostLatency(total) // a first attempt that lost, as the engine records it
		}
	}
	return res
}

// simRow is one candidate's pooled figures in one scenario.
type simRow struct {
	p99, p99After   time.Duration
	load, loadAfter float64 // hedges per call, overall and from the shift on
}

// TestAdaptiveSimulation holds adaptive hedging at MaxExtraLoad 5% to issue
// 24's targets on the simulation (every figure is logged; run with -v):
// on random stalls a p99 within 1.1× the best fixed delay's whose extra
// load is at most 5.5%, at no more than 5.5%; after a shift in latency a
// p99 at most 0.35× the unhedged one (the fixed delays tuned for the old
// latency have no budget to hold them here, so they are no yardstick) at
// no more than 5.5%; on lognormal latencies a p99 within 1.1× the fixed
// delays' interpolated at its own extra load.
func TestAdaptiveSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	const n, workers, rounds = 2000, 4, 5
	type cand struct {
		name  string
		cfg   AdaptiveHedging
		fixed time.Duration
	}
	cands := []cand{
		{"adaptive 5%", AdaptiveHedging{MaxExtraLoad: 0.05}, 0},
		{"adaptive 10%", AdaptiveHedging{MaxExtraLoad: 0.10}, 0},
		{"unhedged", AdaptiveHedging{}, time.Hour},
		{"fixed 2ms", AdaptiveHedging{}, 2 * time.Millisecond},
		{"fixed 5ms", AdaptiveHedging{}, 5 * time.Millisecond},
		{"fixed 7.8ms", AdaptiveHedging{}, 7800 * time.Microsecond},
		{"fixed 9ms", AdaptiveHedging{}, 9 * time.Millisecond},
		{"fixed 10ms", AdaptiveHedging{}, 10 * time.Millisecond},
		{"fixed 25ms", AdaptiveHedging{}, 25 * time.Millisecond},
	}
	rows := map[string]map[string]simRow{}
	for _, sc := range []struct {
		name      string
		model     simModel
		shiftCall int
	}{{"stalls", simStalls, -1}, {"shift", simStalls, n / 2}, {"lognormal", simLognormal, -1}} {
		rows[sc.name] = map[string]simRow{}
		for _, c := range cands {
			var lat, after []time.Duration
			var hedges, hedgesAfter, capped, calls int
			var delays []time.Duration
			from := max(sc.shiftCall, 0)
			for round := range rounds {
				res := simulate(c.cfg, c.fixed, sc.model, n, workers, uint64(round), sc.shiftCall)
				lat = append(lat, res.lat...)
				after = append(after, res.lat[from:]...)
				hedges += res.hedges
				hedgesAfter += res.hedgesAfter
				capped += res.capped
				calls += n
				delays = append(delays, res.delays[100:]...)
			}
			slices.Sort(lat)
			slices.Sort(after)
			slices.Sort(delays)
			q := func(l []time.Duration, p float64) time.Duration { return l[int(math.Ceil(p*float64(len(l))))-1] }
			row := simRow{p99: q(lat, .99), p99After: q(after, .99), load: float64(hedges) / float64(calls),
				loadAfter: float64(hedgesAfter) / float64(calls-rounds*from)}
			rows[sc.name][c.name] = row
			t.Logf("%-9s %-12s p50 %-8v p99 %-8v p99 after %-8v load %5.2f%% (after %5.2f%%) capped %4d (%.2f%%) delay p10/50/90 %v/%v/%v",
				sc.name, c.name, q(lat, .5).Round(10*time.Microsecond), row.p99.Round(10*time.Microsecond), row.p99After.Round(10*time.Microsecond),
				100*row.load, 100*row.loadAfter, capped, 100*float64(capped)/float64(calls),
				q(delays, .1).Round(10*time.Microsecond), q(delays, .5).Round(10*time.Microsecond), q(delays, .9).Round(10*time.Microsecond))
		}
	}
	a := rows["stalls"]["adaptive 5%"]
	var best time.Duration
	for name, r := range rows["stalls"] {
		if strings.HasPrefix(name, "fixed") && r.load <= 0.055 && (best == 0 || r.p99 < best) {
			best = r.p99
		}
	}
	if float64(a.p99) > 1.1*float64(best) || a.load > 0.055 {
		t.Errorf("random stalls: adaptive p99 %v at %.2f%% load, want ≤ 1.1 × %v (the best fixed delay within 5.5%%) at ≤ 5.5%%", a.p99, 100*a.load, best)
	}
	a, un := rows["shift"]["adaptive 5%"], rows["shift"]["unhedged"]
	if float64(a.p99After) > 0.35*float64(un.p99After) || a.loadAfter > 0.055 {
		t.Errorf("shift: adaptive p99 after %v at %.2f%% load, want ≤ 0.35 × %v (unhedged) at ≤ 5.5%%", a.p99After, 100*a.loadAfter, un.p99After)
	}
	a = rows["lognormal"]["adaptive 5%"]
	var fixed []simRow
	for name, r := range rows["lognormal"] {
		if strings.HasPrefix(name, "fixed") {
			fixed = append(fixed, r)
		}
	}
	slices.SortFunc(fixed, func(x, y simRow) int { return cmp.Compare(x.load, y.load) })
	var at time.Duration
	for i := 1; i < len(fixed); i++ {
		if x, y := fixed[i-1], fixed[i]; a.load >= x.load && a.load <= y.load {
			at = x.p99 + time.Duration((a.load-x.load)/(y.load-x.load)*float64(y.p99-x.p99))
		}
	}
	if at == 0 || float64(a.p99) > 1.1*float64(at) {
		t.Errorf("lognormal: adaptive p99 %v at %.2f%% load, want ≤ 1.1 × %v (the fixed delays at that load)", a.p99, 100*a.load, at)
	}
}
