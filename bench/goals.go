package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// The success-path targets of issue #13, as multiples of bare measured in
// the same run through an *http.Client: on the in-memory base unless named
// otherwise, sequential and parallel alike.
const (
	defaultsMaxRatio       = 1.10
	defaultsMaxExtraAllocs = 0
	armedMaxRatio          = 2.0 // breaker + hedging armed (never fires) + per-attempt timeout
	armedMaxExtraAllocs    = 4
	loopbackMaxRatio       = 1.03 // gotry defaults on the loopback base

	// allocSlack absorbs the background allocations runtime.MemStats
	// counts beside the measured requests: allocation targets are whole
	// numbers, medians of MemStats are not quite.
	allocSlack = 0.5
)

// goal is one target from the issue and whether this run met it.
type goal struct {
	what, measured string
	met            bool
}

// peers are the overhead rows gotry's defaults must beat.
var peers = []string{"go-retryablehttp", "failsafe-go retry", "failsafe-go retry+hedge(1s)", "heimdall retries", "otelhttp"}

func (res *Results) goals() []goal {
	var gs []goal
	if o := res.Overhead; o != nil {
		for bi, b := range o.Bases {
			for mi, m := range o.Modes {
				rows := o.Rows[bi][mi]
				find := func(name string) OverheadRow {
					for _, r := range rows {
						if r.Name == name {
							return r
						}
					}
					return OverheadRow{}
				}
				// Time is compared by the paired ratios to bare, which drift
				// does not skew; a peer whose ratio is lower wins, and the
				// overlap of interquartile ranges is noted as within noise.
				g := find("gotry defaults")
				var slower, moreAllocs []string
				for _, p := range peers {
					pr := find(p)
					if pr.Ratio <= g.Ratio {
						note := fmt.Sprintf("%s %.2f×", p, pr.Ratio)
						if pr.RatioHi >= g.RatioLo {
							note += " (IQRs overlap)"
						}
						slower = append(slower, note)
					}
					if pr.Allocs < g.Allocs-0.5 {
						moreAllocs = append(moreAllocs, fmt.Sprintf("%s %.0f", p, pr.Allocs))
					}
				}
				measured := fmt.Sprintf("gotry %.2f×, %.0f allocs: lower than every peer", g.Ratio, g.Allocs)
				if len(slower) > 0 || len(moreAllocs) > 0 {
					measured = fmt.Sprintf("gotry %.2f×, %.0f allocs; ", g.Ratio, g.Allocs)
					if len(slower) > 0 {
						measured += "faster: " + strings.Join(slower, ", ") + "; "
					}
					if len(moreAllocs) > 0 {
						measured += "fewer allocs: " + strings.Join(moreAllocs, ", ")
					}
					measured = strings.TrimSuffix(measured, "; ")
				}
				where := fmt.Sprintf("(%s, %s)", short(b), short(m))
				gs = append(gs, goal{"gotry defaults lowest overhead of all peers " + where,
					measured, len(slower) == 0 && len(moreAllocs) == 0})
				if strings.HasPrefix(b, "loopback") {
					gs = append(gs, goal{fmt.Sprintf("gotry defaults ≤ %.2f× bare %s", loopbackMaxRatio, where),
						fmt.Sprintf("%.2f×", g.Ratio), g.Ratio <= loopbackMaxRatio})
					continue
				}
				gs = append(gs,
					overBare("gotry defaults", g, rows[0], defaultsMaxRatio, defaultsMaxExtraAllocs, where),
					overBare("gotry breaker+hedge(1s)+timeout", find("gotry breaker+hedge(1s)+timeout"), rows[0], armedMaxRatio, armedMaxExtraAllocs, where),
					telemetryVsOtelhttp(find("gotry + telemetry"), find("otelhttp"), where))
			}
		}
	}
	if h := res.Hedging; h != nil && len(h.Rows) == 3 {
		un, gt, fs := h.Rows[0], h.Rows[1], h.Rows[2]
		gs = append(gs,
			goal{"hedging p99 ≤ ⅕ of unhedged", fmt.Sprintf("%s vs %s (%.3f)", fmtDur(gt.P99), fmtDur(un.P99), gt.P99VsUnhedgedRatio), gt.P99VsUnhedgedRatio <= 0.2},
			goal{"hedging extra load ≤ 6%", fmt.Sprintf("%+.1f%%", 100*gt.ExtraLoad), gt.ExtraLoad <= 0.06},
			hedgeVsFailsafe(gt, fs))
	}
	for _, r := range res.Random {
		gs = append(gs, r.goals()...)
	}
	if o := res.Outage; o != nil && len(o.Rows) > 0 {
		g := o.Rows[0]
		gs = append(gs, goal{"outage amplification ≤ 1.15 with defaults", fmt.Sprintf("%.3f attempts per request", g.PerRequest), g.PerRequest <= 1.15})
	}
	if o := res.Overload; o != nil {
		gs = append(gs, o.goals()...)
	}
	if f := res.Fleet; f != nil {
		gs = append(gs, f.goals()...)
	}
	if l := res.Ladder; l != nil {
		gs = append(gs, l.goals()...)
	}
	return gs
}

