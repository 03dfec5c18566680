package bench

import (
	"fmt"
	"io"
	"strings"
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
				gs = append(gs, goal{fmt.Sprintf("gotry defaults lowest overhead of all peers (%s, %s)", short(b), short(m)),
					measured, len(slower) == 0 && len(moreAllocs) == 0})
				limit := 1.3
				if strings.HasPrefix(b, "loopback") {
					limit = 1.03
				}
				gs = append(gs, goal{fmt.Sprintf("gotry defaults ≤ %.2f× bare (%s, %s)", limit, short(b), short(m)),
					fmt.Sprintf("%.2f×, %+.1f allocs/op", g.Ratio, g.Allocs-rows[0].Allocs), g.Ratio <= limit})
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
	if o := res.Outage; o != nil && len(o.Rows) > 0 {
		g := o.Rows[0]
		gs = append(gs, goal{"outage amplification ≤ 1.15 with defaults", fmt.Sprintf("%.3f attempts per request", g.PerRequest), g.PerRequest <= 1.15})
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
