package main

import (
	"bytes"
	"strings"
	"testing"
)

// canned is go test output in the shape `make bench` produces: three
// rounds of go test -count=1 over two packages (the later rounds shortened
// to the in-memory group), a benchmark without sub-benchmarks, a custom
// metric, telemetry with a batcher pair, and armed beside its floor. Round 3 of "defaults" is an
// outlier that the median of per-round ratios must ignore.
const canned = `goos: linux
goarch: amd64
pkg: github.com/MrVSiK/gotry/transport
cpu: Some CPU
BenchmarkInMemory/bare-2         	 1000	  100.0 ns/op	 376 B/op	 5 allocs/op
BenchmarkInMemory/defaults-2     	 1000	  105.0 ns/op	 376 B/op	 5 allocs/op
BenchmarkInMemory/armed-2        	 1000	  300.0 ns/op	2000 B/op	15 allocs/op
BenchmarkInMemory/armed-floor-2  	 1000	  200.0 ns/op	1900 B/op	 9 allocs/op
BenchmarkInMemoryNewRequest/bare-2 	 1000	  200.0 ns/op	 700 B/op	 8 allocs/op
BenchmarkInMemoryNewRequest/defaults-2 	 1000	  210.0 ns/op	 700 B/op	 8 allocs/op
BenchmarkInMemoryNewRequest/armed-2 	 1000	  410.0 ns/op	1200 B/op	12 allocs/op
BenchmarkInMemoryParallel/bare-2 	 1000	   50.0 ns/op	 376 B/op	 5 allocs/op
BenchmarkInMemoryParallel/defaults-2 	 1000	   70.0 ns/op	 376 B/op	 5 allocs/op
BenchmarkInMemoryParallel/armed-2 	 1000	   90.0 ns/op	2000 B/op	 9 allocs/op
BenchmarkLoopback/bare-2         	 1000	 40000 ns/op	4500 B/op	58 allocs/op
BenchmarkLoopback/defaults-2     	 1000	 42000 ns/op	4500 B/op	58 allocs/op
BenchmarkInterleaved/loopback-2  	 1000	 80000 ns/op	 40000 bare-ns/op	 40400 gotry-ns/op	 1.010 x-bare	 9000 B/op	 116 allocs/op
BenchmarkRetriedRequestConnections-2 	 100	 90000 ns/op	 1.000 conns/op	 20000 B/op	 200 allocs/op
PASS
ok  	github.com/MrVSiK/gotry/transport	12.3s
pkg: github.com/MrVSiK/gotry/telemetry
BenchmarkRoundTrip/bare-2                   	 1000	   700 ns/op	  752 B/op	  7 allocs/op
BenchmarkRoundTrip/otelhttp-2               	 1000	  9000 ns/op	 5600 B/op	 30 allocs/op
BenchmarkRoundTrip/gotry-2                  	 1000	  1300 ns/op	  752 B/op	  7 allocs/op
BenchmarkRoundTrip/gotry+telemetry-2        	 1000	  8000 ns/op	 8000 B/op	 58 allocs/op
BenchmarkRoundTrip/otelhttp+batch-2         	 1000	 10000 ns/op	 5600 B/op	 31 allocs/op
BenchmarkRoundTrip/gotry+telemetry+batch-2  	 1000	 11000 ns/op	 6000 B/op	 20 allocs/op
PASS
ok  	github.com/MrVSiK/gotry/telemetry	5.1s
pkg: github.com/MrVSiK/gotry/transport
BenchmarkInMemory/bare-2         	 1000	  200.0 ns/op	 376 B/op	 5 allocs/op
BenchmarkInMemory/defaults-2     	 1000	  216.0 ns/op	 376 B/op	 5 allocs/op
BenchmarkInMemory/armed-2        	 1000	  380.0 ns/op	2000 B/op	 9 allocs/op
BenchmarkInMemory/armed-floor-2  	 1000	  250.0 ns/op	1900 B/op	 9 allocs/op
ok  	github.com/MrVSiK/gotry/transport	3.3s
pkg: github.com/MrVSiK/gotry/transport
BenchmarkInMemory/bare-2         	 1000	   90.0 ns/op	 376 B/op	 5 allocs/op
BenchmarkInMemory/defaults-2     	 1000	  999.0 ns/op	 376 B/op	 5 allocs/op
BenchmarkInMemory/armed-2        	 1000	  171.0 ns/op	2000 B/op	 9 allocs/op
BenchmarkInMemory/armed-floor-2  	 1000	  120.0 ns/op	1900 B/op	 9 allocs/op
ok  	github.com/MrVSiK/gotry/transport	3.3s
`

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		status int
		want   []string // lines of the output, with runs of blanks as one space
	}{
		{"medians against bare, targets met and missed", canned, 0, []string{
			// per-round ratios: defaults 1.05, 1.08, 11.1; armed 3.0, 1.9, 1.9
			"defaults 216.0 1.08× 5 +0",
			"armed 300.0 1.90× 9 +4",
			"met in-memory, sequential: defaults ≤ 1.10× bare 1.08× (216 vs 100 ns/op)",
			"met in-memory, sequential: defaults ≤ +0 allocs beyond bare +0 (5 vs 5 allocs/op)",
			"met in-memory, sequential: armed ≤ 2.00× bare 1.90× (300 vs 100 ns/op)",
			"met in-memory, sequential: armed ≤ +4 allocs beyond bare +4 (9 vs 5 allocs/op)",
			// the issue's own measure of bare, one round only
			"met in-memory, new request per call: defaults ≤ 1.10× bare 1.05× (210 vs 200 ns/op)",
			"MISSED in-memory, new request per call: armed ≤ 2.00× bare 2.05× (410 vs 200 ns/op)",
			// parallel: defaults 1.40× against 1.08× is 1.30, beyond 1.25
			"MISSED in-memory, parallel: defaults ≤ 1.25 × its sequential × bare 1.40× parallel vs 1.08× sequential (1.30)",
			"met in-memory, parallel: armed ≤ 1.25 × its sequential × bare 1.80× parallel vs 1.90× sequential (0.95)",
			"MISSED loopback: defaults ≤ 1.03× bare 1.05× (42000 vs 40000 ns/op)",
			"transport.BenchmarkInterleaved/loopback 1.01×",
			// armed against its floor: per-round 1.50, 1.52, 1.43; 300 - 200 ns
			"transport.BenchmarkInMemory 1.50× +100 ns/op",
			// telemetry against otelhttp, each with its own counterpart
			"gotry+telemetry otelhttp 0.89× +28",
			"gotry+telemetry+batch otelhttp+batch 1.10× -11",
			"met telemetry.BenchmarkRoundTrip: gotry+telemetry ≤ otelhttp in ns/op 0.89× (8000 vs 9000 ns/op)",
			"MISSED telemetry.BenchmarkRoundTrip: gotry+telemetry ≤ otelhttp in allocs/op 58 vs 30 allocs/op",
			"MISSED telemetry.BenchmarkRoundTrip: gotry+telemetry+batch ≤ otelhttp+batch in ns/op 1.10× (11000 vs 10000 ns/op)",
			"met telemetry.BenchmarkRoundTrip: gotry+telemetry+batch ≤ otelhttp+batch in allocs/op 20 vs 31 allocs/op",
		}},
		{"a group that was not run is not measured", "pkg: x/transport\nBenchmarkInMemory/bare-2 10 100 ns/op 1 B/op 1 allocs/op\n", 0, []string{
			"- loopback: defaults ≤ 1.03× bare not measured in this run",
			"- in-memory, sequential: defaults ≤ 1.10× bare not measured in this run",
		}},
		{"a failed benchmark fails the run", canned + "--- FAIL: BenchmarkLoopback/armed\nFAIL\tgithub.com/MrVSiK/gotry/transport\t1.0s\n", 1, []string{
			"met in-memory, sequential: defaults ≤ 1.10× bare 1.08× (216 vs 100 ns/op)",
		}},
		{"a package that does not build fails the run", "FAIL\tgithub.com/MrVSiK/gotry/transport [build failed]\n", 1, []string{
			"FAIL github.com/MrVSiK/gotry/transport [build failed]",
		}},
		{"no benchmark results fail the run", "PASS\nok  \tgithub.com/MrVSiK/gotry/transport\t0.1s\n", 1, []string{
			"ok github.com/MrVSiK/gotry/transport 0.1s",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			status := run(strings.NewReader(tc.input), &out, &errOut)
			if status != tc.status {
				t.Errorf("status %d, want %d; stderr: %s", status, tc.status, errOut.String())
			}
			lines := map[string]bool{}
			for _, l := range strings.Split(out.String(), "\n") {
				lines[strings.Join(strings.Fields(l), " ")] = true
			}
			for _, w := range tc.want {
				if !lines[w] {
					t.Errorf("output has no line %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tc := range tests {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}
