package main

import (
	"fmt"
	"io"
)

// The groups the targets are read from: transport/bench_test.go.
const (
	inMemory         = "transport.BenchmarkInMemory"
	inMemoryNewReq   = "transport.BenchmarkInMemoryNewRequest"
	inMemoryParallel = "transport.BenchmarkInMemoryParallel"
	loopback         = "transport.BenchmarkLoopback"
)

// The targets of issue #13, on the in-memory base through an http.Client
// unless named otherwise, as ratios to bare in the same run.
const (
	defaultsMaxRatio       = 1.10
	defaultsMaxExtraAllocs = 0
	armedMaxRatio          = 2.0
	armedMaxExtraAllocs    = 4
	loopbackMaxRatio       = 1.03

	// parallelTolerance is how far a case's parallel ratio to bare may rise
	// above its sequential ratio and still count as "keeps the sequential
	// ratio". On the 2-CPU VMs these run on, the parallel in-memory ratio of
	// unchanged code moves by up to about a fifth between runs, while
	// contention on shared state (a lock or a hot atomic on every request)
	// multiplies it; 1.25 tells the two apart. Only a rise is checked: a
	// lower parallel ratio keeps the target.
	parallelTolerance = 1.25
)

// verdict is one target and what this run measured for it.
type verdict struct {
	what     string
	measured string // empty: not measured in this run
	met      bool
}

// targets checks every target of the issue against in.
func targets(in *input) []verdict {
	vs := []verdict{
		ratioTarget(in, inMemory, "defaults", defaultsMaxRatio, "in-memory, sequential"),
		allocTarget(in, inMemory, "defaults", defaultsMaxExtraAllocs, "in-memory, sequential"),
		ratioTarget(in, inMemory, "armed", armedMaxRatio, "in-memory, sequential"),
		allocTarget(in, inMemory, "armed", armedMaxExtraAllocs, "in-memory, sequential"),
		// The issue measured bare with a new request per call (≈ 645 ns, 9
		// allocations through http.Client); BenchmarkInMemory reuses one,
		// the stricter measure. Both are checked.
		ratioTarget(in, inMemoryNewReq, "defaults", defaultsMaxRatio, "in-memory, new request per call"),
		ratioTarget(in, inMemoryNewReq, "armed", armedMaxRatio, "in-memory, new request per call"),
		parallelTarget(in, "defaults"),
		parallelTarget(in, "armed"),
		ratioTarget(in, loopback, "defaults", loopbackMaxRatio, "loopback"),
	}
	for _, g := range in.groups {
		for _, p := range telemetryPairs(g) {
			vs = append(vs, telemetryTargets(g.key, p)...)
		}
	}
	return vs
}

// ratioTarget: name's median ns/op is at most max times bare's.
func ratioTarget(in *input, key, name string, max float64, where string) verdict {
	v := verdict{what: fmt.Sprintf("%s: %s ≤ %.2f× bare", where, name, max)}
	c, bare := in.lookup(key, name), in.lookup(key, "bare")
	if c == nil || bare == nil {
		return v
	}
	r := pairedRatio(c, bare)
	if r <= 0 {
		return v
	}
	v.measured, v.met = fmt.Sprintf("%.2f× (%.0f vs %.0f ns/op)", r, median(c.ns), median(bare.ns)), r <= max
	return v
}

// allocTarget: name allocates at most max times beyond bare per request.
func allocTarget(in *input, key, name string, max float64, where string) verdict {
	v := verdict{what: fmt.Sprintf("%s: %s ≤ %+.0f allocs beyond bare", where, name, max)}
	c, bare := in.lookup(key, name), in.lookup(key, "bare")
	if c == nil || bare == nil || !c.hasMem() || !bare.hasMem() {
		return v
	}
	extra := median(c.allocs) - median(bare.allocs)
	v.measured, v.met = fmt.Sprintf("%s (%s vs %s allocs/op)", fmtNum(extra, true), fmtAllocs(c), fmtAllocs(bare)), extra <= max
	return v
}

// parallelTarget: name's ratio to bare under b.RunParallel is at most
// parallelTolerance times its sequential ratio.
func parallelTarget(in *input, name string) verdict {
	v := verdict{what: fmt.Sprintf("in-memory, parallel: %s ≤ %.2f × its sequential × bare", name, parallelTolerance)}
	sc, sb := in.lookup(inMemory, name), in.lookup(inMemory, "bare")
	pc, pb := in.lookup(inMemoryParallel, name), in.lookup(inMemoryParallel, "bare")
	if sc == nil || sb == nil || pc == nil || pb == nil {
		return v
	}
	seq, par := pairedRatio(sc, sb), pairedRatio(pc, pb)
	if seq <= 0 || par <= 0 {
		return v
	}
	v.measured = fmt.Sprintf("%.2f× parallel vs %.2f× sequential (%.2f)", par, seq, par/seq)
	v.met = par <= parallelTolerance*seq
	return v
}

// telemetryTargets: a telemetry case costs no more than its otelhttp
// reference, in time and in allocations.
func telemetryTargets(key string, p pair) []verdict {
	where := fmt.Sprintf("%s: %s", key, p.c.name)
	t := verdict{what: fmt.Sprintf("%s ≤ %s in ns/op", where, p.ref.name)}
	if r := pairedRatio(p.c, p.ref); r > 0 {
		t.measured, t.met = fmt.Sprintf("%.2f× (%.0f vs %.0f ns/op)", r, median(p.c.ns), median(p.ref.ns)), r <= 1
	}
	a := verdict{what: fmt.Sprintf("%s ≤ %s in allocs/op", where, p.ref.name)}
	if p.c.hasMem() && p.ref.hasMem() {
		ca, ra := median(p.c.allocs), median(p.ref.allocs)
		a.measured, a.met = fmt.Sprintf("%s vs %s allocs/op", fmtNum(ca, false), fmtNum(ra, false)), ca <= ra
	}
	return []verdict{t, a}
}

// writeTargets prints every target, met or MISSED, with this run's numbers.
func writeTargets(w io.Writer, in *input) {
	fmt.Fprintf(w, "\ntargets (issue #13; ratios are medians of per-round ratios; a missed target is reported, not failed)\n")
	for _, v := range targets(in) {
		status, measured := "MISSED", v.measured
		switch {
		case v.measured == "":
			status, measured = "-", "not measured in this run"
		case v.met:
			status = "met"
		}
		fmt.Fprintf(w, "  %-7s %-70s %s\n", status, v.what, measured)
	}
}