// goals are issue 23's targets, on the medians over the rounds.
func (o *OverloadResult) goals() []goal {
	find := func(name string) *OverloadRow {
		for i := range o.Rows {
			if o.Rows[i].Name == name {
				return &o.Rows[i]
			}
		}
		return nil
	}
	rec := func(r *OverloadRow) float64 {
		return medianOf(r.Drop, func(x OverloadRun) float64 {
			if x.Recovery < 0 {
				return math.Inf(1)
			}
			return x.Recovery.Seconds()
		})
	}
	var gs []goal
	if g, n := find("gotry defaults"), find("no retries"); g != nil && n != nil {
		gr, nr := rec(g), rec(n)
		gs = append(gs, goal{"overload: gotry defaults back to normal no later than no retries (to the 0.1s a bin measures)",
			fmt.Sprintf("%.1fs vs %.1fs", gr, nr), gr <= nr+arrivalBin.Seconds()})
		peak := medianOf(g.Drop, func(x OverloadRun) float64 { return x.Peak })
		gs = append(gs, goal{"overload: gotry defaults peak arrivals ≤ 1.2× offered", fmt.Sprintf("%.2f×", peak), peak <= 1.2})
	}
	if l := find("gotry + limit"); l != nil {
		can := o.Config.capacity() / o.Config.Factor
		good := medianOf(l.Drop, func(x OverloadRun) float64 { return x.Goodput })
		gs = append(gs, goal{"overload: gotry + limit goodput during the drop ≥ 95% of what the server can serve",
			fmt.Sprintf("%.0f/s of %.0f/s (%.0f%%)", good, can, 100*good/can), good >= 0.95*can})
		r := rec(l)
		gs = append(gs, goal{"overload: gotry + limit back to ≥ 90% of normal within 1s of the drop's end", fmt.Sprintf("%.1fs", r), r <= 1})
		var shed, n int
		for _, s := range l.Steady {
			shed, n = shed+s.Shed, n+s.Requests
		}
		frac := float64(shed) / float64(max(n, 1))
		gs = append(gs, goal{fmt.Sprintf("overload: gotry + limit sheds ≤ 0.01%% at steady %.0f%% load", 100*o.Config.Load),
			fmt.Sprintf("%d of %d (%.3f%%)", shed, n, 100*frac), frac <= 0.0001})
	}
	return gs
}

func (res *Results) writeGoals(w io.Writer) {
	gs := res.goals()
	if len(gs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Goals\n\n| goal | this run | met |\n|---|---|---|\n")
	for _, g := range gs {
		met := "yes"
		if !g.met {
			met = "**no**"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", g.what, g.measured, met)
	}
}

// hedgeVsFailsafe compares the hedgers' pooled p99. When gotry's is higher
// but inside failsafe-go's range over the rounds, it is a tie and says so.
func hedgeVsFailsafe(gt, fs HedgeRow) goal {
	g := goal{what: "hedging p99 no worse than failsafe-go",
		measured: fmt.Sprintf("%s (rounds %s–%s) vs %s (rounds %s–%s)", fmtDur(gt.P99), fmtDur(gt.P99Lo), fmtDur(gt.P99Hi),
			fmtDur(fs.P99), fmtDur(fs.P99Lo), fmtDur(fs.P99Hi))}
	switch {
	case gt.P99 <= fs.P99:
		g.met = true
	case gt.P99Lo <= fs.P99Hi:
		g.met = true
		g.measured += ": tie, the round ranges overlap"
	}
	return g
}

// overBare is the goal that row costs at most maxRatio × bare in time and
// maxExtra allocations beyond bare.
func overBare(name string, row, bare OverheadRow, maxRatio, maxExtra float64, where string) goal {
	extra := row.Allocs - bare.Allocs
	return goal{fmt.Sprintf("%s ≤ %.2f× bare and ≤ %+.0f allocs %s", name, maxRatio, maxExtra, where),
		fmt.Sprintf("%.2f×, %+.1f allocs/op", row.Ratio, extra),
		row.Ratio <= maxRatio && extra <= maxExtra+allocSlack}
}

// telemetryVsOtelhttp is the goal that gotry with full telemetry costs no
// more than otelhttp alone, in time (their paired ratios to bare) and in
// allocations.
func telemetryVsOtelhttp(tel, otel OverheadRow, where string) goal {
	return goal{fmt.Sprintf("gotry + telemetry ≤ otelhttp alone in time and allocs %s", where),
		fmt.Sprintf("%.2f× vs %.2f× bare, %.1f vs %.1f allocs/op", tel.Ratio, otel.Ratio, tel.Allocs, otel.Allocs),
		tel.Ratio <= otel.Ratio && tel.Allocs <= otel.Allocs+allocSlack}
}
