package main

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// input is everything parse gathered from one `go test -bench` output.
type input struct {
	groups   []*group          // in the order they first appear
	byKey    map[string]*group // by group.key
	results  int               // benchmark result lines seen
	failures []string          // lines that report a failure
}

// group is one benchmark function of one package, e.g.
// "transport.BenchmarkInMemory"; its cases are its sub-benchmarks (a
// benchmark without sub-benchmarks is one case named "").
type group struct {
	key    string
	cases  []*benchCase // in the order they first appear
	byName map[string]*benchCase
}

// benchCase holds every result of one sub-benchmark (one per -count).
type benchCase struct {
	name              string
	ns, bytes, allocs []float64
	metrics           map[string][]float64 // other units, e.g. "x-bare"
}

// resultLine is a benchmark result: the name (with the -GOMAXPROCS suffix),
// the iteration count, then value-unit pairs.
var resultLine = regexp.MustCompile(`^(Benchmark\S+)\s+\d+\s+(.+)$`)

// procsSuffix is the "-N" go test appends to a name when GOMAXPROCS > 1.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// parse reads go test output from r, copying every line to echo.
func parse(r io.Reader, echo io.Writer) (*input, error) {
	in := &input{byKey: map[string]*group{}}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		text := sc.Text()
		fmt.Fprintln(echo, text)
		switch {
		case strings.HasPrefix(text, "pkg: "):
			pkg = path.Base(strings.TrimSpace(strings.TrimPrefix(text, "pkg: ")))
			continue
		case strings.HasPrefix(text, "--- FAIL"), strings.HasPrefix(text, "FAIL"), strings.HasPrefix(text, "panic: "):
			in.failures = append(in.failures, strings.TrimSpace(text))
			continue
		}
		m := resultLine.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		in.results++
		// A group is everything before the last "/": nested sub-benchmarks
		// (BenchmarkRoundTrip/batcher/otelhttp) group by their parent.
		name := procsSuffix.ReplaceAllString(m[1], "")
		top, sub := name, ""
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			top, sub = name[:i], name[i+1:]
		}
		in.add(pkg, top, sub).record(strings.Fields(m[2]))
	}
	return in, sc.Err()
}

// add returns the case sub of benchmark top in package pkg, creating it and
// its group as needed.
func (in *input) add(pkg, top, sub string) *benchCase {
	key := top
	if pkg != "" {
		key = pkg + "." + top
	}
	g, ok := in.byKey[key]
	if !ok {
		g = &group{key: key, byName: map[string]*benchCase{}}
		in.byKey[key] = g
		in.groups = append(in.groups, g)
	}
	c, ok := g.byName[sub]
	if !ok {
		c = &benchCase{name: sub, metrics: map[string][]float64{}}
		g.byName[sub] = c
		g.cases = append(g.cases, c)
	}
	return c
}

// record adds one result's value-unit pairs; a value that does not parse
// is skipped.
func (c *benchCase) record(fields []string) {
	for i := 0; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			continue
		}
		switch unit := fields[i+1]; unit {
		case "ns/op":
			c.ns = append(c.ns, v)
		case "B/op":
			c.bytes = append(c.bytes, v)
		case "allocs/op":
			c.allocs = append(c.allocs, v)
		default:
			c.metrics[unit] = append(c.metrics[unit], v)
		}
	}
}

// lookup returns the case name of the group key, or nil.
func (in *input) lookup(key, name string) *benchCase {
	if g := in.byKey[key]; g != nil {
		return g.byName[name]
	}
	return nil
}

// hasMem reports whether the case was run with -benchmem.
func (c *benchCase) hasMem() bool { return len(c.allocs) > 0 }

// pairedRatio is the median over rounds of c's ns/op divided by ref's in
// the same round: the k-th result of c is paired with the k-th of ref.
// When every round runs every case once (make bench loops over
// go test -count=1), the two of a pair were measured seconds apart, so
// drift slower than that cancels out of their ratio; medians taken
// separately would not. It is 0 when either has no results.
func pairedRatio(c, ref *benchCase) float64 {
	n := min(len(c.ns), len(ref.ns))
	rs := make([]float64, 0, n)
	for k := range n {
		if ref.ns[k] > 0 {
			rs = append(rs, c.ns[k]/ref.ns[k])
		}
	}
	return median(rs)
}

// median of xs (the mean of the middle two when their number is even); 0
// for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
