// Command benchratio reads `go test -bench -benchmem` output on stdin,
// echoes it, and then prints:
//
//   - per group (one benchmark function of one package) that has a "bare"
//     sub-benchmark: every case's time as a multiple of bare's, and its
//     allocations beyond bare's, all from the same run;
//   - in a group that has an "otelhttp" case, every case whose name contains
//     "telemetry" against its otelhttp counterpart (see telemetryPairs);
//   - in a group that has "armed" and "armed-floor" cases, the one against
//     the other: the engine's own share of the armed cost;
//   - ratios benchmarks report themselves as an "x-bare" metric;
//   - the targets of issue #13, each marked met or MISSED with the numbers.
//
// Results are taken as rounds: the k-th result of a case belongs with the
// k-th of its reference. A ratio is the median over rounds of the two's
// ratio in each round; ns/op and allocations are medians over rounds. go
// test -count=N runs one case N times before the next, so a case and bare
// are measured in separate stretches of time, and on a shared machine load
// that comes and goes lands on one and not the other: make bench runs go
// test -count=1 N times instead, so that each round measures every case
// within seconds of bare. A missed
// target is a finding, not a failure: the exit status is 0 unless the input
// held no benchmark results or reported a failure (a FAIL line or a panic),
// so a broken benchmark fails `make bench` while a slow one does not.
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench . -benchmem ./transport/; done | go run ./internal/benchratio
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr))
}

// run is main with its streams as parameters; it returns the exit status.
func run(stdin io.Reader, stdout, stderr io.Writer) int {
	in, err := parse(stdin, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "benchratio:", err)
		return 1
	}
	writeTables(stdout, in)
	writeTargets(stdout, in)
	switch {
	case len(in.failures) > 0:
		fmt.Fprintf(stderr, "benchratio: the input reports a failure: %s\n", in.failures[0])
		return 1
	case in.results == 0:
		fmt.Fprintln(stderr, "benchratio: the input holds no benchmark results")
		return 1
	}
	return 0
}
