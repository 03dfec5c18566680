package bench

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/transport"
)

// ScalingRow is throughput at one concurrency.
type ScalingRow struct {
	Goroutines int
	OpsPerSec  []float64 // per candidate, median over rounds
	Ratio      []float64 // per candidate, median of ÷ bare in the same round
}

// ScalingResult is the scaling table.
type ScalingResult struct {
	Names []string
	Rows  []ScalingRow
}

// runScaling measures in-memory throughput from 1 to 256 goroutines, through
// an *http.Client as in the overhead tables.
func runScaling(cfg *Config) (*ScalingResult, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://bench.local/item", nil)
	cands := []candidate{
		{"bare", memBase{}},
		{"gotry defaults", transport.New(memBase{})},
		{"gotry breaker+hedge(1s)+timeout", gotryArmed(memBase{})},
	}
	res := &ScalingResult{}
	ops := make([]op, len(cands))
	for i, c := range cands {
		res.Names = append(res.Names, c.name)
		ops[i] = clientOp(&http.Client{Transport: c.rt}, req)
	}
	tput := make([][][]float64, len(cfg.scalingLevels)) // [level][cand][round]
	for li := range tput {
		tput[li] = make([][]float64, len(cands))
	}
	for r := range cfg.Rounds {
		cfg.progress("scaling: round %d/%d", r+1, cfg.Rounds)
		for li, g := range cfg.scalingLevels {
			for j := range cands {
				ci := (j + r) % len(cands)
				t, err := throughput(ops[ci], g, cfg.scalingTime)
				if err != nil {
					return nil, fmt.Errorf("scaling %s at %d: %w", cands[ci].name, g, err)
				}
				tput[li][ci] = append(tput[li][ci], t)
			}
		}
	}
	for li, g := range cfg.scalingLevels {
		row := ScalingRow{Goroutines: g}
		for ci := range cands {
			var ratio []float64
			for r, t := range tput[li][ci] {
				ratio = append(ratio, t/tput[li][0][r])
			}
			row.OpsPerSec = append(row.OpsPerSec, median(tput[li][ci]))
			row.Ratio = append(row.Ratio, median(ratio))
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// throughput runs f on g goroutines for d and returns ops per second.
func throughput(f op, g int, d time.Duration) (float64, error) {
	var (
		stop  atomic.Bool
		total atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	start := make(chan struct{})
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var n int64
			for !stop.Load() {
				if err := f(); err != nil {
					once.Do(func() { first = err })
					break
				}
				n++
			}
			total.Add(n)
		}()
	}
	t0 := time.Now()
	close(start)
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return float64(total.Load()) / time.Since(t0).Seconds(), first
}

func (res *ScalingResult) write(w io.Writer) {
	fmt.Fprintf(w, "\n### Scaling (in-memory base)\n\n")
	fmt.Fprintf(w, "| goroutines |")
	for _, n := range res.Names {
		fmt.Fprintf(w, " %s ops/s |", n)
		if n != "bare" {
			fmt.Fprintf(w, " ÷ bare |")
		}
	}
	fmt.Fprintf(w, "\n|---:|")
	for _, n := range res.Names {
		fmt.Fprintf(w, "---:|")
		if n != "bare" {
			fmt.Fprintf(w, "---:|")
		}
	}
	fmt.Fprintln(w)
	for _, r := range res.Rows {
		fmt.Fprintf(w, "| %d |", r.Goroutines)
		for ci, n := range res.Names {
			fmt.Fprintf(w, " %s |", fmtOps(r.OpsPerSec[ci]))
			if n != "bare" {
				fmt.Fprintf(w, " %.2f |", r.Ratio[ci])
			}
		}
		fmt.Fprintln(w)
	}
}

func fmtOps(x float64) string {
	if x >= 1e6 {
		return fmt.Sprintf("%.2fM", x/1e6)
	}
	return fmt.Sprintf("%.0fk", x/1e3)
}
