package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// writeTables prints, for every group with a "bare" case, each case against
// bare; then every telemetry case against its otelhttp reference; then
// "armed" against "armed-floor" where a group has both; then the x-bare
// ratios benchmarks report themselves.
func writeTables(w io.Writer, in *input) {
	for _, g := range in.groups {
		bare := g.byName["bare"]
		if bare == nil {
			continue
		}
		fmt.Fprintf(w, "\n%s (%d rounds; ns/op and allocs medians, × bare the median of per-round ratios)\n", g.key, len(bare.ns))
		fmt.Fprintf(w, "  %-28s %12s %8s %10s %12s\n", "case", "ns/op", "× bare", "allocs/op", "extra allocs")
		for _, c := range g.cases {
			fmt.Fprintf(w, "  %-28s %12.1f %8s %10s %12s\n", c.name, median(c.ns),
				fmtRatio(pairedRatio(c, bare)), fmtAllocs(c), fmtExtra(c, bare))
		}
	}
	for _, g := range in.groups {
		pairs := telemetryPairs(g)
		if len(pairs) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: telemetry against otelhttp alone (median of per-round ratios)\n", g.key)
		fmt.Fprintf(w, "  %-28s %-20s %10s %12s\n", "case", "reference", "× ref", "extra allocs")
		for _, p := range pairs {
			fmt.Fprintf(w, "  %-28s %-20s %10s %12s\n", p.c.name, p.ref.name,
				fmtRatio(pairedRatio(p.c, p.ref)), fmtExtra(p.c, p.ref))
		}
	}
	header := false
	for _, g := range in.groups {
		armed, floor := g.byName["armed"], g.byName["armed-floor"]
		if armed == nil || floor == nil {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\narmed against armed-floor, the least its semantics need: the engine's own cost (median of per-round ratios; difference of the ns/op medians)\n")
			header = true
		}
		fmt.Fprintf(w, "  %-44s %8s %+10.0f ns/op\n", g.key, fmtRatio(pairedRatio(armed, floor)), median(armed.ns)-median(floor.ns))
	}
	header = false
	for _, g := range in.groups {
		for _, c := range g.cases {
			xs := c.metrics["x-bare"]
			if len(xs) == 0 {
				continue
			}
			if !header {
				fmt.Fprintf(w, "\nratios the benchmarks measure themselves (x-bare, medians)\n")
				header = true
			}
			fmt.Fprintf(w, "  %-44s %8.2f×\n", g.key+"/"+c.name, median(xs))
		}
	}
}

// pair is a case and the case it is compared with.
type pair struct{ c, ref *benchCase }

// telemetryPairs pairs every case of g whose name contains "telemetry" with
// its otelhttp reference: the case named like it with "gotry+telemetry"
// replaced by "otelhttp" (so "gotry+telemetry+batch" goes with
// "otelhttp+batch") if g has one, else the case named "otelhttp". A group
// without an otelhttp case has no pairs.
func telemetryPairs(g *group) []pair {
	plain := g.byName["otelhttp"]
	if plain == nil {
		return nil
	}
	var ps []pair
	for _, c := range g.cases {
		if !strings.Contains(c.name, "telemetry") {
			continue
		}
		ref := g.byName[strings.Replace(c.name, "gotry+telemetry", "otelhttp", 1)]
		if ref == nil || ref == c {
			ref = plain
		}
		ps = append(ps, pair{c, ref})
	}
	return ps
}

func fmtRatio(r float64) string {
	if r <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", r)
}

func fmtAllocs(c *benchCase) string {
	if !c.hasMem() {
		return "-"
	}
	return fmtNum(median(c.allocs), false)
}

// fmtExtra is c's median allocations beyond ref's, signed.
func fmtExtra(c, ref *benchCase) string {
	if !c.hasMem() || !ref.hasMem() {
		return "-"
	}
	return fmtNum(median(c.allocs)-median(ref.allocs), true)
}

// fmtNum prints whole numbers without decimals (medians of an even count
// may fall between two).
func fmtNum(v float64, signed bool) string {
	f := "%.0f"
	if v != math.Trunc(v) {
		f = "%.1f"
	}
	if signed {
		f = "%+" + f[1:]
	}
	return fmt.Sprintf(f, v)
}
