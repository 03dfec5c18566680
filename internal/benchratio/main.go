// Command benchratio reads `go test -bench` output on stdin, echoes it, and
// then prints each sub-benchmark's time and allocations relative to the
// "bare" sub-benchmark of the same group, measured in the same run. With
// -count=N the median of the N results is used.
//
//	go test -run '^$' -bench . -benchmem ./transport/ | go run ./internal/benchratio
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var line = regexp.MustCompile(`^(Benchmark[^\s/]+)/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op\s+(\d+) allocs/op)?`)

type result struct {
	name   string
	ns     float64
	allocs int
	hasMem bool
}

func main() {
	groups := map[string][]result{}
	var order []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		text := sc.Text()
		fmt.Println(text)
		m := line.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		ns, _ := strconv.ParseFloat(m[3], 64)
		r := result{name: m[2], ns: ns}
		if m[5] != "" {
			r.allocs, _ = strconv.Atoi(m[5])
			r.hasMem = true
		}
		if _, ok := groups[m[1]]; !ok {
			order = append(order, m[1])
		}
		groups[m[1]] = append(groups[m[1]], r)
	}
	for g, rs := range groups {
		groups[g] = medians(rs)
	}
	for _, g := range order {
		var base *result
		for i := range groups[g] {
			if groups[g][i].name == "bare" {
				base = &groups[g][i]
			}
		}
		if base == nil {
			continue
		}
		fmt.Printf("\n%s (ratios against bare, same run)\n", g)
		fmt.Printf("  %-28s %12s %8s %14s\n", "case", "ns/op", "x bare", "extra allocs")
		for _, r := range groups[g] {
			extra := "-"
			if r.hasMem && base.hasMem {
				extra = strconv.Itoa(r.allocs - base.allocs)
			}
			fmt.Printf("  %-28s %12.1f %8.2f %14s\n", r.name, r.ns, r.ns/base.ns, extra)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, strings.TrimSpace(err.Error()))
		os.Exit(1)
	}
}

// medians folds repeated results of one case into their median, keeping
// the order in which cases first appeared.
func medians(rs []result) []result {
	byName := map[string][]result{}
	var names []string
	for _, r := range rs {
		if _, ok := byName[r.name]; !ok {
			names = append(names, r.name)
		}
		byName[r.name] = append(byName[r.name], r)
	}
	out := make([]result, 0, len(names))
	for _, n := range names {
		xs := byName[n]
		sort.Slice(xs, func(i, j int) bool { return xs[i].ns < xs[j].ns })
		out = append(out, xs[len(xs)/2])
	}
	return out
}
